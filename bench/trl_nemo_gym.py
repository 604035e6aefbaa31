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

Writes bench/results/trl_nemo_gym.json and prints the figures.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--script", type=Path, required=True, help="TRL's grpo_nemo_gym.py")
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--train-steps", type=int, default=0)
    parser.add_argument(
        "--temperature", type=float, default=1.0, help="sampling (rollouts and the trainer's logprobs)"
    )
    args = parser.parse_args()

    from ng_cli.trainer_api import install

    if not install():
        raise SystemExit("a real NeMo Gym is installed; this bench is for ng_cli's API")
    namespace = dict(__import__("runpy").run_path(str(args.script), run_name="trl_grpo_nemo_gym"))
    work = Path(tempfile.mkdtemp(prefix="trl-nemo-gym-"))
    shutil.copytree(MODEL, work / "step-0")
    engine_yaml = work / "engine.yaml"
    engine_yaml.write_text(ENGINE_CONFIG.format(model=work / "step-0"))
    head_port = free_port()
    os.chdir(ROOT)
    record: dict[str, Any] = {"script": str(args.script), "temperature": args.temperature}
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
        shutil.rmtree(work, ignore_errors=True)
    left = [
        pid
        for task in Path(f"/proc/{os.getpid()}/task").iterdir()
        for pid in (task / "children").read_text().split()
    ]
    record["children_left_after_shutdown"] = len(left)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    print(f"children left after shutdown: {len(left)}; written {RESULTS}")


if __name__ == "__main__":
    main()
