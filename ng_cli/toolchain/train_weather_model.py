"""Train the embedded default model offline: a tiny Qwen2 that solves the example weather task.

The quickstart's environment (resources_servers/example_single_tool_call) asks "What is the
weather in <City> right now?", offers one `get_weather(city)` tool and rewards a final answer that
states the tool's condition and temperature. This script trains a 3M-parameter Qwen2 from
scratch on synthetic two-turn episodes of exactly that conversation, rendered by the chat
template the model ships with, so that vLLM (hermes tool parser) serves a model that calls the
tool with the asked city and then copies the tool's result into its answer.

What makes it work (REFERENCE.md section 6): one token per digit and a lone "-" token, so
temperatures are copied digit by digit; a tokenizer trained on thousands of generated names but
a model trained on a few hundred, so city names are made of shared pieces; random weather per
episode, so the model copies the tool result instead of memorising the table; loss on assistant
tokens only. `--verify-url` checks vLLM's `/tokenize` against the training rendering.

Runs under the vLLM venv's python (torch, transformers, tokenizers) and imports nothing from
ng_cli. Usage: ``python train_weather_model.py --out models/tiny-weather [--seed 0]``. One file on
purpose (about 600 lines): data, template, training and the model card must stay in step, and
the script must run on its own under the other venv.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ng_cli.toolchain.tiny_model import MESSAGES_TEMPLATE, train_bpe, write_tokenizer_config
else:  # this file runs by path under the vLLM venv, where its sibling script is importable by name
    from tiny_model import MESSAGES_TEMPLATE, train_bpe, write_tokenizer_config

# Ordinary added tokens: vLLM strips special tokens from the text and the hermes parser must see these.
TEXT_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
EOS_TOKEN = "<|im_end|>"
VOCAB_SIZE = 1024

# Qwen/Hermes style. Tools are listed compactly, one line each, which keeps an episode ~110 tokens.
# A tool result is a user turn wrapped in <tool_response> (as Qwen2.5's template does).
CHAT_TEMPLATE = (
    """\
{%- set ns = namespace(system='') %}
{%- if messages and messages[0].role == 'system' %}{%- set ns.system = messages[0].content %}{%- endif %}
{%- if ns.system or tools %}
{{- '<|im_start|>system\\n' + ns.system }}
{%- if tools %}
{{- ('\\n\\n' if ns.system else '') + '# Tools' }}
{%- for tool in tools %}
{%- set fn = tool.function if tool.function is defined else tool %}
{%- set params = fn.parameters.properties if fn.parameters is defined and fn.parameters.properties is defined \
else {} %}
{{- '\\n' + fn.name + '(' + (params | list | join(', ')) + ')' }}
{%- if fn.description %}{{- ': ' + fn.description }}{%- endif %}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\\n' }}
{%- endif %}
"""
    + MESSAGES_TEMPLATE
)

# The example data rows' system prompt and tool, as vllm_model sends them to vLLM.
SYSTEM_PROMPT = "You are a helpful assistant. Use the get_weather tool, then answer with the condition and the temperature."
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather of a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city name, e.g. Paris"}},
                "required": ["city"],
                "additionalProperties": False,
            },
            "strict": True,
        },
    }
]
TABLE_CITIES = ["Paris", "London", "Tokyo", "New York", "Sydney", "Cairo", "Oslo", "Lima"]
_CONDITION_WORDS = (
    "sunny rainy cloudy windy hot snowy foggy cold warm mild stormy humid dry clear overcast "
    "drizzly hazy freezing icy misty breezy"
)
CONDITIONS = _CONDITION_WORDS.split()
QUESTIONS = [
    "What is the weather in {city} right now?",
    "What is the weather in {city} right now?",
    "What is the weather in {city} right now?",
    "What's the weather like in {city}?",
    "How is the weather in {city} today?",
    "Tell me the current weather in {city}.",
    "What is the weather in {city}?",
    "Weather in {city}?",
]
ANSWER = "It is {condition} in {city}, {temperature} degrees {unit}."
_SYLLABLE_TEXT = (
    "ka to ri ma lo sen dra vel mor tan bel qui zor fen gar lis nor pra sto vin hal bur cas del "
    "eri fos gul hen ist jor kel lun mir nes ost pel rav sul tor ulm var wes yor zan ber cor "
    "dun ela fir gos hor ila jen kos lor mun nal ors pon rin sar tul umb ven"
)
SYLLABLES = _SYLLABLE_TEXT.split()
PREFIXES = ["New", "San", "Port", "Saint", "El", "Lake", "North", "South"]


def city_names(rng: random.Random, count: int) -> list[str]:
    """Generated city names: 2-3 syllables, a few with a prefix word like "New York"."""
    names: set[str] = set()
    while len(names) < count:
        name = "".join(rng.choice(SYLLABLES) for _ in range(rng.choice((2, 2, 3)))).capitalize()
        if rng.random() < 0.15:
            name = f"{rng.choice(PREFIXES)} {name}"
        if name not in TABLE_CITIES:
            names.add(name)
    return sorted(names)


@dataclass(frozen=True)
class Weather:
    city: str
    condition: str
    temperature: int
    unit: str

    def tool_output(self) -> str:
        """The tool result as simple_agent sends it (orjson.dumps: compact, key order kept)."""
        record = {"city": self.city, "condition": self.condition, "temperature": self.temperature}
        return json.dumps({**record, "unit": self.unit}, separators=(",", ":"))

    def answer(self) -> str:
        return ANSWER.format(**self.__dict__)


def random_weather(rng: random.Random, city: str) -> Weather:
    """Random weather, so the answer can only come from the tool result."""
    unit = "celsius" if rng.random() < 0.85 else "fahrenheit"
    low, high = (-30, 45) if unit == "celsius" else (-20, 110)
    return Weather(city, rng.choice(CONDITIONS), rng.randint(low, high), unit)


def episode(question: str, weather: Weather, *, system: str | None = SYSTEM_PROMPT) -> list[dict[str, Any]]:
    """The chat messages of one solved episode, shaped as vLLM receives them from vllm_model."""
    function = {"name": "get_weather", "arguments": {"city": weather.city}}
    call = {"id": "call_0", "type": "function", "function": function}
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    return [
        *messages,
        {"role": "user", "content": question},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_0", "content": weather.tool_output()},
        {"role": "assistant", "content": weather.answer()},
    ]


def tokenizer_corpus(pool: Sequence[str]) -> list[str]:
    """Text for the BPE: one rendered episode per pool name, so the template's words get whole
    tokens and the names split into pieces shared by all of them."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    # An empty tokenizer is enough to render the chat template (text only), exactly as training does.
    renderer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), chat_template=CHAT_TEMPLATE)
    rng = random.Random(1234)
    lines = [" ".join(CONDITIONS), ANSWER]
    for city in [*pool, *TABLE_CITIES]:
        messages = episode(rng.choice(QUESTIONS).format(city=city), random_weather(rng, city))
        lines.append(renderer.apply_chat_template(messages, tools=TOOLS, tokenize=False))
    return lines


