"""Tensor push (CUDA IPC or NCCL) interleaved with disk updates on one engine (issue 41).

    <engine python> bench/weight_push.py --transfer ipc --config ENV.yaml --config gpu_dense_8b_push_ipc.yaml \
        --checkpoint-a /tmp/ng-ckpt/A --checkpoint-b /tmp/ng-ckpt/B [--rounds 6] --output FILE.json
    <engine python> bench/weight_push.py --transfer nccl --config ENV.yaml --config gpu_dense_8b_push_nccl.yaml ...

`ng_run` starts the stack once (the engine boots from checkpoint A, `weight_updates: true`,
`weight_transfer: ipc|nccl`, CUDA graphs). Then this process is the trainer: it loads A's and B's
tensors onto its GPU (`safetensors.safe_open(device="cuda")`) and every round runs four updates,
each followed by a greedy probe through the model server (batch 1: decoding replays the captured
CUDA graphs) with the top-5 logprobs of every token:

    disk -> B    WeightsClient.update (what ng_update_weights sends): pause, vLLM's reload, verify ...
    push -> A    begin -> push("update_weights", A's tensors) -> commit
    push -> B    the same with B's
    disk -> A

So each method goes both ways and to both checkpoints, in the same run, on the same engine. A
push's probe must answer exactly as a disk load of the same checkpoint (A: at boot, B: the first
disk update): the same text, token ids and logprobs; and the model server's fingerprint of the
weights (per-tensor sums, computed on the GPU at verify) must equal the disk load's.

`--transfer ipc` (colocated: trainer and engine on one GPU). vLLM 0.26.0's IPC protocol over HTTP (`vllm/distributed/weight_transfer/ipc_engine.py`):
`/init_weight_transfer_engine {"init_info": {}}` (nothing to set up for IPC), then per update
`/update_weights {"update_info": {"names", "dtype_names", "shapes", "packed": false,
"ipc_handles_pickled"}}`, where `ipc_handles_pickled` is base64 of the pickled list, one
`{gpu_uuid: torch.multiprocessing.reductions.reduce_tensor(t)[1]}` per tensor; the worker rebuilds
each tensor from its handle on its own device (`rebuild_cuda_tensor`, argument 6 set to its device
index) and feeds them to `model.load_weights` under vLLM's layerwise reload. Unpickling needs
`VLLM_ALLOW_INSECURE_SERIALIZATION=1` in the engine (the config sets it). vLLM 0.26.0's IPC module
also imports `ray` at its top although vLLM does not depend on Ray, so an engine without Ray dies at
start with `--weight-transfer-config ipc`: this bench gives the engine (only) a one-line stand-in
module (`--ray-stub`, on the engine's PYTHONPATH), which vLLM's Ray checks read as "not initialised".

`--transfer nccl` (trainer on one GPU, engine on another: `--trainer-gpu 0 --engine-gpu 1`), vLLM
0.26.0's NCCL protocol (`vllm/distributed/weight_transfer/nccl_engine.py`), as TRL's `VLLMClient`
drives it: `/init_weight_transfer_engine {"init_info": {"master_address", "master_port",
"rank_offset": 1, "world_size": 1 + the engine's workers}}` runs while this process joins the same
rendezvous as rank 0 (`NCCLWeightTransferEngine.trainer_init`); per update `/update_weights
{"update_info": {"names", "dtype_names", "shapes", "packed": true}}` runs while this process
broadcasts the tensors (`trainer_send_weights`, packed buffers). Both HTTP calls go through the
model server (`push`), each in a thread beside the trainer's own side, which blocks until the
engine's workers take part. The group is made once, in the first push's window.

Each window is the model server's (`window_s`: from stop admitting to admitting again; for a push
from `begin` to the end of `commit`, so the trainer's own steps between the calls count). Writes the
record after every update and prints a table.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import pickle
import platform
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from weight_update_8b import ENGINE_LINES, nvidia_smi, post  # noqa: E402

RAY_STUB = '''"""Stand-in for Ray in a vLLM 0.26.0 engine (its IPC weight transfer imports ray at the top)."""


def is_initialized() -> bool:
    return False
'''

PROBE_MESSAGES = [
    {"role": "user", "content": "What is the weather in Paris right now? Answer in one sentence."}
]
ROUND = (("disk", "B"), ("push", "A"), ("push", "B"), ("disk", "A"))


def probe(model_url: str, max_tokens: int) -> dict[str, Any]:
    """A greedy chat answer through the model server with every token's top-5 logprobs."""
    answer = post(
        f"{model_url}/v1/chat/completions",
        {
            "messages": PROBE_MESSAGES,
            "temperature": 0.0,
            "max_tokens": max_tokens,
            "logprobs": True,
            "top_logprobs": 5,
        },
    )
    choice = answer["choices"][0]
    content = (choice.get("logprobs") or {}).get("content") or []
    return {
        "text": choice["message"].get("content") or "",
        "tokens": [item.get("token") for item in content],
        "logprobs": [item.get("logprob") for item in content],
        "top5_first": [[t.get("token"), t.get("logprob")] for t in (content[0].get("top_logprobs") or [])]
        if content
        else [],
        "stamp": answer.get("weight_version") or {},
    }


