"""One policy-gradient step on rollouts with token ids: REINFORCE with a batch-mean baseline, on CPU.

    <engine python> bench/pg_train_step.py --base DIR --weights DIR --rollouts FILE --out DIR [--lr 3e-4]
    <engine python> bench/pg_train_step.py --base DIR --weights DIR --noise 0.5 --out DIR   (a weakened start)

Runs under the engine venv's python (torch, transformers, safetensors; nothing from ng_cli): the
trainer half of `bench/policy_gradient.py`. Every model call of a rollout carries its exact
`prompt_token_ids` and `generation_token_ids` (the model server's token contract), so the loss is
computed on the very tokens the engine sampled:

    loss = - sum over rollouts of (reward - mean reward) * sum over its calls of log p(generated | prompt)
           / number of rollouts

The new weights are written as one safetensors file holding the same tensors as the input file
(the tied LM head is not a tensor of its own), ready for `ng_update_weights`.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM


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


def model_calls(row: dict[str, Any]) -> list[tuple[list[int], list[int]]]:
    output = (row.get("response") or {}).get("output") or []
    return [
        (item["prompt_token_ids"], item["generation_token_ids"])
        for item in output
        if isinstance(item, dict) and item.get("generation_token_ids")
    ]


def policy_gradient(model: Any, rows: list[dict[str, Any]], lr: float) -> dict[str, float]:
    rewards = torch.tensor([float(row["reward"]) for row in rows])
    advantages = rewards - rewards.mean()
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    optimizer.zero_grad()
    tokens = 0
    for row, advantage in zip(rows, advantages.tolist(), strict=True):
        if advantage == 0.0:
            continue
        for prompt, generated in model_calls(row):
            ids = torch.tensor([prompt + generated])
            logits = model(ids).logits[0, len(prompt) - 1 : -1]
            logp = torch.log_softmax(logits, dim=-1).gather(1, torch.tensor(generated)[:, None]).sum()
            (-(advantage * logp) / len(rows)).backward()
            tokens += len(generated)
    norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
    optimizer.step()
    return {"mean_reward": float(rewards.mean()), "tokens": tokens, "grad_norm": norm}


def weakened(model: Any, noise: float, seed: int) -> None:
    """Every matrix plus Gaussian noise of `noise` times its own standard deviation."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.add_(torch.randn(parameter.shape, generator=generator) * parameter.std() * noise)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the model directory (config)")
    parser.add_argument("--weights", type=Path, required=True, help="the current weights' directory")
    parser.add_argument("--rollouts", type=Path)
    parser.add_argument("--noise", type=float)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    started = time.perf_counter()
    model, state = load(args.base, args.weights)
    if args.noise is not None:
        weakened(model, args.noise, args.seed)
        stats: dict[str, float] = {"noise": args.noise}
    else:
        rows = [json.loads(line) for line in args.rollouts.read_text().splitlines() if line.strip()]
        stats = policy_gradient(model, rows, args.lr)
    save(model, state, args.out)
    print(json.dumps({**stats, "seconds": round(time.perf_counter() - started, 2)}))


if __name__ == "__main__":
    main()