def build_tokenizer(out: Path, pool: Sequence[str]) -> None:
    """Train the byte-level BPE, add special and tool tokens afterwards, write tokenizer files."""
    # "-" is isolated first (so "-3" copies like "3"), then Qwen2's regex gives one token per digit.
    tokenizer = train_bpe(
        tokenizer_corpus(pool), vocab_size=VOCAB_SIZE, text_tokens=TEXT_TOKENS, isolated=["-"]
    )
    tokenizer.save(str(out / "tokenizer.json"))
    write_tokenizer_config(out, CHAT_TEMPLATE)


def render(tokenizer: Any, messages: list[dict[str, Any]]) -> tuple[list[int], list[int]]:
    """Token ids of the rendered episode and a 0/1 mask of the assistant tokens (each ends at <|im_end|>)."""
    text = tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False)
    opener = "<|im_start|>assistant\n"
    ids: list[int] = []
    mask: list[int] = []
    position = 0
    while (start := text.find(opener, position)) != -1:
        start += len(opener)
        end = text.index(EOS_TOKEN, start) + len(EOS_TOKEN)
        for piece, is_target in ((text[position:start], 0), (text[start:end], 1)):
            piece_ids = tokenizer.encode(piece, add_special_tokens=False)
            ids += piece_ids
            mask += [is_target] * len(piece_ids)
        position = end
    tail = tokenizer.encode(text[position:], add_special_tokens=False)
    return ids + tail, mask + [0] * len(tail)