def same_answer(got: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    """How a probe compares with the disk load's probe of the same checkpoint."""
    logprob_diff = (
        max((abs(a - b) for a, b in zip(got["logprobs"], expected["logprobs"], strict=True)), default=0.0)
        if len(got["logprobs"]) == len(expected["logprobs"])
        and None not in got["logprobs"]
        and None not in expected["logprobs"]
        else None
    )
    return {
        "text_equal": got["text"] == expected["text"],
        "tokens_equal": got["tokens"] == expected["tokens"],
        "top5_first_equal": got["top5_first"] == expected["top5_first"],
        "logprobs_max_abs_diff": logprob_diff,
        "equal": got["text"] == expected["text"]
        and got["tokens"] == expected["tokens"]
        and got["top5_first"] == expected["top5_first"]
        and logprob_diff == 0.0,
    }


class Trainer:
    """The trainer: checkpoints' tensors on this process's GPU, pushed by CUDA IPC or NCCL."""

    def __init__(self, transfer: str, group_port: int) -> None:
        import torch

        self.torch = torch
        torch.cuda.init()
        self.device = torch.device("cuda", torch.cuda.current_device())
        self.uuid = str(torch.cuda.get_device_properties(self.device).uuid)
        self.tensors: dict[str, list[tuple[str, Any]]] = {}
        self.transfer = transfer
        self.group_port = group_port
        self.group: Any = None
        self.initialised = False

    def load(self, label: str, directory: Path) -> dict[str, Any]:
        from safetensors import safe_open

        started = time.perf_counter()
        tensors = []
        for file in sorted(directory.glob("*.safetensors")):
            with safe_open(str(file), framework="pt", device=str(self.device)) as handle:
                for name in handle.keys():  # noqa: SIM118 - a safe_open handle is not iterable
                    tensors.append((name, handle.get_tensor(name)))
        self.torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        self.tensors[label] = tensors
        total = sum(t.numel() * t.element_size() for _, t in tensors)
        return {"tensors": len(tensors), "bytes": total, "load_s": round(seconds, 3)}

    def copy_floor_s(self, label: str) -> float:
        """Every tensor copied once on the device (what the engine's load must do at least)."""
        torch = self.torch
        targets = [torch.empty_like(t) for _, t in self.tensors[label]]
        best = float("inf")
        for _ in range(3):
            torch.cuda.synchronize()
            started = time.perf_counter()
            for target, (_, tensor) in zip(targets, self.tensors[label], strict=True):
                target.copy_(tensor)
            torch.cuda.synchronize()
            best = min(best, time.perf_counter() - started)
        del targets
        torch.cuda.empty_cache()
        return round(best, 4)

    def update_info(self, label: str) -> dict[str, Any]:
        """vLLM 0.26.0's IPC update_info for every tensor of checkpoint `label` (HTTP form: pickled)."""
        from torch.multiprocessing.reductions import reduce_tensor

        names, dtype_names, shapes, handles = [], [], [], []
        for name, tensor in self.tensors[label]:
            names.append(name)
            dtype_names.append(str(tensor.dtype).split(".")[-1])
            shapes.append(list(tensor.shape))
            _, args = reduce_tensor(tensor.detach().contiguous())
            handles.append({self.uuid: args})
        return {
            "names": names,
            "dtype_names": dtype_names,
            "shapes": shapes,
            "packed": False,
            "ipc_handles_pickled": base64.b64encode(pickle.dumps(handles)).decode(),
        }

    def nccl_info(self, label: str) -> dict[str, Any]:
        """vLLM 0.26.0's NCCL update_info: what the workers are about to receive, in broadcast order."""
        return {
            "names": [name for name, _ in self.tensors[label]],
            "dtype_names": [str(t.dtype).split(".")[-1] for _, t in self.tensors[label]],
            "shapes": [list(t.shape) for _, t in self.tensors[label]],
            "packed": True,
        }

    def beside(self, call: Any, own_side: Any) -> None:
        """Run the HTTP call in a thread while this process does its side of the collective (each
        blocks until the other takes part), then raise the call's error if it failed."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as pool:
            future = pool.submit(call)
            try:
                own_side()
            finally:
                future.result(timeout=600)

    def init(self, client: Any, marks: dict[str, float]) -> None:
        t0 = time.perf_counter()
        if self.transfer == "ipc":
            client.push("init_weight_transfer_engine", {"init_info": {}})
        else:
            from vllm.distributed.weight_transfer.nccl_engine import NCCLWeightTransferEngine

            workers = int(client.push("get_world_size", None)["results"][0]["world_size"])
            info = {"master_address": "127.0.0.1", "master_port": self.group_port, "rank_offset": 1,
                    "world_size": workers + 1}  # fmt: skip
            marks["nccl_world_size"] = workers + 1

            def join() -> None:
                self.group = NCCLWeightTransferEngine.trainer_init(info)

            self.beside(lambda: client.push("init_weight_transfer_engine", {"init_info": info}), join)
        marks["init_s"] = time.perf_counter() - t0
        self.initialised = True

    def send(self, client: Any, label: str, marks: dict[str, float]) -> None:
        t0 = time.perf_counter()
        if self.transfer == "ipc":
            info = self.update_info(label)
            marks["handles_s"] = time.perf_counter() - t0
            marks["body_bytes"] = len(json.dumps({"update_info": info}))
            t0 = time.perf_counter()
            client.push("update_weights", {"update_info": info})
        else:
            from vllm.distributed.weight_transfer.nccl_engine import NCCLWeightTransferEngine

            info = self.nccl_info(label)
            marks["body_bytes"] = len(json.dumps({"update_info": info}))

            def broadcast() -> None:
                NCCLWeightTransferEngine.trainer_send_weights(
                    iter(self.tensors[label]), {"group": self.group, "packed": True}
                )
                self.torch.cuda.synchronize()

            self.beside(lambda: client.push("update_weights", {"update_info": info}), broadcast)
        marks["update_weights_s"] = time.perf_counter() - t0

    def push(self, client: Any, label: str, version: int) -> dict[str, Any]:
        """begin -> (init once) -> update_weights -> commit; abort on any failure after begin."""
        marks: dict[str, float] = {}
        started = time.perf_counter()
        client.begin(version=version, mode="keep")
        marks["begin_s"] = time.perf_counter() - started
        try:
            if not self.initialised:
                self.init(client, marks)
            self.send(client, label, marks)
        except BaseException:
            try:
                client.abort()
            except Exception as error:  # the push's own error is the one raised
                print(f"abort after a failed push failed too: {error!r}", file=sys.stderr)
            raise
        t0 = time.perf_counter()
        result: dict[str, Any] = client.commit()
        marks["commit_s"] = time.perf_counter() - t0
        marks["client_wall_s"] = time.perf_counter() - started
        if self.transfer == "ipc":
            self.torch.cuda.ipc_collect()
        result["trainer"] = {k: round(v, 4) if isinstance(v, float) else v for k, v in marks.items()}
        return result


def row_of(method: str, target: str, result: dict[str, Any], wall_s: float) -> dict[str, Any]:
    timings = list(result["engines"].values())
    phases = sorted({phase for t in timings for phase in t})
    row: dict[str, Any] = {
        "method": method,
        "checkpoint": target,
        "version": result["version"],
        "window_s": result["window_s"],
        "client_wall_s": round(wall_s, 4),
        "engine_phases_s": {phase: max(t.get(phase, 0.0) for t in timings) for phase in phases},
        "in_flight_at_pause": len(result["in_flight_at_pause"]),
        "problems": result.get("problems"),
    }
    if "trainer" in result:
        row["trainer"] = result["trainer"]
    return row


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    windows = [r["window_s"] for r in rows if r.get("window_s") is not None]
    out: dict[str, Any] = {"n": len(windows)}
    if windows:
        out.update(
            window_s_p50=round(statistics.median(windows), 4),
            window_s_min=round(min(windows), 4),
            window_s_max=round(max(windows), 4),
        )
    phases = sorted({p for r in rows for p in r.get("engine_phases_s", {})})
    out["engine_phases_s_p50"] = {
        p: round(statistics.median([r["engine_phases_s"][p] for r in rows if p in r["engine_phases_s"]]), 4)
        for p in phases
    }
    trainer_keys = sorted({k for r in rows for k in r.get("trainer", {}) if k.endswith("_s")})
    if trainer_keys:
        out["trainer_s_p50"] = {
            k: round(statistics.median([r["trainer"][k] for r in rows if k in r.get("trainer", {})]), 4)
            for k in trainer_keys
        }
    return out


def main() -> None:
    from rich.console import Console
    from rich.table import Table

    from ng_cli.launcher.admin_keys import admin_key
    from ng_cli.training import WeightsClient
    from tests.fixtures.engine_stack import ENGINE_KEY, engine_stack

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transfer", choices=("ipc", "nccl"), required=True)
    parser.add_argument("--config", action="append", required=True)
    parser.add_argument("--checkpoint-a", type=Path, required=True)
    parser.add_argument("--checkpoint-b", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=6, help="each: disk->B, push->A, push->B, disk->A")
    parser.add_argument("--probe-tokens", type=int, default=16)
    parser.add_argument("--override", action="append", default=[], help="extra ng_run overrides")
    parser.add_argument(
        "--ray-stub",
        type=Path,
        default=Path("/tmp/ng-ray-stub"),
        help="folder for the engine's stand-in `ray` module (vLLM 0.26.0's IPC module imports ray); "
        "'none': leave the engine's PYTHONPATH alone",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="no GPU: each push is begin -> init -> get_world_size -> commit, without tensors "
        "(checks the calls and the record on the CPU engine)",
    )
    parser.add_argument("--trainer-gpu", default="0", help="nccl: the trainer's GPU (CUDA_VISIBLE_DEVICES)")
    parser.add_argument("--engine-gpu", default="1", help="nccl: the engine's GPU (CUDA_VISIBLE_DEVICES)")
    parser.add_argument(
        "--group-port", type=int, default=51216, help="nccl: the rendezvous port (TRL's default)"
    )
    parser.add_argument("--label", default="")
    parser.add_argument("--workdir", type=Path, default=Path(f"/tmp/ng-push-{os.getpid()}"))
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    # The trainer's tensors in plain cudaMalloc blocks (IPC-able), whatever the machine sets.
    os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)

    overrides = [f"++{ENGINE_KEY}.weight_updates=true", *args.override]
    if args.transfer == "ipc" and str(args.ray_stub) != "none":
        args.ray_stub.mkdir(parents=True, exist_ok=True)
        (args.ray_stub / "ray.py").write_text(RAY_STUB)
        overrides.append(f"++{ENGINE_KEY}.vllm_serve_env_vars.PYTHONPATH={args.ray_stub.resolve()}")
    record: dict[str, Any] = {
        "label": args.label,
        "transfer": args.transfer,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
                    "gpu": nvidia_smi()},
        "configs": args.config,
        "overrides": overrides,
        "checkpoints": {"A": str(args.checkpoint_a), "B": str(args.checkpoint_b)},
        "dry_run": args.dry_run,
        "updates": [],
    }  # fmt: skip

    def save() -> None:
        args.output.write_text(json.dumps(record, indent=2, default=str))

    console = Console(width=170)
    started = time.perf_counter()
    log = ""
    try:
        if args.transfer == "nccl":  # ng_run plans the engine on the GPUs it sees
            os.environ["CUDA_VISIBLE_DEVICES"] = args.engine_gpu
        with engine_stack(args.workdir / "stack", args.config, overrides) as stack:
            record["stack_ready_s"] = round(time.perf_counter() - started, 1)
            record["memory_after_start"] = nvidia_smi()
            console.print(f"stack ready in {record['stack_ready_s']} s; GPU {record['memory_after_start']}")
            client = WeightsClient.connect(stack.process.head_url)
            key = admin_key(stack.process.head_url, "policy_model") or ""
            engine_root = str(stack.engines[0]["url"]).removesuffix("/v1").rstrip("/")
            reference: dict[str, dict[str, Any]] = {"A": probe(stack.model_url, args.probe_tokens)}
            # The boot weights' fingerprint, as the model server's verify computes it (per worker).
            fingerprints: dict[str, Any] = {
                "A": post(f"{engine_root}/collective_rpc", {"method": "ng_weights_fingerprint"}, key=key)[
                    "results"
                ]
            }
            record["boot_probe"] = reference["A"]
            trainer: Trainer | None = None
            if not args.dry_run:
                try:
                    if args.transfer == "nccl":  # torch.cuda starts here: the trainer sees its GPU only
                        os.environ["CUDA_VISIBLE_DEVICES"] = args.trainer_gpu
                    trainer = Trainer(args.transfer, args.group_port)
                    record["trainer_load"] = {"B": trainer.load("B", args.checkpoint_b)}
                    # Before A is loaded: the floor's copy needs B's size again on the GPU for a moment.
                    record["trainer_copy_floor_s"] = trainer.copy_floor_s("B")
                    record["trainer_load"]["A"] = trainer.load("A", args.checkpoint_a)
                except Exception as exc:  # recorded; the disk updates still run
                    record["trainer_error"] = repr(exc)[:3000]
                    console.print(f"[red]trainer failed[/red]: {record['trainer_error'][:600]}")
                    trainer = None
                record["memory_with_trainer"] = nvidia_smi()
            fingerprint_s = []
            for _ in range(3):
                t0 = time.perf_counter()
                post(f"{engine_root}/collective_rpc", {"method": "ng_weights_fingerprint"}, key=key)
                fingerprint_s.append(round(time.perf_counter() - t0, 4))
            record["fingerprint_alone_s"] = fingerprint_s
            save()
            version = client.status()["version"]
            push_failures = 0
            for index in range(args.rounds * len(ROUND)):
                method, target = ROUND[index % len(ROUND)]
                if method == "push" and (push_failures >= 2 or (trainer is None and not args.dry_run)):
                    continue  # no trainer, or pushes failed twice: the disk updates still run
                version += 1
                row: dict[str, Any] = {"method": method, "checkpoint": target, "version": version}
                t0 = time.perf_counter()
                try:
                    if method == "disk":
                        path = args.checkpoint_a if target == "A" else args.checkpoint_b
                        result = client.update(str(path), version=version)
                    elif trainer is not None:
                        result = trainer.push(client, target, version)
                    else:  # dry run: the calls without tensors
                        client.begin(version=version)
                        client.push("init_weight_transfer_engine", {"init_info": {}})
                        client.push("get_world_size", None)
                        result = client.commit()
                    row = row_of(method, target, result, time.perf_counter() - t0)
                except Exception as exc:  # recorded; the status tells where the engine stands
                    row["error"] = repr(exc)[:3000]
                    row["status_after"] = client.status()
                    record["updates"].append(row)
                    save()
                    console.print(f"[red]{method} -> {target} v{version} failed[/red]: {row['error'][:600]}")
                    version = int(client.status()["version"])
                    push_failures += method == "push"
                    continue
                answer = probe(stack.model_url, args.probe_tokens)
                fingerprint = client.status()["fingerprint"]
                if method == "disk" and target not in reference:
                    reference[target] = answer
                    fingerprints[target] = fingerprint
                row["probe"] = answer
                row["probe_vs_disk"] = same_answer(answer, reference[target]) if target in reference else None
                row["fingerprint_equal_to_disk"] = (
                    fingerprint == fingerprints[target] if target in fingerprints else None
                )
                record["updates"].append(row)
                save()
                console.print(
                    f"{method} -> {target} v{row['version']}: window {row['window_s']:.3f} s, "
                    f"phases {row['engine_phases_s']}, trainer {row.get('trainer', {})}, "
                    f"probe equal {(row['probe_vs_disk'] or {}).get('equal')}, "
                    f"fingerprint equal {row['fingerprint_equal_to_disk']}"
                )
            record["final_status"] = client.status()
            log = stack.log()
    except Exception as exc:  # recorded
        record["error"] = repr(exc)[:3000]
        log_path = args.workdir / "stack" / "ng_run.log"
        log = log_path.read_text(errors="replace") if log_path.is_file() else ""
    rows = [u for u in record["updates"] if "window_s" in u]
    by_method = {m: [u for u in rows if u["method"] == m] for m in ("disk", "push")}
    record["summary"] = {m: summary(r) for m, r in by_method.items()}
    pushes = by_method["push"]
    record["probes"] = {
        "a_and_b_differ": record.get("boot_probe", {}).get("text")
        != next((u["probe"]["text"] for u in rows if u["checkpoint"] == "B"), None),
        "pushes_probed": len(pushes),
        "pushes_equal_to_disk": sum(1 for u in pushes if (u.get("probe_vs_disk") or {}).get("equal")),
        "pushes_fingerprint_equal": sum(1 for u in pushes if u.get("fingerprint_equal_to_disk")),
        "disks_equal_to_first": sum(
            1 for u in by_method["disk"] if (u.get("probe_vs_disk") or {}).get("equal")
        ),
        "disks_probed": len(by_method["disk"]),
    }
    lines = [
        line for line in log.splitlines()
        if any(marker in line for marker in (*ENGINE_LINES, "weight_transfer", "Weight", "IPC", "NCCL", "nccl", "Ray"))
        and "Avg prompt throughput" not in line
    ]  # fmt: skip
    record["engine_lines"] = lines[-300:]
    record["vllm_reload_logged_s"] = [
        float(match[1])
        for match in re.finditer(r"Reloading and processing weights took ([0-9.]+) seconds", log)
    ]
    record["total_s"] = round(time.perf_counter() - started, 1)
    save()
    args.output.with_suffix(".ng_run.log").write_text(log[-4_000_000:])

    table = Table(
        title=f"weight updates, disk vs {args.transfer} push {args.label} ({record['machine']['gpu'].get('gpu', '?')})",
        title_justify="left",
    )
    for column in (
        "method",
        "n",
        "window p50",
        "window min",
        "window max",
        "engine phases p50",
        "trainer p50",
    ):
        table.add_column(
            column, justify="left" if column in ("method", "engine phases p50", "trainer p50") else "right"
        )
    for method, s in record["summary"].items():
        if s["n"]:
            table.add_row(
                method, str(s["n"]), f"{s['window_s_p50']:.3f}", f"{s['window_s_min']:.3f}", f"{s['window_s_max']:.3f}",
                json.dumps(s["engine_phases_s_p50"]), json.dumps(s.get("trainer_s_p50", {})),
            )  # fmt: skip
    console.print(table)
    console.print(f"probes: {record['probes']}")
    if record.get("error"):
        console.print(f"[red]error[/red]: {record['error'][:1500]}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
