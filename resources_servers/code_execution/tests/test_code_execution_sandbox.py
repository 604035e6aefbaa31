"""The sandbox holds: no host files, no network, no secrets, no escape from its limits, no leftovers.

Each isolation test has a control: the same probe run outside the sandbox (same unprivileged
uid, plain subprocess) succeeds, so a passing test means the sandbox blocked it, not that the
probe was broken.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ng_cli.errors import ConfigError
from ng_cli.sandbox import PythonSandbox, SandboxConfig, SandboxUnavailableError
from ng_cli.sandbox import runner as runner_module
from ng_cli.sandbox.cgroups import find_cgroup_parent

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        sys.platform != "linux" or os.geteuid() != 0,
        reason="the sandbox needs Linux and root (namespaces, mounts, setuid)",
    ),
    pytest.mark.skipif(not Path("/usr/bin/python3").is_file(), reason="the controls need /usr/bin/python3"),
]

REPO = Path(__file__).resolve().parents[3]
UID_BASE = 100_000 + secrets.randbelow(100_000) * 8
"""Fresh per test session: no other process (nor a concurrent test run) has these uids."""
CONCURRENCY = 2


def make_sandbox(**overrides: Any) -> PythonSandbox:
    settings: dict[str, Any] = {"uid_base": UID_BASE, "max_concurrency": CONCURRENCY, "cpu_time_s": 5}
    return PythonSandbox(SandboxConfig(**{**settings, **overrides}))


def processes_of_sandbox_uids() -> list[int]:
    """Host pids of every process whose real uid is one of the sandbox slots."""
    uids = range(UID_BASE, UID_BASE + CONCURRENCY)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        uid_line = next((line for line in status.splitlines() if line.startswith("Uid:")), "")
        if uid_line and int(uid_line.split()[1]) in uids:
            found.append(int(entry.name))
    return found


SYSTEM_PYTHON = "/usr/bin/python3"
"""For the controls: the project's interpreter may sit where an unprivileged uid cannot reach."""