def training_messages(rng: random.Random, cities: Sequence[str]) -> list[dict[str, Any]]:
    """One episode: a table city a third of the time, the system prompt of the data rows mostly."""
    city = rng.choice(TABLE_CITIES) if rng.random() < 0.3 else rng.choice(cities)
    system = SYSTEM_PROMPT if rng.random() < 0.9 else None
    return episode(rng.choice(QUESTIONS).format(city=city), random_weather(rng, city), system=system)


def build_model(vocab_size: int, eos_id: int, pad_id: int) -> Any:
    """The untrained Qwen2: hidden 256, 4 layers, 4 heads of 64, tied embeddings, fp32."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=256,
        intermediate_size=640,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        dtype="float32",
    )
    return Qwen2ForCausalLM(config).to(torch.float32)


def batch_tensors(rows: Sequence[tuple[list[int], list[int]]], pad_id: int) -> tuple[Any, Any, Any]:
    """Right-padded input ids, attention mask, and labels (-100 outside assistant tokens)."""
    import torch

    width = max(len(ids) for ids, _ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), -100, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for row, (tokens, mask) in enumerate(rows):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        attention[row, : len(tokens)] = 1
        labels[row, : len(tokens)] = torch.where(torch.tensor(mask) == 1, torch.tensor(tokens), -100)
    return ids, attention, labels


@dataclass(frozen=True)
class TrainSettings:
    seed: int
    steps: int
    batch_size: int
    lr: float
    warmup_steps: int
    eval_every: int


def train(model: Any, tokenizer: Any, cities: Sequence[str], settings: TrainSettings) -> list[str]:
    """AdamW with warm-up and cosine decay over fresh episodes; returns the progress log lines."""
    import torch

    rng = random.Random(settings.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, betas=(0.9, 0.98), weight_decay=0.01)

    def lr_at(step: int) -> float:
        if step < settings.warmup_steps:
            return (step + 1) / settings.warmup_steps
        progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
        return 0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)
    log: list[str] = []
    started = time.monotonic()
    for step in range(settings.steps):
        rows = [render(tokenizer, training_messages(rng, cities)) for _ in range(settings.batch_size)]
        ids, attention, labels = batch_tensors(rows, tokenizer.pad_token_id)
        model.train()
        loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if (step + 1) % settings.eval_every == 0 or step + 1 == settings.steps:
            scores = evaluate(model, tokenizer, TABLE_CITIES, episodes=len(TABLE_CITIES), seed=step)
            line = f"step {step + 1}: loss {loss.item():.4f}, {time.monotonic() - started:.0f} s, table cities {scores}"
            log.append(line)
            print(line, file=sys.stderr, flush=True)
    return log


TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def generate(model: Any, tokenizer: Any, messages: list[dict[str, Any]], *, is_sampled: bool = False) -> str:
    """The model's next assistant turn, up to <|im_end|>: greedy, or sampled at temperature 1."""
    import torch

    prompt = tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False, add_generation_prompt=True)
    ids = torch.tensor([tokenizer.encode(prompt, add_special_tokens=False)])
    # vLLM's defaults: no top-k, no top-p (transformers would apply top_k=50 otherwise).
    sampling = {"do_sample": True, "top_k": 0, "top_p": 1.0} if is_sampled else {"do_sample": False}
    model.eval()
    with torch.no_grad():
        out = model.generate(
            ids, max_new_tokens=48, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
            **sampling,
        )  # fmt: skip
    return str(tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True))


def called_city(text: str) -> str | None:
    """The city of a hermes-style get_weather call in `text`, if it parses."""
    match = TOOL_CALL.search(text)
    try:
        call = json.loads(match.group(1)) if match else None
        city = call["arguments"]["city"] if call and call.get("name") == "get_weather" else None
    except (json.JSONDecodeError, KeyError, TypeError):
        return None
    return city if isinstance(city, str) else None


def mentions(text: str, weather: Weather) -> bool:
    """The environment's verify: the condition as a whole word and the temperature as a whole number."""
    has_condition = re.search(rf"\b{re.escape(weather.condition)}\b", text, re.IGNORECASE) is not None
    return has_condition and re.search(rf"(?<![\d.]){weather.temperature}(?![\d])", text) is not None


