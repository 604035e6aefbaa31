"""TRL's own NeMo Gym example, `grpo_nemo_gym.py`, against ng_cli on the CPU (not CI: it needs TRL).

    ~/.cache/ng_cli/trl-venv/bin/python bench/trl_nemo_gym.py --script PATH/grpo_nemo_gym.py
        [--rows 8] [--train-steps 2]

The script is TRL's (examples/scripts/nemo_gym/ in TRL's repository until TRL removed the NeMo
Gym example in May 2026); it is not in this repository: pass its path. The environment: ng_cli
installed with the `trl` extra (pip install torch==2.13.0 first, the CPU build; then
pip install -e '.[trl]').

1. `import nemo_gym` is answered by ng_cli (`ng_cli.trainer_api.install`), then the script is
   imported (its module-level code: the imports from nemo_gym, trl, datasets).
2. Its `launch_nemo_gym` runs unchanged: RunHelper starts the example environment and the
   embedded model on a local_vllm_model engine with `weight_updates: true` (a copy of
   models/tiny-weather as checkpoint step-0; on a GPU, TRL's `trl vllm-serve` is the engine and
   `policy_base_url` points there, which this CPU run does not start).
3. Its `rollout_func` body runs unchanged (taken from `main()`; the names it closes over --
   `loop`, `rch`, `head_server_config` -- bound as `main()` binds them) on `--rows` prompts.
4. With `--train-steps N`: TRL's GRPOTrainer (use_vllm=False: TRL's vLLM weight sync is NCCL,
   CUDA only) trains N steps on the CPU with that rollout_func and the script's reward_fn;
   after each step the model is saved as a checkpoint and `ng_update_weights` loads it into the
   engine, so the next step's rollouts come from the new weights (their weight_version says so).

5. With `--trl-sync` (CUDA: two GPUs): the script's `main()` runs unchanged, as TRL ships it --
   `use_vllm=True`, `vllm_mode="server"` -- and TRL's own weight sync lands in the stack's engine:
   the trainer on `--trainer-gpu`, the engine (`gpu_ids`) on `--engine-gpu`, its model server named
   as TRL's vLLM server (`vllm_server_base_url: http://trl:<key>@host:port` in the script's
   config file, the engines' `api_key` the same key). Every `run_examples` batch is recorded: its
   rows' `weight_version`s and rewards, and the served weights' version and fingerprint when the
   batch started (TRL syncs before each step's rollouts).

       python bench/trl_nemo_gym.py --script PATH/grpo_nemo_gym.py --trl-sync --train-steps 20

Writes bench/results/trl_nemo_gym.json (`--output`) and prints the figures.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import itertools
import json
import os
import runpy
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results" / "trl_nemo_gym.json"
MODEL = ROOT / "models" / "tiny-weather"
ENVIRONMENT = "resources_servers/example_single_tool_call/configs/example_single_tool_call.yaml"
AGENT = "example_single_tool_call_simple_agent"
DATA = ROOT / "resources_servers/example_single_tool_call/data/example.jsonl"
ENGINE_CONFIG = """\
policy_model:
  responses_api_models:
    local_vllm_model:
      entrypoint: app.py
      model: {model}
      weight_updates: true
      return_token_id_information: true
      token_exact: true               # each turn's prompt extends the last one's ids (the script asserts it)
      uses_reasoning_parser: false
      engine_ready_timeout_s: 900
      vllm_serve_kwargs:
        dtype: float32
        max_model_len: 2048
        enable_auto_tool_choice: true
        tool_call_parser: hermes
      vllm_serve_env_vars:
        VLLM_ENABLE_V1_MULTIPROCESSING: "0"
"""


SYNC_ENGINE_CONFIG = """\
policy_model:
  responses_api_models:
    local_vllm_model:
      entrypoint: app.py
      model: {model}
      port: {port}
      api_key: {key}
{gpu_ids}      weight_updates: true
      weight_transfer: nccl
      return_token_id_information: true
      token_exact: true               # each turn's prompt extends the last one's ids (the script asserts it)
      uses_reasoning_parser: false
      engine_ready_timeout_s: 900
      vllm_serve_kwargs:
        dtype: float32            # as the trainer holds it: every step's change shows in the fingerprint
        max_model_len: 2048
        enforce_eager: true
        gpu_memory_utilization: 0.3
        logprobs_mode: processed_logprobs  # TRL's importance sampling reads them after temperature
        enable_auto_tool_choice: true
        tool_call_parser: hermes
