"""`plan_placement` / `check_fit`: engine plans -> Ray placement groups, and whether a cluster holds them.

Pure: synthetic model dirs, clusters described as node capacities; no Ray is imported.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ng_cli.engines.placement import NodeCapacity, PlacementPlan, check_fit, plan_placement, ray_name
from ng_cli.engines.plan import InstanceEngines
from ng_cli.errors import LaunchError, PlacementError
from tests.unit.engines.test_engine_plan import model_dir, plan


def gpus(count: int) -> tuple[str, ...]:
    return tuple(str(i) for i in range(count))


def nodes(count: int, gpus_each: int, cpus_each: float = 32) -> list[NodeCapacity]:
    return [NodeCapacity(name=f"node-{i}", gpus=gpus_each, cpus=cpus_each) for i in range(count)]


def placed(*plans: InstanceEngines, run_id: str = "r1", **options: object) -> PlacementPlan:
    return plan_placement(plans, run_id=run_id, **options)  # type: ignore[arg-type]


def test_one_gpu_per_node_dense_replicas_one_group_per_engine_each_on_its_node(tmp_path: Path) -> None:
    engines = plan(model_dir(tmp_path), devices=gpus(2), vllm_serve_kwargs={"data_parallel_size": 2})
    placement = placed(engines)

    assert [group.name for group in placement.groups] == ["ng-r1-policy-g0", "ng-r1-policy-g1"]
    assert [[b.resources() for b in group.bundles] for group in placement.groups] == [
        [{"GPU": 1.0, "CPU": 1.0}],
        [{"GPU": 1.0, "CPU": 1.0}],
    ]
    assert placement.of("policy/engine-1").actor == "ng-r1-policy-engine-1"
    assert placement.of("policy/engine-1").bundles == (0,)
    assert check_fit(placement, nodes(2, 1)) == {"ng-r1-policy-g0": "node-0", "ng-r1-policy-g1": "node-1"}


def test_two_gpus_per_node_tp2_engines_keep_their_bundles_on_one_node(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path),
        devices=gpus(4),
        vllm_serve_kwargs={"tensor_parallel_size": 2, "data_parallel_size": 2},
    )
    placement = placed(engines)

    assert [len(group.bundles) for group in placement.groups] == [2, 2]
    assert placement.describe()[0]["strategy"] == "STRICT_PACK"
    assert placement.of("policy/engine-0").bundles == (0, 1)
    assert check_fit(placement, nodes(2, 2)) == {"ng-r1-policy-g0": "node-0", "ng-r1-policy-g1": "node-1"}


def test_tp4_on_two_gpu_nodes_cannot_fit_and_the_error_names_what_is_missing(tmp_path: Path) -> None:
    engines = plan(model_dir(tmp_path), devices=gpus(4), vllm_serve_kwargs={"tensor_parallel_size": 4})
    placement = placed(engines)

    with pytest.raises(PlacementError) as caught:
        check_fit(placement, nodes(2, 2))  # 4 GPUs in the cluster, but never 4 on one node

    error = caught.value
    assert isinstance(error, LaunchError)  # reported like any failed start (exit code 1, no traceback)
    assert error.group == "ng-r1-policy-g0"
    assert error.missing == "2 GPUs on one node"
    assert "needs 4 GPUs and 4 CPUs on one node" in error.message
    assert "node-0: 2 GPU 32 CPU" in error.message
    assert error.hint is not None


def test_eight_gpus_per_node_seeds_moe_ep2_internal_lb_four_expert_groups_of_two(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path, experts=8),
        devices=gpus(8),
        expert_parallel_size=2,
        vllm_serve_kwargs={"data_parallel_size": 8},
    )
    placement = placed(engines)

    assert len(placement.groups) == 4
    assert all(len(group.bundles) == 2 for group in placement.groups)  # DP ranks of a group together
    assert [p.bundles for p in placement.engines] == [(0, 1)] * 4
    assert set(check_fit(placement, nodes(1, 8)).values()) == {"node-0"}


def test_tp2_dp4_ep4_groups_of_four_gpus_fill_two_four_gpu_nodes(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path, experts=16),
        devices=gpus(8),
        expert_parallel_size=4,
        vllm_serve_kwargs={"tensor_parallel_size": 2, "data_parallel_size": 4},
    )
    placement = placed(engines)

    assert [group.gpus for group in placement.groups] == [4, 4]  # EP 4 / TP 2 = 2 ranks x TP 2
    assert sorted(check_fit(placement, nodes(2, 4)).values()) == ["node-0", "node-1"]
    with pytest.raises(PlacementError) as caught:
        check_fit(placement, nodes(4, 2))  # 8 GPUs, but an expert group would straddle nodes
    assert caught.value.missing == "2 GPUs on one node"


def test_external_lb_ranks_share_their_group_unless_expert_groups_may_span(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path, experts=8),
        devices=gpus(8),
        expert_parallel_size=4,
        data_parallel_mode="external_lb",
        vllm_serve_kwargs={"data_parallel_size": 8},
    )

    kept = placed(engines)
    assert [group.engines for group in kept.groups] == [
        ("policy/engine-0", "policy/engine-1", "policy/engine-2", "policy/engine-3"),
        ("policy/engine-4", "policy/engine-5", "policy/engine-6", "policy/engine-7"),
    ]
    assert [p.bundles for p in kept.engines[:4]] == [(0,), (1,), (2,), (3,)]
    with pytest.raises(PlacementError):
        check_fit(kept, nodes(4, 2))

    spanning = placed(engines, expert_groups_may_span=True)
    assert len(spanning.groups) == 8  # one STRICT_PACK group per rank: ranks may use any node
    assert len(set(check_fit(spanning, nodes(4, 2)).values())) == 4


def test_replicas_per_device_share_one_group_and_split_its_gpu(tmp_path: Path) -> None:
    engines = plan(
        model_dir(tmp_path),
        devices=gpus(1),
        replicas_per_device=2,
        vllm_serve_kwargs={"data_parallel_size": 2},
    )
    placement = placed(engines)

    (group,) = placement.groups
    assert group.engines == ("policy/engine-0", "policy/engine-1")
    assert len(group.bundles) == 1
    assert {p.gpu_share for p in placement.engines} == {0.5}


def test_cpu_engines_get_cpu_bundles_of_the_configured_size(tmp_path: Path) -> None:
    engines = plan(model_dir(tmp_path), devices=(), vllm_serve_kwargs={"data_parallel_size": 2})
    placement = placed(engines, cpus_per_bundle=2)

    assert [[b.resources() for b in group.bundles] for group in placement.groups] == [
        [{"CPU": 2.0}],
        [{"CPU": 2.0}],
    ]
    with pytest.raises(PlacementError) as caught:
        check_fit(placement, [NodeCapacity("head", gpus=0, cpus=3)])
    assert caught.value.missing == "1 CPU on one node"
    assert "ray.num_cpus" in (caught.value.hint or "")


def test_server_actors_need_cpus_left_after_the_engines(tmp_path: Path) -> None:
    engines = plan(model_dir(tmp_path), devices=(), vllm_serve_kwargs={"data_parallel_size": 2})
    placement = placed(engines, server_cpus={"env": 2.0, "agent": 1.0})

    fit = check_fit(placement, [NodeCapacity("a", 0, 3), NodeCapacity("b", 0, 2)])
    assert fit["ng-r1-server-env"] == "b"
    with pytest.raises(PlacementError) as caught:
        check_fit(placement, [NodeCapacity("a", 0, 3)])
    assert caught.value.group == "ng-r1-server-env"
    assert "ray.server_num_cpus" in (caught.value.hint or "")


def test_two_nodes_on_one_address_are_two_nodes(tmp_path: Path) -> None:
    """Issue 29: nodes keyed by address merged two raylets of one host, refusing a stack that fits."""
    engines = plan(model_dir(tmp_path), devices=(), vllm_serve_kwargs={"data_parallel_size": 2})
    placement = placed(engines, server_cpus={"env": 1.0})
    same_host = [
        NodeCapacity("aaaa (10.0.0.5)", 0, 2, node_id="aaaa"),
        NodeCapacity("bbbb (10.0.0.5)", 0, 2, node_id="bbbb"),
    ]
    fit = check_fit(placement, same_host)
    assert sorted(fit.values()) == ["aaaa (10.0.0.5)", "aaaa (10.0.0.5)", "bbbb (10.0.0.5)"]
    with pytest.raises(PlacementError) as caught:
        check_fit(placement, same_host[:1])
    assert "aaaa (10.0.0.5)" in caught.value.message


def test_names_are_unique_within_a_run_and_between_runs(tmp_path: Path) -> None:
    first = plan(model_dir(tmp_path), devices=gpus(4), vllm_serve_kwargs={"data_parallel_size": 2})
    path = model_dir(tmp_path, name="other")
    second = plan(path, devices=gpus(2), vllm_serve_kwargs={"data_parallel_size": 2})
    one, two = placed(first, run_id="aaaa"), placed(first, run_id="bbbb")

    names = [g.name for g in one.groups] + [p.actor for p in one.engines]
    assert len(names) == len(set(names))
    assert not set(names) & ({g.name for g in two.groups} | {p.actor for p in two.engines})
    assert ray_name("r", "my env/x") == "ng-r-my_env_x"
    assert len({g.name for g in placed(first, second).groups}) == 4