def evaluate(
    model: Any, tokenizer: Any, cities: Sequence[str], *, episodes: int, seed: int, is_sampled: bool = False
) -> dict[str, float]:
    """Rates of a parsed tool call, of the asked city in it, and of a final answer with the tool's weather.

    Each turn is judged on its own: the second turn's prompt holds the correct call and result.
    """
    rng = random.Random(seed)
    counts = {"tool_call": 0, "city": 0, "answer": 0}
    for index in range(episodes):
        city = cities[index % len(cities)]
        weather = random_weather(rng, city)
        messages = episode(QUESTIONS[index % len(QUESTIONS)].format(city=city), weather)
        got = called_city(generate(model, tokenizer, messages[:-3], is_sampled=is_sampled))
        counts["tool_call"] += got is not None
        counts["city"] += got == city
        counts["answer"] += mentions(
            generate(model, tokenizer, messages[:-1], is_sampled=is_sampled), weather
        )
    return {name: round(count / episodes, 3) for name, count in counts.items()}


def verify_tokenize(model_dir: Path, root_url: str, episodes: int = 12) -> int:
    """Check that vLLM's /tokenize of each turn's chat request is the training context, token for token.

    The requests are shaped as vllm_model sends them: the call's arguments as the hermes parser's
    JSON string, the assistant's content empty. Returns the number of mismatches (printed).
    """
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rng = random.Random(7)
    pool = city_names(random.Random(99), 50)
    mismatches = 0
    for index in range(episodes):
        city = TABLE_CITIES[index % len(TABLE_CITIES)] if index % 2 else rng.choice(pool)
        messages = episode(QUESTIONS[index % len(QUESTIONS)].format(city=city), random_weather(rng, city))
        ids, mask = render(tokenizer, messages)
        wire = json.loads(json.dumps(messages))
        wire[2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"city": city}, ensure_ascii=False)
        for turn_end in (2, 4):
            payload = {"messages": wire[:turn_end], "tools": TOOLS, "add_generation_prompt": True}
            request = urllib.request.Request(
                f"{root_url}/tokenize",
                data=json.dumps(payload).encode(),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                served = list(json.loads(response.read())["tokens"])
            # The served prompt must be the training prefix right before an assistant turn's first target.
            is_same = ids[: len(served)] == served and mask[len(served)] == 1 and mask[len(served) - 1] == 0
            if not is_same:
                mismatches += 1
                print(
                    f"mismatch: {city!r} turn ending at message {turn_end}:\n{served}\n{ids}", file=sys.stderr
                )
    print(f"/tokenize checked on {episodes * 2} prompts: {mismatches} mismatches", file=sys.stderr)
    return mismatches


def write_model_card(out: Path, facts: dict[str, Any]) -> None:
    """README.md: what the model is, how it was trained (command, seed, time) and what it scores."""
    scores = "\n".join(
        f"| {name} | {s['tool_call']:.3f} | {s['city']:.3f} | {s['answer']:.3f} |"
        for name, s in facts["scores"].items()
    )
    progress = "\n".join(f"    {line}" for line in facts["log"])
    (out / "README.md").write_text(f"""\
# tiny-weather: the embedded default model

A Qwen2 of {facts["params"] / 1e6:.2f}M parameters (hidden 256, 4 layers, 4 attention heads of 64,
2 KV heads, vocab {facts["vocab"]}, tied embeddings, fp32), trained from scratch on CPU for one
task: the quickstart's weather environment (`resources_servers/example_single_tool_call`). It
calls `get_weather` with the asked city, then answers "It is <condition> in <city>, <N> degrees
<unit>." from the tool result. It knows nothing else. vLLM serves it with
`--enable-auto-tool-choice --tool-call-parser hermes`.

## How it was made

    {facts["command"]}

- Script: `ng_cli/toolchain/train_weather_model.py`, run by the CPU vLLM venv's python.
  `scripts/train_embedded_model.sh` runs it and then `tests/engine/test_embedded_model.py`.
- Seed: {facts["seed"]}. The same seed gives the same weights.
- Training: {facts["steps"]} steps of {facts["batch_size"]} new episodes each (AdamW, lr {facts["lr"]},
  {facts["warmup"]} warm-up steps, then cosine decay), loss on the assistant tokens only,
  {facts["threads"]} CPU threads.
- Wall time: training {facts["train_s"] / 60:.1f} min, the whole run {facts["total_s"] / 60:.1f} min.
- Data: synthetic episodes rendered with this model's own chat template, shaped as vllm_model
  sends them: the example rows' system prompt (90% of episodes), 8 question phrasings, and the
  tool result as simple_agent serialises it.
- Cities: the 8 of the environment's table in 30% of episodes, else one of {facts["train_cities"]}
  generated names.
- Weather: a random condition (one of {len(CONDITIONS)} words), temperature and unit in every
  episode, so the answer can only come from the tool result.
- Tokenizer: byte-level BPE ({VOCAB_SIZE} entries) trained on one rendered episode for each of
  {facts["pool"]} generated names. One token per digit and a lone `-`, NFC.
- Added after the BPE training: `<|im_start|>`, `<|im_end|>` (the only EOS) and `<|endoftext|>`
  (pad) as special tokens; `<tool_call>`, `</tool_call>`, `<tool_response>` and
  `</tool_response>` as ordinary tokens, because vLLM strips special tokens from the text and the
  hermes parser must see the tags.

## Scores

Measured by the script with transformers' `generate` on the training rendering. Each turn is
judged on its own:

- tool call: a hermes `<tool_call>` that parses;
- city: the asked city in it;
- answer: the final answer has the tool's condition and temperature (the environment's verify).

| cities ({facts["eval_episodes"]} episodes each) | tool call | city | answer |
| --- | --- | --- | --- |
{scores}

For the scores through the real stack (`bash scripts/quickstart.sh`: CPU vLLM, ng_run,
ng_collect_rollouts, vLLM's default temperature 1.0), see `docs/quickstart.md`.

Progress (greedy, one episode per table city):

{progress}
""")


def run(args: argparse.Namespace) -> Path:
    """Train into a directory beside ``args.out`` and move the files in, the model card last."""
    import torch
    from transformers import AutoTokenizer, GenerationConfig
    from transformers.utils import logging

    logging.disable_progress_bar()
    started = time.monotonic()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    pool = city_names(random.Random(99), args.pool)
    cities = random.Random(args.seed).sample(pool, args.train_cities)
    unseen = [city for city in pool if city not in cities][: args.eval_episodes]
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as tmp_name:
        tmp = Path(tmp_name)
        build_tokenizer(tmp, pool)
        tokenizer = AutoTokenizer.from_pretrained(tmp)
        model = build_model(len(tokenizer), tokenizer.eos_token_id, tokenizer.pad_token_id)
        settings = TrainSettings(
            args.seed, args.steps, args.batch_size, args.lr, args.warmup, args.eval_every
        )
        train_started = time.monotonic()
        log = train(model, tokenizer, cities, settings)
        train_s = time.monotonic() - train_started
        model.save_pretrained(tmp, safe_serialization=True)
        GenerationConfig(
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
        ).save_pretrained(tmp)
        n = args.eval_episodes
        scores = {
            "table, greedy": evaluate(model, tokenizer, TABLE_CITIES, episodes=n, seed=1),
            "table, sampled T=1": evaluate(
                model, tokenizer, TABLE_CITIES, episodes=n, seed=2, is_sampled=True
            ),
            "trained, sampled T=1": evaluate(model, tokenizer, cities, episodes=n, seed=3, is_sampled=True),
            "unseen, greedy": evaluate(model, tokenizer, unseen, episodes=n, seed=4),
        }
        facts = {
            **vars(args), "command": " ".join(["python", *sys.argv]).replace(str(Path.cwd()) + "/", ""),
            "params": sum(p.numel() for p in model.parameters()), "vocab": len(tokenizer), "log": log,
            "scores": scores, "train_s": train_s, "total_s": time.monotonic() - started,
        }  # fmt: skip
        write_model_card(tmp, facts)
        for path in sorted(tmp.iterdir(), key=lambda p: p.name == "README.md"):
            path.chmod(0o644)  # safetensors writes 0600; these files are for everyone
            os.replace(path, out / path.name)
    print(json.dumps(scores), file=sys.stderr)
    return out


def main(argv: list[str] | None = None) -> int:
    """Parse arguments; train (default) or check a running vLLM's /tokenize (--verify-url)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="model directory to write (or to verify)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=900)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--eval-episodes", type=int, default=40)
    parser.add_argument("--pool", type=int, default=6000, help="generated names the tokenizer sees")
    parser.add_argument("--train-cities", type=int, default=400, help="generated names the model sees")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--verify-url", help="a vLLM serving --out, e.g. http://127.0.0.1:8000")
    args = parser.parse_args(argv)
    if args.verify_url:
        return 1 if verify_tokenize(args.out, args.verify_url.rstrip("/")) else 0
    print(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
