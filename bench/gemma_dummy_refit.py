"""Does the installed vLLM still have the Gemma-3 dummy-weights bug the model quirk works around?

NeMo RL's finding (seeds/model-quirks.md): vLLM's Gemma-3 creates a `normalizer` buffer
(sqrt(hidden_size)) that Hugging Face weights do not have; with `load_format="dummy"` it was
filled with dummy values, and a weight refit (the trainer pushing real weights) never overwrote
it. This script reproduces exactly that, with a tiny Gemma-3 built offline
(`tiny_model.py --arch gemma3`):

    A  LLM(load_format="auto")                         the reference
    B  LLM(load_format="dummy"), then a refit: model.load_weights(<the real safetensors>)

and reports `normalizer` in B after the dummy init and after the refit, and whether B's greedy
tokens equal A's. Runs under the engine's interpreter (vLLM installed), in one process
(VLLM_ENABLE_V1_MULTIPROCESSING=0 keeps the model reachable). Prints JSON (and --out writes it).

    <engine python> bench/gemma_dummy_refit.py --model DIR [--out results.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

PROMPTS = ["The weather in Paris is", "In Tokyo it is", "Tell me about Lima", "Oslo today:"]


def _normalizer(worker: Any) -> float | None:
    model = worker.model_runner.model
    for name, buffer in model.named_buffers():
        if name.endswith("normalizer"):
            return float(buffer.float().item())
    return None


def _refit(worker: Any, model_dir: str) -> int:
    from safetensors.torch import load_file

    weights = load_file(str(Path(model_dir) / "model.safetensors"))
    worker.model_runner.model.load_weights(iter(weights.items()))
    return len(weights)


def _greedy(llm: Any) -> list[list[int]]:
    from vllm import SamplingParams

    outputs = llm.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True))
    return [list(output.outputs[0].token_ids) for output in outputs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch
    import vllm
    from vllm import LLM

    on_gpu = torch.cuda.is_available()
    common: dict[str, Any] = {"model": args.model, "enforce_eager": True, "max_model_len": 512}
    common |= {"dtype": "bfloat16", "gpu_memory_utilization": 0.3} if on_gpu else {"dtype": "float32"}
    config = json.loads((Path(args.model) / "config.json").read_text())
    expected = math.sqrt(config["hidden_size"])

    reference = LLM(load_format="auto", **common)
    normalizer_auto = reference.collective_rpc(_normalizer)[0]
    tokens_auto = _greedy(reference)
    del reference
    gc.collect()

    dummy = LLM(load_format="dummy", **common)
    normalizer_dummy = dummy.collective_rpc(_normalizer)[0]
    tokens_dummy = _greedy(dummy)
    refit_error = None
    try:
        refitted = dummy.collective_rpc(_refit, args=(args.model,))[0]
    except Exception as error:  # reported: the CPU backend repacks weights after loading
        refitted, refit_error = 0, f"{type(error).__name__}: {str(error)[:300]}"
    normalizer_refit = dummy.collective_rpc(_normalizer)[0]
    tokens_refit = _greedy(dummy) if refit_error is None else None

    def close(value: float | None) -> bool:
        return value is not None and abs(value - expected) <= 1e-2 * expected

    result = {
        "vllm": vllm.__version__,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if on_gpu else "cpu",
        "model_type": config.get("model_type"),
        "normalizer_expected": expected,
        "normalizer_auto": normalizer_auto,
        "normalizer_after_dummy_init": normalizer_dummy,
        "normalizer_after_refit": normalizer_refit,
        "tensors_refitted": refitted,
        "refit_error": refit_error,
        "greedy_equal_auto_vs_dummy_before_refit": tokens_dummy == tokens_auto,
        "greedy_equal_auto_vs_dummy_after_refit": tokens_refit == tokens_auto,
        "normalizer_survives_dummy_init": close(normalizer_dummy),
        "bug_present": None if refit_error else (not close(normalizer_refit) or tokens_refit != tokens_auto),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text)
    sys.exit(0)


if __name__ == "__main__":
    main()
