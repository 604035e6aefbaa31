"""The trainer half of `bench/policy_gradient.py`: GRPO steps on the rows' exact tokens, on CPU.

    <engine python> bench/pg_train_step.py --base DIR --weights DIR --noise 0.8 --seed 0 --out DIR
        a weakened start: noise of 0.8 times each block matrix's standard deviation (weakened())
    <engine python> bench/pg_train_step.py --base DIR --weights DIR --serve [--lr 2e-4] [--seed 0]
        a trainer that keeps its model and Adam state, driven by one JSON line per request on
        stdin and answering each with one JSON line of figures:
        {"weaken": 0.8, "out": DIR}  start over from --weights plus the seed's noise at that scale
                                     (the same draw at every scale), written to DIR
        {"rollouts": FILE, "out": DIR, "version": N}  one GRPO step; the new weights to DIR

Runs under the engine venv's python (torch, transformers, safetensors; nothing from ng_cli). Every
model call of a row carries the exact `prompt_token_ids`, `generation_token_ids` and
`generation_log_probs` the engine used (the model server's token contract) and the weight version
it ran under. One step:

* groups: the samples of one prompt (rows whose first call saw the same prompt token ids: the
  repeats of a task); advantage = reward - the group's mean (divided by the group's standard
  deviation with `--scale-by-std`); a group whose rewards are all equal teaches nothing and is
  left out;
* rows: a row flagged `stale` by the collector (`+max_staleness`), or made by weights more than
  `--max-lag` versions older than the trainer's (`version` - the row's start version), is dropped;
* loss: the clipped importance-weighted surrogate over every generated token,
  -min(r * A, clip(r, 1 - eps, 1 + eps) * A) with r = exp(logp_now - logp_behaviour) (held at
  or above 3 * A where A < 0: dual clip), averaged over the tokens. On-policy (the trainer holds the weights that sampled the row) r is 1 up to
  float noise, and this is plain policy gradient; a row made by the previous weights (the async
  loop) is corrected by r, and clipped;
* Adam (state kept across steps), gradient norm clipped to 1.

The new weights are written as one safetensors file holding the same tensors as the input file
(the tied LM head is not a tensor of its own), ready for `ng_update_weights`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM

MICRO_BATCH = 16
"""Model calls per forward pass (right-padded)."""
DUAL_CLIP = 3.0
"""For a negative advantage, PPO's min(r * A, clip(r) * A) is r * A, unbounded as r grows: one
token sampled by the previous weights that the new ones like e^11 times more (seen in the async
loop) would steer the whole step. Its objective is held at or above 3 * A (dual-clip PPO)."""


@dataclass(frozen=True)
class Call:
    """One model call of a rollout, as the engine ran it."""

    prompt: list[int]
    generated: list[int]
    logprobs: list[float] | None
    advantage: float


@dataclass(frozen=True)
class Settings:
    lr: float
    clip: float
    max_lag: int
    scale_by_std: bool


def load(base: Path, weights: Path) -> tuple[Any, dict[str, torch.Tensor]]:
    config = AutoConfig.from_pretrained(base)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    state = load_file(str(weights / "model.safetensors"))
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert set(missing) <= {"lm_head.weight"}, missing
    model.tie_weights()
    return model, state


def save(model: Any, keys: dict[str, torch.Tensor], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    state = model.state_dict()
    save_file(
        {key: state[key].detach().contiguous() for key in keys},
        str(out / "model.safetensors"),
        metadata={"format": "pt"},
    )


def weakened(model: Any, noise: float, seed: int) -> None:
    """Every matrix of the transformer blocks plus Gaussian noise of `noise` times its own standard
    deviation. Not the token embedding: it is also the LM head (tied), and noise there hits single
    tokens, so a task can become unreachable (measured: one draw wrote "Tok" and never "Tokyo"),
    and a task whose samples all score 0 teaches GRPO nothing. Noise on the blocks weakens every
    task alike."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() == 2 and "embed_tokens" not in name:
                parameter.add_(torch.randn(parameter.shape, generator=generator) * parameter.std() * noise)


def read_rows(path: Path) -> list[dict[str, Any]]:
    # JSONL lines end at "\n" only: str.splitlines() would also split at U+0085 in generated text.
    return [json.loads(line) for line in path.read_text().split("\n") if line.strip()]


def row_calls(row: dict[str, Any], advantage: float) -> list[Call]:
    output = (row.get("response") or {}).get("output") or []
    return [
        Call(
            item["prompt_token_ids"],
            item["generation_token_ids"],
            item.get("generation_log_probs"),
            advantage,
        )
        for item in output
        if isinstance(item, dict) and item.get("generation_token_ids")
    ]