"""
# The script's config file: its own keys, then GRPOConfig's (none the script sets itself).
SYNC_SCRIPT_CONFIG = """\
model_name: {model}
dataset_path: {train}
eval_dataset_path: {eval}
gym_configs: [{environment}, {engine}]
vllm_server_base_url: http://trl:{key}@127.0.0.1:{port}
output_dir: {work}/trainer
max_steps: {steps}
per_device_train_batch_size: 8
per_device_eval_batch_size: 4
num_generations: 4
max_completion_length: 96
learning_rate: 1.0e-5
temperature: {temperature}
report_to: none
save_strategy: "no"
bf16: false
"""


def rollout_func_of(script: Path, namespace: dict[str, Any]) -> Callable[..., dict[str, list[Any]]]:
    """`rollout_func` as `main()` defines it, compiled unchanged (same file, same line numbers)."""
    tree = ast.parse(script.read_text(), filename=str(script))
    main = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main")
    found = next(
        node for node in ast.walk(main) if isinstance(node, ast.FunctionDef) and node.name == "rollout_func"
    )
    exec(compile(ast.Module(body=[found], type_ignores=[]), str(script), "exec"), namespace)
    function: Callable[..., dict[str, list[Any]]] = namespace["rollout_func"]
    return function


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def prompts(count: int) -> list[str]:
    """TRL's dataset lines: one JSON row each, naming its agent (as ng_prepare_data writes them)."""
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    return [json.dumps({**rows[i % len(rows)], "agent_ref": {"name": AGENT}}) for i in range(count)]


def summarize(out: dict[str, list[Any]], seconds: float) -> dict[str, Any]:
    rewards = [float(r) for r in out["env_reward"]]
    return {
        "rollouts": len(rewards),
        "seconds": round(seconds, 2),
        "mean_reward": round(sum(rewards) / len(rewards), 3),
        "with_tool_turn": sum(1 for mask in out["env_mask"] if 0 in mask),
        "completion_tokens": sum(len(ids) for ids in out["completion_ids"]),
        "trained_tokens": sum(sum(mask) for mask in out["env_mask"]),
    }


def update_weights(checkpoint: Path, version: int, head_port: int) -> dict[str, Any]:
    """`ng_update_weights` as a trainer runs it after saving a step."""
    started = time.perf_counter()
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("ng_update_weights")),
            f"+path={checkpoint}",
            f"+version={version}",
            f"+head_server_url=http://127.0.0.1:{head_port}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"ng_update_weights failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return {
        "version": version,
        "seconds": round(time.perf_counter() - started, 2),
        "said": done.stdout.strip().splitlines()[-1],  # "version N (PATH) in S s from pause to resume, ..."
    }


