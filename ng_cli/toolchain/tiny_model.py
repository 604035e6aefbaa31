"""Build a tiny Qwen2 model directory offline, for engine tests and local trials.

No weights can be downloaded here, so this writes everything vLLM needs from nothing: a Qwen2
config (head_dim 64: the CPU attention backend wants head_dim >= 32), seeded random weights as
safetensors, a byte-level BPE tokenizer trained on text generated below, and a Qwen/Hermes
chat template. Random weights give near-uniform output: tests assert on structure, or force
output with structured outputs.

Runs under the vLLM venv's python (torch, transformers, tokenizers); it imports nothing from
ng_cli on purpose. Usage: ``python tiny_model.py --out DIR [--seed 0] [--experts 16 --top-k 4]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Bump when the files written change, so cached directories are rebuilt.
FORMAT_VERSION = 1
MARKER = ".ng_tiny_model"

# Special tokens are skipped when vLLM detokenizes; the tool and think tags must stay visible
# in the text, or the hermes tool parser and reasoning parsers never see them.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEXT_TOKENS = ["<tool_call>", "</tool_call>", "<think>", "</think>", "<tool_response>", "</tool_response>"]
EOS_TOKEN = "<|im_end|>"
PAD_TOKEN = "<|endoftext|>"

# Qwen2's pre-tokenizer regex: \p{N} alone makes every digit its own token, so numbers can be
# copied digit by digit.
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# How every turn is rendered, shared with train_weather_model.py: the hermes tool-call form vLLM
# parses, tool results as a user turn in <tool_response>, each assistant turn closed by EOS.
MESSAGES_TEMPLATE = """\
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}
{%- for tool_call in message.tool_calls or [] %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '\\n<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' }}
{%- if tool_call.arguments is string %}{{- tool_call.arguments }}\
{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}
{{- '}\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
"""

CHAT_TEMPLATE = (
    """\
{%- if messages[0].role == 'system' %}{%- set system = messages[0].content %}{%- else %}\
{%- set system = '' %}{%- endif %}
{%- if tools %}
{{- '<|im_start|>system\\n' + system + ('\\n\\n' if system else '') }}
{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n' }}
{{- 'You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}
{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments ' }}
{{- 'within <tool_call></tool_call> XML tags:\\n<tool_call>\\n' }}
{{- '{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}
{%- elif system %}
{{- '<|im_start|>system\\n' + system + '<|im_end|>\\n' }}
{%- endif %}
"""
    + MESSAGES_TEMPLATE
)

# Space-separated word pools for the training text; the tokenizer learns each as whole tokens.
CITIES = (
    "Paris London Berlin Madrid Rome Vienna Prague Warsaw Lisbon Dublin Oslo Stockholm Helsinki "
    "Copenhagen Amsterdam Brussels Zurich Geneva Munich Hamburg Milan Naples Athens Istanbul Cairo "
    "Nairobi Lagos Johannesburg Tokyo Osaka Kyoto Seoul Beijing Shanghai Shenzhen Mumbai Delhi "
    "Bangalore Bangkok Hanoi Singapore Jakarta Manila Sydney Melbourne Auckland Toronto Montreal "
    "Vancouver Chicago Boston Seattle Denver Austin Dallas Houston Miami Atlanta Phoenix Lima "
    "Bogota Santiago Quito Caracas Havana Reykjavik Riga Tallinn Vilnius Kyiv Budapest Sofia"
)
WEATHER = (
    "sunny cloudy rainy snowy windy foggy stormy humid dry clear overcast drizzle thunderstorm "
    "temperature degrees celsius fahrenheit forecast wind speed humidity pressure rain snow sun "
    "cloud storm hot cold warm cool mild freezing"
)
WORDS = (
    "the a an is are was will be it in on at of to for and or but not what how which when where "
    "weather today tomorrow now currently expected high low please tell me you can could I we "
    "hello hi thanks thank yes no okay sure here result answer call function tool name arguments "
    "city unit get lookup check user assistant system helpful"
)


def _corpus() -> list[str]:
    """Return the tokenizer's training text; fixed, so the tokenizer does not depend on --seed."""
    rng = random.Random(1234)
    cities, weather, words = CITIES.split(), WEATHER.split(), WORDS.split()
    lines = [CITIES, WEATHER, WORDS]
    for _ in range(3000):
        city, term = rng.choice(cities), rng.choice(weather)
        degrees = rng.randint(-30, 45)
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(3, 9)))
        lines.append(f"The weather in {city} is {term}, {degrees} degrees. {sentence.capitalize()}?")
        lines.append(json.dumps({"name": "get_weather", "arguments": {"city": city, "unit": "celsius"}}))
        lines.append(json.dumps({"city": city, "temperature": degrees, "conditions": term}))
    return lines


def train_bpe(
    corpus: list[str], *, vocab_size: int, text_tokens: Sequence[str], isolated: Sequence[str] = ()
) -> Any:
    """A Qwen2-style byte-level BPE `tokenizers.Tokenizer` trained on `corpus`, with SPECIAL_TOKENS
    and `text_tokens` added afterwards; `isolated`: regexes split off before Qwen2's (this file's
    and train_weather_model.py's tokenizers)."""
    from tokenizers import (
        AddedToken,
        Regex,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        trainers,
    )

    tokenizer = Tokenizer(models.BPE())
    # NFC as in Qwen2: transformers' Qwen2Tokenizer adds it on load, so raw `tokenizers` users
    # and vLLM encode alike.
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            *(
                pre_tokenizers.Split(Regex(pattern), behavior="isolated")
                for pattern in (*isolated, SPLIT_PATTERN)
            ),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(corpus, trainer=trainer)
    # Added after training, so no merge ever produces them from ordinary text.
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in text_tokens])
    return tokenizer


def _build_tokenizer(out: Path) -> int:
    """Train the BPE tokenizer, write tokenizer.json; return its size."""
    tokenizer = train_bpe(_corpus(), vocab_size=1024, text_tokens=TEXT_TOKENS)
    tokenizer.save(str(out / "tokenizer.json"))
    return int(tokenizer.get_vocab_size(with_added_tokens=True))


def write_tokenizer_config(out: Path, chat_template: str = CHAT_TEMPLATE) -> None:
    """Write tokenizer_config.json with the chat template and the Qwen-style special tokens."""
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 4096,
        "bos_token": None,
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "unk_token": None,
        "clean_up_tokenization_spaces": False,
        "add_prefix_space": False,
        "chat_template": chat_template,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def _build_model(
    out: Path,
    *,
    vocab_size: int,
    eos_id: int,
    pad_id: int,
    seed: int,
    experts: int = 0,
    top_k: int = 4,
    arch: str = "qwen2",
) -> None:
    """Write config.json, generation_config.json and seeded random safetensors weights.

    `experts` > 0 makes it a Qwen3-MoE (every layer sparse, `top_k` experts per token), for
    data- and expert-parallel trials; `arch="gemma3"` a Gemma-3 text model (`gemma3_text`), for
    the Gemma quirk; `arch="llama3-8b"` only the config of a Llama-3-8B-shaped model (no weights:
    8B random parameters would take minutes and 16 GB; vLLM serves it with `load_format: dummy`).
    The tokenizer and template are the same.
    """
    import torch
    from transformers import (
        GenerationConfig,
        Qwen2Config,
        Qwen2ForCausalLM,
        Qwen3MoeConfig,
        Qwen3MoeForCausalLM,
    )
    from transformers.utils import logging

    logging.disable_progress_bar()

    common = {
        "vocab_size": vocab_size,
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": True,
        "bos_token_id": None,
        "eos_token_id": eos_id,
        "pad_token_id": pad_id,
        "dtype": "float32",
    }
    torch.manual_seed(seed)
    if arch == "llama3-8b":  # the shape only: vLLM serves it with load_format dummy
        from transformers import LlamaConfig

        LlamaConfig(
            **{**common, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
               "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
               "max_position_embeddings": 8192, "tie_word_embeddings": False, "dtype": "bfloat16"},
            rope_theta=500000.0,
        ).save_pretrained(out)  # fmt: skip
        GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id).save_pretrained(out)
        return
    if arch == "gemma3":
        from transformers import Gemma3ForCausalLM, Gemma3TextConfig

        gemma = {key: value for key, value in common.items() if key != "dtype"}
        model = Gemma3ForCausalLM(Gemma3TextConfig(**gemma, sliding_window=512)).to(torch.float32)
    elif experts:
        moe = Qwen3MoeConfig(
            **common,
            moe_intermediate_size=64,
            num_experts=experts,
            num_experts_per_tok=top_k,
            norm_topk_prob=True,
            decoder_sparse_step=1,
            mlp_only_layers=[],
        )
        model = Qwen3MoeForCausalLM(moe).to(torch.float32)
    else:
        model = Qwen2ForCausalLM(Qwen2Config(**common)).to(torch.float32)
    model.save_pretrained(out, safe_serialization=True)
    # Only <|im_end|> stops: the chat template closes every assistant turn with it, so a
    # generated turn ends with the same token as that turn rendered into the next prompt. (With
    # <|endoftext|> also a stop, structured outputs were seen ending turns with it instead.)
    GenerationConfig(eos_token_id=eos_id, pad_token_id=pad_id).save_pretrained(out)


def build(out: Path, seed: int, *, experts: int = 0, top_k: int = 4, arch: str = "qwen2") -> Path:
    """Build the model into ``out`` unless a complete one with the same settings is already there."""
    marker = out / MARKER
    shape: dict[str, object] = {"experts": experts, "top_k": top_k} if experts else {}
    if arch != "qwen2":
        shape["arch"] = arch
    stamp = json.dumps({"format": FORMAT_VERSION, "seed": seed, **shape})
    if marker.is_file() and marker.read_text() == stamp:
        return out
    out.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    # Build beside the target and move file by file (os.replace is atomic), marker last, so a
    # concurrent builder or an interrupted run never leaves a directory that looks complete.
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp_name:
        tmp = Path(tmp_name)
        vocab_size = _build_tokenizer(tmp)
        write_tokenizer_config(tmp)
        ids = json.loads((tmp / "tokenizer.json").read_text())["added_tokens"]
        token_id = {entry["content"]: entry["id"] for entry in ids}
        _build_model(
            tmp,
            vocab_size=vocab_size,
            eos_id=token_id[EOS_TOKEN],
            pad_id=token_id[PAD_TOKEN],
            seed=seed,
            experts=experts,
            top_k=top_k,
            arch=arch,
        )
        for path in tmp.iterdir():
            os.replace(path, out / path.name)
    marker.write_text(stamp)
    return out


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, build, print the directory."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="model directory to create")
    parser.add_argument("--seed", type=int, default=0, help="seed for the random weights")
    parser.add_argument(
        "--experts", type=int, default=0, help="a Qwen3-MoE with this many experts (0: dense)"
    )
    parser.add_argument("--top-k", type=int, default=4, help="experts per token of the MoE")
    parser.add_argument("--arch", choices=["qwen2", "gemma3", "llama3-8b"], default="qwen2",
                        help="gemma3: a Gemma-3 text model; llama3-8b: an 8B Llama shape, config only")  # fmt: skip
    args = parser.parse_args(argv)
    start = time.monotonic()
    out = build(args.out.resolve(), args.seed, experts=args.experts, top_k=args.top_k, arch=args.arch)
    print(f"tiny model ready in {time.monotonic() - start:.1f} s: {out}", file=sys.stderr)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