def run_unsandboxed(code: str, *, uid: int = UID_BASE) -> str:
    """The control experiment: the same program as the same uid, without the sandbox."""
    completed = subprocess.run(
        [SYSTEM_PYTHON, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        user=uid,
        check=False,
    )
    return completed.stdout


@pytest.fixture
def public_dir() -> Iterator[Path]:
    """A directory any local user can read, in /tmp (pytest's tmp_path is root-only)."""
    directory = Path(tempfile.mkdtemp(prefix="ng-sandbox-test-"))
    directory.chmod(0o755)
    yield directory
    shutil.rmtree(directory)


@pytest.fixture
def checkout_readable_by_others() -> None:
    """The controls read this checkout as an unprivileged uid (and one test starts the bootstrap
    from it as one): a checkout under a directory only root may enter (a `mktemp -d` folder,
    /root) makes them fail for that reason alone, so say it plainly."""
    for folder in [REPO, *REPO.parents]:
        if not folder.stat().st_mode & stat.S_IXOTH:
            pytest.fail(
                f"{folder} (mode {stat.S_IMODE(folder.stat().st_mode):o}) cannot be entered by other users, and "
                f"these tests run programs from the checkout {REPO} as uid {UID_BASE}: clone it where any "
                f"user can read it (chmod o+rx {folder})"
            )


@pytest.fixture
def world_readable_secret(public_dir: Path) -> Path:
    secret = public_dir / "secret.txt"
    secret.write_text("the-launch-codes")
    secret.chmod(0o644)
    return secret


READ_PROBE = """
import json, os
results = {}
for path in PATHS:
    try:
        with open(path) as handle:
            results[path] = "read:" + handle.read(40)
    except OSError as exc:
        results[path] = type(exc).__name__
print(json.dumps(results))
"""


async def test_a_program_reads_stdin_writes_stdout_and_runs_unprivileged() -> None:
    code = "import os, sys\nprint(sys.stdin.read().upper(), os.getuid(), os.getcwd())"
    result = await make_sandbox().run(code, stdin="hello")
    assert result.outcome == "ok", result.stderr
    text, uid, cwd = result.stdout.split()
    assert (text, cwd) == ("HELLO", "/sandbox")
    assert int(uid) in range(UID_BASE, UID_BASE + CONCURRENCY)
    assert result.isolated


async def test_the_standard_library_works_inside() -> None:
    code = textwrap.dedent(
        """
        import os, subprocess, sys, tempfile
        open("/dev/null", "w").write("x")
        with tempfile.NamedTemporaryFile("w", delete=False) as handle:
            handle.write("kept")
        child = subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True, text=True)
        print(len(os.urandom(8)), open(handle.name).read(), child.stdout.strip(), tempfile.gettempdir())
        """
    )
    result = await make_sandbox().run(code)
    assert (result.outcome, result.stdout.split()) == ("ok", ["8", "kept", "42", "/tmp"]), result.stderr


@pytest.mark.usefixtures("checkout_readable_by_others")
async def test_files_outside_the_sandbox_do_not_exist_for_the_program(world_readable_secret: Path) -> None:
    paths = [
        str(world_readable_secret),
        str(REPO / "pyproject.toml"),
        __file__,
        "/root/.bashrc",
        "/proc/1/environ",
    ]
    probe = READ_PROBE.replace("PATHS", repr(paths))
    control = json.loads(run_unsandboxed(probe))
    assert control[str(world_readable_secret)] == "read:the-launch-codes"
    assert control[str(REPO / "pyproject.toml")].startswith("read:")

    result = await make_sandbox().run(probe)
    assert result.outcome == "ok", result.stderr
    seen = json.loads(result.stdout)
    assert seen == dict.fromkeys(paths, "FileNotFoundError")
    listing = await make_sandbox().run("import os; print(sorted(os.listdir('/')))")
    assert set(eval(listing.stdout)) <= {
        "bin",
        "dev",
        "etc",
        "lib",
        "lib32",
        "lib64",
        "root",
        "sandbox",
        "sbin",
        "tmp",
        "usr",
    }


def non_empty_site_packages(prefix: Path) -> list[Path]:
    """The control: the interpreter's site-packages folders that hold something on the host."""
    return [path for path in sorted(prefix.glob("lib/python3*/site-packages")) if any(path.iterdir())]


async def test_root_shows_only_the_path_to_the_interpreter_and_its_site_packages_are_hidden() -> None:
    prefix = Path(sys.base_prefix)
    site = non_empty_site_packages(prefix)
    assert site, "the control: the interpreter has a non-empty site-packages folder"
    code = textwrap.dedent(
        f"""
        import os, sys
        seen = []
        for top, dirs, files in os.walk("/root"):
            seen += [os.path.join(top, f) for f in files]
            if top == {str(prefix)!r}:
                dirs.clear()  # the interpreter itself: bound on purpose
        print(sorted(seen))
        print(sorted(os.listdir({str(site[0])!r})))
        print(os.path.isfile(sys.prefix + "/lib/python{sys.version_info[0]}.{sys.version_info[1]}/os.py"))
        """
    )

    result = await make_sandbox().run(code)
    assert result.outcome == "ok", result.stderr
    files, site_listing, stdlib = result.stdout.split("\n")[:3]
    assert files == "[]"  # nothing of /root but the directories leading to the prefix
    assert site_listing == "[]"
    assert stdlib == "True"
    shown = await make_sandbox(site_packages=True).run(f"import os; print(len(os.listdir({str(site[0])!r})))")
    assert int(shown.stdout) > 0  # opted in: visible again


async def test_the_interpreter_prefix_is_read_only_and_setuid_root_is_impossible() -> None:
    code = textwrap.dedent(
        """
        import os, sys
        for action in (lambda: open(sys.prefix + "/x", "w"), lambda: os.setuid(0), lambda: os.chroot("/tmp"),
                       lambda: open("/usr/x", "w")):
            try:
                action()
                print("ALLOWED")
            except OSError as exc:
                print(type(exc).__name__)
        """
    )
    result = await make_sandbox().run(code)
    assert result.outcome == "ok", result.stderr
    assert "ALLOWED" not in result.stdout
    assert len(result.stdout.split()) == 4


async def test_no_connection_reaches_a_loopback_server() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    probe = textwrap.dedent(
        f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
            print("connected")
        except OSError as exc:
            print("blocked", exc.errno)
        """
    )
    with listener:
        assert run_unsandboxed(probe).strip() == "connected"
        listener.accept()[0].close()  # the control's connection

        result = await make_sandbox().run(probe)
        assert result.outcome == "ok", result.stderr
        assert result.stdout.startswith("blocked")
        with pytest.raises(TimeoutError):
            listener.accept()


async def test_the_program_sees_none_of_the_servers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NG_TEST_API_KEY", "sk-do-not-leak")
    result = await make_sandbox().run("import os, json; print(json.dumps(dict(os.environ)))")
    environment = json.loads(result.stdout)
    assert "NG_TEST_API_KEY" not in environment
    assert set(environment) <= {"PATH", "HOME", "TMPDIR", "LANG", "LC_CTYPE"}


async def test_the_program_cannot_forge_the_bootstraps_report() -> None:
    code = textwrap.dedent(
        """
        import os, sys
        for fd in range(3, 32):
            try:
                os.write(fd, b'{"exit_code": 0, "signal": null, "cpu_s": 0}\\n')
            except OSError:
                pass
        sys.exit(3)
        """
    )
    result = await make_sandbox().run(code)
    assert (result.outcome, result.exit_code) == ("runtime_error", 3)


async def test_a_busy_loop_is_killed_at_the_cpu_limit() -> None:
    started = time.monotonic()
    result = await make_sandbox(cpu_time_s=1, wall_time_s=60).run("while True:\n    pass")
    assert result.outcome == "cpu_limit"
    assert 0.5 <= result.cpu_s < 2.0  # wait4's rusage reads a little under the kernel's limit clock
    assert time.monotonic() - started < 30


async def test_a_sleeping_program_is_killed_at_the_wall_clock_without_a_trace() -> None:
    result = await make_sandbox(wall_time_s=1.0).run("import os, time\nos.setsid()\ntime.sleep(60)")
    assert result.outcome == "timeout"
    assert 1.0 <= result.wall_s < 10
    assert processes_of_sandbox_uids() == []  # not even a zombie


def test_the_program_dies_with_the_server_and_its_files_go(public_dir: Path) -> None:
    """SIGKILL the server mid-run: its bootstrap hears of it, takes the program down, tidies up
    (the run's directory and its cgroup)."""
    server = (
        "import asyncio\n"
        "from ng_cli.sandbox import PythonSandbox, SandboxConfig\n"
        f"sandbox = PythonSandbox(SandboxConfig(uid_base={UID_BASE}, max_concurrency={CONCURRENCY}, wall_time_s=600))\n"
        "asyncio.run(sandbox.run('import time; time.sleep(600)'))\n"
    )
    workdirs = public_dir / "tmp"
    workdirs.mkdir()
    process = subprocess.Popen(
        [sys.executable, "-c", server], cwd=public_dir, env={**os.environ, "TMPDIR": str(workdirs)}
    )
    try:
        deadline = time.monotonic() + 30
        while not processes_of_sandbox_uids():
            assert time.monotonic() < deadline, "the sandboxed program never started"
            time.sleep(0.05)
        cgroups = run_cgroups(next(workdirs.iterdir()).name)
        assert all(path.is_dir() for path in cgroups)
    finally:
        process.kill()
        process.wait()
    deadline = time.monotonic() + 10
    while processes_of_sandbox_uids() or list(workdirs.iterdir()) or any(path.exists() for path in cgroups):
        assert time.monotonic() < deadline, (
            f"left behind: {processes_of_sandbox_uids()}, {list(workdirs.iterdir())}, {cgroups}"
        )
        time.sleep(0.05)


def run_cgroups(name: str) -> list[Path]:
    """The cgroup directories of the run whose work directory is `name` (none without cgroups)."""
    parent, _ = find_cgroup_parent()
    return [] if parent is None else sorted({parent.memory_parent / name, parent.pids_parent / name})


@pytest.mark.parametrize(
    "code",
    [
        "x = bytearray(1024 * 1024 * 1024)",
        "chunks = []\nwhile True:\n    chunks.append(bytearray(8 * 1024 * 1024))",
    ],
    ids=["one-big-allocation", "growing"],
)
async def test_a_memory_hog_is_stopped(code: str) -> None:
    result = await make_sandbox(memory_mb=128, wall_time_s=30).run(code)
    assert result.outcome == "runtime_error"
    assert "MemoryError" in result.stderr


async def test_a_fork_bomb_is_contained_and_leaves_nothing_behind() -> None:
    code = textwrap.dedent(
        """
        import os, time
        children = 0
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(300)
                    os._exit(0)
                children += 1
        except OSError as exc:
            print(children, exc.errno, flush=True)
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """
    )
    result = await make_sandbox(max_processes=8, cpu_time_s=2, wall_time_s=5).run(code)
    count, errno = map(int, result.stdout.split())
    assert count < 8
    assert errno == 11  # EAGAIN: RLIMIT_NPROC
    assert result.outcome in ("cpu_limit", "timeout")
    assert processes_of_sandbox_uids() == []


async def test_background_processes_die_with_the_program() -> None:
    code = textwrap.dedent(
        """
        import os, subprocess, sys
        daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                import time
                time.sleep(300)
            os._exit(0)
        os.kill(daemon.pid, 0)
        print("spawned", flush=True)
        """
    )
    result = await make_sandbox().run(code)
    assert (result.outcome, result.stdout.strip()) == ("ok", "spawned"), result.stderr
    assert processes_of_sandbox_uids() == []


async def test_output_beyond_the_cap_stops_the_program() -> None:
    result = await make_sandbox(max_output_bytes=4096).run("while True:\n    print('x' * 1000)")
    assert result.outcome == "output_limit"
    assert len(result.stdout) + len(result.stderr) == 4096
    assert processes_of_sandbox_uids() == []


async def test_files_are_capped_in_size_and_do_not_outlive_the_run() -> None:
    write = "open('/sandbox/big', 'wb').write(b'x' * 3 * 1024 * 1024)"
    result = await make_sandbox(max_file_size_mb=1).run(write)
    assert result.outcome == "runtime_error"
    assert "File too large" in result.stderr

    sandbox = make_sandbox()
    first = await sandbox.run("open('/sandbox/note', 'w').write('hi'); open('/tmp/note', 'w').write('hi')")
    assert first.outcome == "ok", first.stderr
    second = await sandbox.run(
        "import os; print(os.path.exists('/sandbox/note'), os.path.exists('/tmp/note'))"
    )
    assert second.stdout.split() == ["False", "False"]


async def test_a_crash_is_a_runtime_error_with_its_traceback() -> None:
    result = await make_sandbox().run("print('before')\n1 / 0")
    assert (result.outcome, result.exit_code, result.stdout) == ("runtime_error", 1, "before\n")
    assert result.stderr.strip().endswith("ZeroDivisionError: division by zero")


async def test_concurrency_is_bounded_and_each_slot_has_its_own_uid() -> None:
    sandbox = make_sandbox(wall_time_s=30)
    started = time.monotonic()
    results = await asyncio.gather(
        *(sandbox.run("import os, time\ntime.sleep(0.5)\nprint(os.getuid())") for _ in range(4))
    )
    assert time.monotonic() - started >= 1.0  # 4 runs, 2 at a time
    assert {int(result.stdout) for result in results} == {UID_BASE, UID_BASE + 1}


@pytest.mark.usefixtures("checkout_readable_by_others")
def test_the_bootstrap_refuses_to_run_without_namespaces(public_dir: Path) -> None:
    """Run the bootstrap as an unprivileged user, where unshare() fails: nothing may run."""
    tmp_path = public_dir
    (tmp_path / "root").mkdir()
    (tmp_path / "root").chmod(0o777)  # as if the server ran as this user: its own temp dir
    code_path = tmp_path / "main.py"
    code_path.write_text("print('RAN')")
    code_path.chmod(0o644)
    config = SandboxConfig(uid_base=UID_BASE, python_executable=SYSTEM_PYTHON)
    python, prefix = runner_module.interpreter_of(config)

    def bootstrap(allow_unisolated: bool) -> tuple[str, dict[str, Any]]:
        plan = runner_module.build_plan(
            config.model_copy(update={"allow_unisolated": allow_unisolated}),
            workdir=tmp_path,
            uid=UID_BASE,
            python=python,
            prefix=prefix,
        )
        plan["drop_privileges"] = False
        plan["limits"]["max_processes"] = None
        plan_path = tmp_path / "plan.json"
        plan_path.write_text(json.dumps(plan))
        plan_path.chmod(0o644)
        read_fd, write_fd = os.pipe()
        completed = subprocess.run(
            [SYSTEM_PYTHON, "-I", "-S", str(runner_module.BOOTSTRAP), str(plan_path), str(write_fd)],
            capture_output=True,
            text=True,
            timeout=30,
            user=65534,
            group=65534,
            pass_fds=(write_fd,),
            check=False,
        )
        os.close(write_fd)
        with os.fdopen(read_fd) as status:
            return completed.stdout, json.loads(status.read().splitlines()[-1])

    stdout, report = bootstrap(allow_unisolated=False)
    assert "RAN" not in stdout
    assert "unshare" in report["setup_error"]

    stdout, report = bootstrap(allow_unisolated=True)
    assert stdout.strip() == "RAN"
    assert (report["exit_code"], report["isolated"]) == (0, False)


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [({"uid": 0}, "privileges were not dropped"), ({"tmpfs_bytes": "a lot"}, "mount tmpfs")],
    ids=["uid-0", "bad-tmpfs"],
)
async def test_a_failed_isolation_is_an_error_never_an_unprotected_run(
    monkeypatch: pytest.MonkeyPatch, spoil: dict[str, Any], reason: str
) -> None:
    real_build_plan = runner_module.build_plan

    def spoiled_plan(*args: Any, **kwargs: Any) -> dict[str, Any]:
        return {**real_build_plan(*args, **kwargs), **spoil}

    monkeypatch.setattr(runner_module, "build_plan", spoiled_plan)
    with pytest.raises(SandboxUnavailableError, match=f"could not isolate the program.*{reason}"):
        await make_sandbox().run("print('RAN')")


def test_a_read_only_path_that_would_expose_the_working_directory_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(REPO)
    with pytest.raises(ConfigError, match="would expose"):
        make_sandbox(readonly_paths=("/usr", str(REPO.parent)))


async def test_check_passes_on_a_host_that_can_isolate() -> None:
    await make_sandbox().check()