def train(
    namespace: dict[str, Any], rollout_func: Any, work: Path, steps: int, head_port: int, temperature: float
) -> dict[str, Any]:
    """TRL's GRPOTrainer for `steps` steps on the CPU; each step's weights loaded into the engine."""
    import importlib

    trl = importlib.import_module("trl")
    transformers = importlib.import_module("transformers")
    updates: list[dict[str, Any]] = []

    def on_step_end(_self: Any, _args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        checkpoint = work / f"step-{state.global_step}"
        kwargs["model"].save_pretrained(checkpoint)
        for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
            shutil.copy(MODEL / name, checkpoint / name)
        updates.append(update_weights(checkpoint, state.global_step + 1, head_port))
        return control

    sync = type("SyncWeightsThroughNgCli", (transformers.TrainerCallback,), {"on_step_end": on_step_end})
    dataset_file = work / "train.jsonl"
    dataset_file.write_text("".join(line + "\n" for line in prompts(8 * steps)))
    config = trl.GRPOConfig(
        output_dir=str(work / "trainer"),
        use_vllm=False,  # TRL's vLLM server mode syncs weights over NCCL: CUDA only
        use_cpu=True,
        bf16=False,
        max_steps=steps,
        per_device_train_batch_size=8,
        num_generations=4,
        max_completion_length=96,
        learning_rate=1e-5,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        loss_type="grpo",
        epsilon=0.2,
        epsilon_high=0.28,
        shuffle_dataset=False,
        temperature=temperature,
    )
    trainer = trl.GRPOTrainer(
        model=str(work / "step-0"),
        reward_funcs=namespace["reward_fn"],
        train_dataset=namespace["load_dataset_from_jsonl"](str(dataset_file)),
        rollout_func=rollout_func,
        args=config,
        callbacks=[sync()],
    )
    started = time.perf_counter()
    trainer.train()
    logged = [
        {key: entry[key] for key in ("step", "loss", "reward", "reward_std", "grad_norm") if key in entry}
        for entry in trainer.state.log_history
        if "loss" in entry
    ]
    return {
        "steps": steps,
        "seconds": round(time.perf_counter() - started, 2),
        "log": logged,
        "updates": updates,
    }


class BatchRecorder:
    """Records every `run_examples` batch of the unchanged script: the served version and
    fingerprint when it started, and each row's `weight_version` and reward as it ends."""

    def __init__(self, model_server: str, key: str) -> None:
        from ng_cli.training import WeightsClient

        self.client = WeightsClient(server="policy_model", url=model_server, key=key, timeout_s=30)
        self.batches: list[dict[str, Any]] = []

    def served(self) -> dict[str, Any]:
        status = self.client.status()
        return {"version": status.get("version"), "fingerprint": (status.get("fingerprint") or [""])[0]}

    def wrap(self, run_examples: Callable[..., Iterator[Awaitable[Any]]]) -> Callable[..., Iterator[Any]]:
        def recording(helper: Any, *args: Any, **kwargs: Any) -> Iterator[Awaitable[Any]]:
            batch: dict[str, Any] = {"at": self.served(), "versions": [], "rewards": [], "failed": 0}
            self.batches.append(batch)

            async def recorded(task: Awaitable[Any]) -> Any:
                row, result = await task
                if isinstance(result, dict):
                    batch["versions"].append((result.get("response") or {}).get("weight_version"))
                    batch["rewards"].append(result.get("reward"))
                else:
                    batch["failed"] += 1
                return row, result

            for task in run_examples(helper, *args, **kwargs):
                yield recorded(task)

        return recording

    def summary(self) -> dict[str, Any]:
        """Per batch: version served at its start, the versions its rows carry, mean reward; and
        whether each batch's rows all carry the version served when it started, and every new
        version came with new weights."""
        rows = []
        for batch in self.batches:
            versions = sorted({(v or {}).get("start") for v in batch["versions"]}, key=str)
            rewards = [float(r) for r in batch["rewards"] if r is not None]
            rows.append(
                {
                    "served_version": batch["at"]["version"],
                    "fingerprint": batch["at"]["fingerprint"][:16],
                    "rows": len(batch["versions"]) + batch["failed"],
                    "failed": batch["failed"],
                    "row_versions": versions,
                    "mean_reward": round(sum(rewards) / len(rewards), 3) if rewards else None,
                }
            )
        fingerprints: dict[Any, str] = {}
        for row in rows:
            fingerprints.setdefault(row["served_version"], row["fingerprint"])
        ordered = [fingerprints[v] for v in sorted(fingerprints, key=lambda v: int(v or 0))]
        return {
            "batches": rows,
            "rows_failed": sum(row["failed"] for row in rows),
            "every_row_at_its_batch_version": bool(rows)
            and all(row["row_versions"] == [row["served_version"]] for row in rows),
            "versions": sorted(fingerprints, key=lambda v: int(v or 0)),
            # TRL syncs before each step's rollouts (the eval at start shares step 0's sync), so
            # the versions served are 1, 2, ... one per step
            "one_new_version_per_step": [int(v or 0) for v in sorted(fingerprints, key=lambda v: int(v or 0))]
            == list(range(1, len(fingerprints) + 1)),
            "weights_changed_at_every_version": len(ordered) > 1
            and all(a != b for a, b in itertools.pairwise(ordered)),
        }


def run_script_unchanged(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The script's `main()` as TRL ships it: TRL's vLLM server mode, whose server is the stack's
    model server; TRL's NCCL weight sync lands in the stack's engine as versions."""
    from ng_cli.trainer_api.collection import RolloutCollectionHelper

    key, head_port, port = secrets.token_urlsafe(24), free_port(), free_port()
    engine_yaml, config_yaml = work / "engine.yaml", work / "config.yaml"
    (work / "train.jsonl").write_text("".join(line + "\n" for line in prompts(8 * args.train_steps)))
    (work / "eval.jsonl").write_text("".join(line + "\n" for line in prompts(4)))
    for path, text in (
        (
            engine_yaml,
            SYNC_ENGINE_CONFIG.format(
                model=work / "step-0",
                port=port,
                key=key,
                gpu_ids=f"      gpu_ids: [{args.engine_gpu}]\n" if args.engine_gpu != "cpu" else "",
            ),
        ),
        (
            config_yaml,
            SYNC_SCRIPT_CONFIG.format(
                model=work / "step-0",
                train=work / "train.jsonl",
                eval=work / "eval.jsonl",
                environment=ENVIRONMENT,
                engine=engine_yaml,
                key=key,
                port=port,
                work=work,
                steps=args.train_steps,
                temperature=args.temperature,
            ),
        ),
    ):
        path.write_text(text)
        path.chmod(0o600)  # the key is in both
    recorder = BatchRecorder(f"http://127.0.0.1:{port}", key)
    RolloutCollectionHelper.run_examples = recorder.wrap(RolloutCollectionHelper.run_examples)  # type: ignore[method-assign]
    os.environ["CUDA_VISIBLE_DEVICES"] = str(args.trainer_gpu)  # the trainer's; the engine has gpu_ids
    sys.argv = [str(args.script), "--config", str(config_yaml), "--head_server_port", str(head_port)]
    started = time.perf_counter()
    error = None
    try:
        runpy.run_path(str(args.script), run_name="__main__")
    except BaseException as exc:  # the record says how it ended
        error = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, Exception):
            raise
    return {
        "mode": "trl_sync (the script's main() unchanged)",
        "trainer_gpu": args.trainer_gpu,
        "engine_gpu": args.engine_gpu,
        "steps": args.train_steps,
        "seconds": round(time.perf_counter() - started, 2),
        "error": error,
        **recorder.summary(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, required=True, help="TRL's grpo_nemo_gym.py")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--train-steps", type=int, default=0)
    parser.add_argument(
        "--temperature", type=float, default=1.0, help="sampling (rollouts and the trainer's logprobs)"
    )
    parser.add_argument("--trl-sync", action="store_true", help="main() unchanged: TRL's NCCL sync (CUDA)")
    parser.add_argument("--trainer-gpu", default="0")
    parser.add_argument("--engine-gpu", default="1", help="`cpu`: a CPU engine (the sync itself needs CUDA)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()

    from ng_cli.trainer_api import install

    if not install():
        raise SystemExit("a real NeMo Gym is installed; this bench is for ng_cli's API")
    work = Path(tempfile.mkdtemp(prefix="trl-nemo-gym-"))
    shutil.copytree(MODEL, work / "step-0")
    os.chdir(ROOT)
    try:
        record = run_script_unchanged(args, work) if args.trl_sync else run_pieces(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record = {"script": str(args.script), "temperature": args.temperature, **record}
    left = [
        pid
        for task in Path(f"/proc/{os.getpid()}/task").iterdir()
        for pid in (task / "children").read_text().split()
    ]
    record["children_left_after_shutdown"] = len(left)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps({k: v for k, v in record.items() if k != "batches"}, indent=1))
    print(f"children left after shutdown: {len(left)}; written {args.output}")


def run_pieces(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The script's `launch_nemo_gym` and `rollout_func` unchanged; TRL's trainer without vLLM."""
    namespace = dict(runpy.run_path(str(args.script), run_name="trl_grpo_nemo_gym"))
    engine_yaml = work / "engine.yaml"
    engine_yaml.write_text(ENGINE_CONFIG.format(model=work / "step-0"))
    head_port = free_port()
    record: dict[str, Any] = {}
    started = time.perf_counter()
    run_helper = namespace["launch_nemo_gym"](
        config_paths=[ENVIRONMENT, str(engine_yaml)],
        model_name=str(work / "step-0"),
        vllm_server_host="127.0.0.1",
        vllm_server_port=8000,  # TRL's vLLM server: not started here (the stack's own engine serves)
        host="0.0.0.0",
        port=head_port,
    )
    record["start_s"] = round(time.perf_counter() - started, 2)
    try:
        namespace |= {
            "loop": asyncio.new_event_loop(),
            "rch": namespace["RolloutCollectionHelper"](),
            "head_server_config": namespace["BaseServerConfig"](host="127.0.0.1", port=head_port),
        }
        rollout_func = rollout_func_of(args.script, namespace)
        settings = SimpleNamespace(temperature=args.temperature, top_p=1.0, max_completion_length=96)
        trainer = SimpleNamespace(args=settings)
        started = time.perf_counter()
        out = rollout_func(prompts(args.rows), trainer)
        record["rollout_func"] = summarize(out, time.perf_counter() - started)
        print(json.dumps(record["rollout_func"]))
        if args.train_steps:
            record["train"] = train(
                namespace, rollout_func, work, args.train_steps, head_port, args.temperature
            )
            print(json.dumps(record["train"], indent=1))
    finally:
        run_helper.shutdown()
    return record


if __name__ == "__main__":
    main()