def select(rows: list[dict[str, Any]], version: int, settings: Settings) -> tuple[list[Call], dict[str, Any]]:
    """The calls to learn from, with their advantages; and what was kept and dropped."""
    kept, lags = [], []
    for row in rows:
        versions = row.get("weight_version") or {}
        lag = version - int(versions.get("start", version))
        if versions.get("stale") or lag > settings.max_lag:
            continue
        kept.append(row)
        lags.append(lag)
    groups: dict[tuple[int, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in kept:
        first = row_calls(row, 0.0)[:1]
        groups[tuple(first[0].prompt) if first else ()].append(row)
    calls: list[Call] = []
    learning_groups = 0
    for group in groups.values():
        rewards = [float(row["reward"]) for row in group]
        mean = sum(rewards) / len(rewards)
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / len(rewards))
        if std == 0.0:
            continue
        learning_groups += 1
        for row, reward in zip(group, rewards, strict=True):
            advantage = (reward - mean) / (std if settings.scale_by_std else 1.0)
            calls.extend(row_calls(row, advantage))
    figures = {
        "rows": len(rows),
        "dropped_stale": len(rows) - len(kept),
        "rows_behind": sum(lag > 0 for lag in lags),
        "groups": len(groups),
        "learning_groups": learning_groups,
        "mean_reward": round(sum(float(row["reward"]) for row in rows) / max(1, len(rows)), 4),
    }
    return calls, figures


def grpo_step(model: Any, optimizer: Any, calls: list[Call], settings: Settings) -> dict[str, Any]:
    """One optimizer step on the clipped surrogate over every generated token of `calls`."""
    optimizer.zero_grad()
    tokens = sum(len(call.generated) for call in calls)
    clipped = 0
    largest_gap = 0.0
    for start in range(0, len(calls), MICRO_BATCH):
        batch = calls[start : start + MICRO_BATCH]
        loss = torch.zeros(())
        for call, now in zip(batch, token_logprobs(model, batch), strict=True):
            behaviour = torch.tensor(call.logprobs) if call.logprobs is not None else now.detach()
            largest_gap = max(largest_gap, float((now.detach() - behaviour).abs().max()))
            ratio = torch.exp(now - behaviour)
            bounded = ratio.clamp(1 - settings.clip, 1 + settings.clip)
            surrogate = torch.minimum(ratio * call.advantage, bounded * call.advantage)
            if call.advantage < 0:  # dual clip: a token the new weights like far more adds no more than this
                surrogate = surrogate.clamp(min=DUAL_CLIP * call.advantage)
            loss = loss - surrogate.sum() / tokens
            clipped += int((ratio.detach() != bounded.detach()).sum())
        loss.backward()  # one backward per batch: its calls share one graph
    norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)) if calls else 0.0
    if calls:
        optimizer.step()
    return {
        "calls": len(calls),
        "tokens": tokens,
        "grad_norm": round(norm, 4),
        "clipped_tokens": clipped,
        "largest_logprob_gap": round(largest_gap, 5),
    }


def token_logprobs(model: Any, calls: list[Call]) -> list[torch.Tensor]:
    """log p(generated token | prompt, earlier tokens) under `model`, per call (one padded batch)."""
    width = max(len(call.prompt) + len(call.generated) for call in calls)
    ids = torch.zeros((len(calls), width), dtype=torch.long)
    mask = torch.zeros((len(calls), width), dtype=torch.long)
    for i, call in enumerate(calls):
        sequence = call.prompt + call.generated
        ids[i, : len(sequence)] = torch.tensor(sequence)
        mask[i, : len(sequence)] = 1
    logits = model(input_ids=ids, attention_mask=mask).logits
    out = []
    for i, call in enumerate(calls):
        first = len(call.prompt) - 1
        rows = torch.log_softmax(logits[i, first : first + len(call.generated)], dim=-1)
        out.append(rows.gather(1, torch.tensor(call.generated)[:, None])[:, 0])
    return out


def serve(model: Any, keys: dict[str, torch.Tensor], settings: Settings, seed: int) -> None:
    """One request per line, until stdin closes."""
    start = {name: value.clone() for name, value in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        started = time.perf_counter()
        if "weaken" in request:
            model.load_state_dict(start)
            weakened(model, float(request["weaken"]), seed)
            optimizer = torch.optim.Adam(model.parameters(), lr=settings.lr)
            figures: dict[str, Any] = {"noise": request["weaken"]}
        else:
            calls, figures = select(read_rows(Path(request["rollouts"])), int(request["version"]), settings)
            figures.update(grpo_step(model, optimizer, calls, settings))
        save(model, keys, Path(request["out"]))
        figures["seconds"] = round(time.perf_counter() - started, 2)
        print(json.dumps(figures), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the model directory (config)")
    parser.add_argument("--weights", type=Path, required=True, help="the starting weights' directory")
    parser.add_argument("--noise", type=float, help="write a weakened copy of --weights to --out, and exit")
    parser.add_argument("--out", type=Path, help="with --noise: where the weakened weights go")
    parser.add_argument("--serve", action="store_true", help="train: one step per JSON line on stdin")
    parser.add_argument("--seed", type=int, default=0, help="the noise's seed (and torch's)")
    parser.add_argument("--lr", type=float, default=2e-4, help="Adam's learning rate (0: a no-op step)")
    parser.add_argument("--clip", type=float, default=0.2, help="the importance ratio's clip, eps")
    parser.add_argument("--max-lag", type=int, default=1, help="drop rows made more versions ago than this")
    parser.add_argument("--scale-by-std", action="store_true", help="divide advantages by the group's std")
    parser.add_argument("--threads", type=int, default=2, help="torch's CPU threads")
    parser.add_argument("--cpus", type=int, nargs="+", help="run on these CPUs alone, one torch thread each")
    args = parser.parse_args()
    if (args.noise is None and not args.serve) or (args.noise is not None and args.out is None):
        parser.error("give --noise N --out DIR, or --serve")
    torch.manual_seed(args.seed)
    if args.cpus:
        os.sched_setaffinity(0, args.cpus)
    torch.set_num_threads(len(args.cpus) if args.cpus else args.threads)
    started = time.perf_counter()
    model, keys = load(args.base, args.weights)
    if args.serve:
        serve(model, keys, Settings(args.lr, args.clip, args.max_lag, args.scale_by_std), args.seed)
        return
    weakened(model, args.noise, args.seed)
    save(model, keys, args.out)
    print(
        json.dumps(
            {"noise": args.noise, "seed": args.seed, "seconds": round(time.perf_counter() - started, 2)}
        )
    )


if __name__ == "__main__":
    main()
