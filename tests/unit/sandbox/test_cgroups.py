"""Where run cgroups go, from /proc/self/mountinfo and /proc/self/cgroup (pure: no cgroup touched)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ng_cli.sandbox.cgroups import CgroupParent, cgroup_parents

V2_HOST = """\
24 30 0:22 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
29 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate
"""
HYBRID = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HYBRID_OWN = "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n0::/\n"


def controllers(table: dict[str, str]) -> Callable[[Path], set[str]]:
    """A stand-in for reading `cgroup.controllers` at each v2 mount point."""
    return lambda point: set(table.get(str(point), "").split())


def test_a_v2_host_with_memory_and_pids_uses_the_root_of_its_mount() -> None:
    found = cgroup_parents(
        V2_HOST,
        "0::/system.slice/ng.service\n",
        controllers_of=controllers({"/sys/fs/cgroup": "cpu memory pids"}),
    )
    root = Path("/sys/fs/cgroup")
    assert found == [CgroupParent(2, root, root)]


def test_v2_without_the_memory_controller_is_no_candidate() -> None:
    found = cgroup_parents(V2_HOST, "0::/\n", controllers_of=controllers({"/sys/fs/cgroup": "cpu pids"}))
    assert found == []


def test_a_hybrid_host_uses_v1_under_the_servers_own_cgroups() -> None:
    found = cgroup_parents(
        HYBRID, HYBRID_OWN, controllers_of=controllers({"/sys/fs/cgroup/unified": "hugetlb"})
    )
    memory = Path("/sys/fs/cgroup/memory/process_api/abc")
    assert found == [CgroupParent(1, memory, Path("/sys/fs/cgroup/pids"))]


def test_v1_mounted_at_the_containers_own_cgroup_is_not_nested_twice() -> None:
    """Docker without a cgroup namespace: the mount's root is the container's cgroup."""
    mountinfo = (
        "700 690 0:40 /docker/c0ffee /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory\n"
        "701 690 0:41 /docker/c0ffee /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids\n"
    )
    own = "12:pids:/docker/c0ffee\n7:memory:/docker/c0ffee/inner\n"
    found = cgroup_parents(mountinfo, own, controllers_of=controllers({}))
    assert found == [CgroupParent(1, Path("/sys/fs/cgroup/memory/inner"), Path("/sys/fs/cgroup/pids"))]


def test_v2_comes_before_v1_and_a_missing_v1_hierarchy_drops_v1() -> None:
    both = HYBRID + "50 31 0:40 / /sys/fs/cgroup/unified2 rw - cgroup2 cgroup2 rw\n"
    found = cgroup_parents(
        both, HYBRID_OWN, controllers_of=controllers({"/sys/fs/cgroup/unified2": "memory pids"})
    )
    assert [parent.version for parent in found] == [2, 1]
    no_pids = "\n".join(line for line in HYBRID.splitlines() if "pids" not in line)
    assert cgroup_parents(no_pids, HYBRID_OWN, controllers_of=controllers({})) == []
