"""Probes that tell two checkpoints of a random-weight MoE apart, for bench/moe_dp_ep.py.

A random-weight model answers the same greedy text on any checkpoint (the tiny MoE answers
"\\n\\n\\n..." on A and B), so these compare what does differ: the top-5 logprobs of the first
token on several prompts, asked of every engine endpoint (each rank's own API server under
external LB) and of the model server; and each engine's weights fingerprint (`ng_weights_fingerprint`:
`<whole> shared=<all but the experts>`), which shows which rank's experts changed.

* `phase_refit`: idle, A -> B -> A -> B -> A: B differs from A on every endpoint, A comes back
  exactly (against boot, and the second reload against the first).
* `phase_expert`: A -> B2 -> A, where B2 is A with one expert's weights scaled (`make_b2`): only
  the rank that holds it changes its fingerprint (the shared part of every rank stays), its files
  check passes, and the answers where that expert is routed change.
* `with_logprobs`: the same probe after every update of another phase (the updates under load),
  compared with the idle answers of the checkpoint loaded.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROMPTS = [
    "What is the weather in Paris right now?",
    "Name three rivers in Africa.",
    "Write a haiku about the sea.",
    "How many legs does a spider have?",
    "Translate 'good morning' into French.",
    "List the planets of the solar system.",
]
TOLERANCE = 0.05
"""Largest logprob difference still counted as the same answer under load (batch shapes change the
kernels' summation order; idle answers are compared exactly)."""

Answers = dict[str, list[Any]]
"""Endpoint name -> per prompt, the first token's top-5 [[token, logprob], ...] (or an error)."""


def _post(url: str, body: Any, key: str | None, timeout: float = 120) -> Any:
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.loads(answer.read())


def top5(url: str, key: str | None, model: str | None, prompt: str) -> Any:
    """The first token's top-5 logprobs, greedy, as [[token, logprob], ...]; or {"error": ...}."""
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 1,
        "temperature": 0.0,
        "logprobs": True,
        "top_logprobs": 5,
    }
    if model:
        body["model"] = model
    try:
        answer = _post(f"{url}/chat/completions", body, key)
        content = answer["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        return [[entry["token"], entry["logprob"]] for entry in content]
    except Exception as error:  # recorded: the comparison counts it as not equal
        return {"error": repr(error)[:300]}


class Probes:
    """The endpoints of one stack: each engine's (with the engines' key) and the model server's."""

    def __init__(self, stack: Any, key: str, model: str) -> None:
        self.key = key
        self.model = model
        self.engines = {str(e["name"]): str(e["url"]) for e in stack.engines}
        self.model_server = f"{stack.model_url}/v1"

    def answers(self) -> Answers:
        out: Answers = {
            name: [top5(url, self.key, self.model, p) for p in PROMPTS] for name, url in self.engines.items()
        }
        out["model_server"] = [top5(self.model_server, None, None, p) for p in PROMPTS]
        return out

    def fingerprints(self) -> dict[str, list[str]]:
        """Each engine's workers' fingerprints (internal LB: only the first rank answers)."""
        out = {}
        for name, url in self.engines.items():
            root = url.removesuffix("/v1").rstrip("/")
            out[name] = list(
                _post(f"{root}/collective_rpc", {"method": "ng_weights_fingerprint"}, self.key)["results"]
            )
        return out


def compare(first: Answers, second: Answers, *, tolerance: float = 0.0) -> dict[str, Any]:
    """Per endpoint: on how many prompts the two answers are the same (equal tokens, logprobs within
    `tolerance`), and the largest logprob difference over tokens both hold."""
    out: dict[str, Any] = {}
    for name in first:
        same, largest = 0, 0.0
        for a, b in zip(first[name], second.get(name, []), strict=False):
            if not isinstance(a, list) or not isinstance(b, list):
                continue
            theirs = dict((token, logprob) for token, logprob in b)
            shared = [abs(logprob - theirs[token]) for token, logprob in a if token in theirs]
            largest = max([largest, *shared])
            if [t for t, _ in a] == [t for t, _ in b] and all(d <= tolerance for d in shared):
                same += 1
        errors = sum(1 for b in second.get(name, []) if not isinstance(b, list))
        out[name] = {
            "same": same,
            "of": len(first[name]),
            "errors": errors,
            "max_abs_diff": round(largest, 6),
        }
    return out


def make_b2(a: Path, out: Path, *, layer: int, expert: int, scale: float) -> Path:
    """B2: checkpoint `a` with one expert's gate, up and down projections multiplied by `scale`,
    and `ng_changed_expert.json` saying which. Standard library only (the bench also runs under the
    project's python, without torch): F32 values scaled as floats, BF16 as the top half of one."""
    names = [
        f"model.layers.{layer}.mlp.experts.{expert}.{part}.weight"
        for part in ("gate_proj", "up_proj", "down_proj")
    ]
    out.mkdir(parents=True, exist_ok=True)
    found: list[str] = []
    for file in sorted(a.iterdir()):
        if not file.is_file() or file.name.startswith("."):
            continue
        data = file.read_bytes()
        if file.suffix == ".safetensors":
            data, here = _scaled(data, names, scale)
            found += here
        (out / file.name).write_bytes(data)
    if sorted(found) != sorted(names):
        raise SystemExit(
            f"{a}: expert {expert} of layer {layer} not found ({sorted(set(names) - set(found))})"
        )
    config = json.loads((a / "config.json").read_text())
    count = int(config.get("num_experts") or config.get("num_local_experts") or 0)
    record = {
        "from": str(a),
        "layer": layer,
        "expert": expert,
        "experts": count,
        "scale": scale,
        "tensors": names,
    }
    (out / "ng_changed_expert.json").write_text(json.dumps(record, indent=2) + "\n")
    return out


def _scaled(data: bytes, names: list[str], scale: float) -> tuple[bytes, list[str]]:
    """One safetensors file's bytes with the tensors of `names` it holds scaled; which it held."""
    import array
    import struct

    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    body = bytearray(data[8 + length :])
    here = [name for name in names if name in header]
    for name in here:
        entry = header[name]
        begin, end = entry["data_offsets"]
        if entry["dtype"] == "F32":
            values = array.array("f", bytes(body[begin:end]))
            body[begin:end] = array.array("f", (v * scale for v in values)).tobytes()
        elif entry["dtype"] == "BF16":
            halves = array.array("H", bytes(body[begin:end]))
            widened = array.array("f", array.array("I", (h << 16 for h in halves)).tobytes())
            scaled = array.array("I", array.array("f", (v * scale for v in widened)).tobytes())
            body[begin:end] = array.array("H", (w >> 16 for w in scaled)).tobytes()
        else:
            raise SystemExit(f"{name}: dtype {entry['dtype']}, expected F32 or BF16")
    return data[: 8 + length] + bytes(body), here


def _update(run: Any, name: str, path: Path) -> dict[str, Any]:
    """One idle update through the model server (what ng_update_weights sends); its record."""
    started = time.perf_counter()
    result = run.client.update(str(path), version=run.version + 1)
    run.version += 1
    run.current = name
    return {
        "checkpoint": name,
        "version": result["version"],
        "window_s": result["window_s"],
        "client_wall_s": round(time.perf_counter() - started, 4),
        "experts": result.get("experts"),
        "problems": result.get("problems"),
    }


def _experts_checked(updates: list[dict[str, Any]]) -> dict[str, Any]:
    """Over every update: experts checked against the files, and any rank left unchecked (why)."""
    checked, unchecked = 0, set()
    for update in updates:
        for workers in (update.get("experts") or {}).values():
            for worker in workers:
                checked += int(worker.get("checked", 0))
                if worker.get("unchecked"):
                    unchecked.add(str(worker["unchecked"]))
    return {"experts_checked": checked, "unchecked": sorted(unchecked)}


def phase_refit(run: Any, probes: Probes, references: dict[str, Answers]) -> dict[str, Any]:
    """Idle A -> B -> A from A: B differs everywhere, A comes back exactly; fills `references`."""
    if run.current != "A":
        raise RuntimeError(f"the refit phase starts on A, the stack serves {run.current}")
    references.setdefault("A", probes.answers())
    prints = {"A": probes.fingerprints()}
    updates = [_update(run, "B", run.paths["B"])]
    references["B"] = probes.answers()
    prints["B"] = probes.fingerprints()
    updates.append(_update(run, "A", run.paths["A"]))
    again = probes.answers()
    prints["A again"] = probes.fingerprints()
    updates += [_update(run, "B", run.paths["B"]), _update(run, "A", run.paths["A"])]
    third = probes.answers()
    references["A reloaded"] = again
    prints["A third"] = probes.fingerprints()
    b_vs_a = compare(references["A"], references["B"])
    a_again = compare(references["A"], again)
    a_third = compare(again, third)
    return {
        "b_vs_a": b_vs_a,
        "a_again_vs_a": a_again,
        "a_third_vs_a_again": a_third,
        "b_differs_everywhere": all(v["same"] == 0 and v["errors"] == 0 for v in b_vs_a.values()),
        "a_back_exactly": all(v["same"] == v["of"] for v in a_again.values()),
        # Reloaded A against reloaded A: where boot and reload lay the weights out differently (the
        # CPU build prepacks its MoE weights at boot only), this is the comparison that stays exact.
        "a_reload_repeatable": all(v["same"] == v["of"] for v in a_third.values()),
        "fingerprints_back": prints["A again"] == prints["A"],
        "fingerprints_repeatable": prints["A third"] == prints["A again"],
        "fingerprints_b_differ": all(prints["B"][n] != prints["A"][n] for n in prints["A"]),
        **_experts_checked(updates),
        "updates": updates,
        "answers": {"A": references["A"], "B": references["B"], "A again": again, "A third": third},
    }


def phase_expert(run: Any, probes: Probes, b2: Path, references: dict[str, Answers]) -> dict[str, Any]:
    """A -> B2 -> A, B2 = A with one expert changed: which ranks' fingerprints change, the files
    check on each, and on how many prompts the answers change."""
    if run.current != "A":
        raise RuntimeError(f"the expert phase starts on A, the stack serves {run.current}")
    changed = json.loads((b2 / "ng_changed_expert.json").read_text())
    before = probes.fingerprints()
    references.setdefault("A", probes.answers())
    updates = [_update(run, "B2", b2)]
    on_b2 = probes.fingerprints()
    answers = probes.answers()
    updates.append(_update(run, "A", run.paths["A"]))
    after = probes.fingerprints()
    a_reloaded = probes.answers()
    ranks = {}
    for name in before:
        whole = (
            [f.partition(" shared=")[0] for f in before[name]],
            [f.partition(" shared=")[0] for f in on_b2[name]],
        )
        shared = (
            [f.partition(" shared=")[2] for f in before[name]],
            [f.partition(" shared=")[2] for f in on_b2[name]],
        )
        root = probes.engines[name].removesuffix("/v1").rstrip("/")
        checks: list[dict[str, Any]] = (updates[0].get("experts") or {}).get(root) or []
        ranks[name] = {
            "ep_ranks": [c.get("ep_rank") for c in checks],
            "holds_it": any(changed["expert"] in c.get("held_ids", []) for c in checks),
            "experts_changed": whole[0] != whole[1],
            "shared_changed": shared[0] != shared[1],
            "back_after_a": after[name] == before[name],
        }
    holders = [n for n, r in ranks.items() if r["holds_it"]]
    return {
        "changed": changed,
        "holders": holders,
        "ranks": ranks,
        "only_the_holder_changed": bool(holders)
        and all(r["experts_changed"] == (n in holders) for n, r in ranks.items()),
        "shared_unchanged": not any(r["shared_changed"] for r in ranks.values()),
        # Against A as reloaded right after (the CPU build's boot layout differs from a reload's).
        "answers_vs_a": compare(a_reloaded, answers),
        "answers_changed_on": min(v["of"] - v["same"] for v in compare(a_reloaded, answers).values()),
        **_experts_checked(updates),
        "updates": updates,
    }


def with_logprobs(run: Any, probes: Probes, references: dict[str, Answers]) -> Callable[[], None]:
    """Probe after every `run.update` (the updates under load) and say, per prompt, whether the
    answer is nearer the idle answers of the checkpoint loaded (as reloaded, not as booted) than
    the other's: under load batch shapes change the kernels' summation order, so nearly tied
    tokens of a random model can swap, and exact equality is not expected. Returns the function
    that puts `run.update` back."""
    original = run.update

    def reference(name: str) -> Answers | None:
        return references.get(f"{name} reloaded", references.get(name))

    def update(**kwargs: Any) -> dict[str, Any]:
        row: dict[str, Any] = original(**kwargs)
        own, other = reference(run.current), reference("B" if run.current == "A" else "A")
        if own is not None and other is not None:
            answers = probes.answers()
            row["logprobs_under_load"] = {
                "vs_own": compare(own, answers, tolerance=TOLERANCE),
                "vs_other": compare(other, answers, tolerance=TOLERANCE),
                "nearer_own": {
                    name: sum(
                        _distance(mine, got) < _distance(theirs, got)
                        for mine, theirs, got in zip(own[name], other[name], answers[name], strict=True)
                    )
                    for name in answers
                },
            }
        return row

    run.update = update

    def restore() -> None:
        run.update = original

    return restore


def _distance(reference: Any, answer: Any) -> float:
    """Mean |logprob difference| over the tokens both top-5s hold (inf when none, or an error)."""
    if not isinstance(reference, list) or not isinstance(answer, list):
        return float("inf")
    theirs = dict((token, logprob) for token, logprob in answer)
    shared = [abs(logprob - theirs[token]) for token, logprob in reference if token in theirs]
    return sum(shared) / len(shared) if shared else float("inf")


def summarise_load(updates: list[dict[str, Any]]) -> dict[str, Any]:
    """Under load: every probe nearer its own checkpoint's idle answers than the other's."""
    rows = [u["logprobs_under_load"] for u in updates if "logprobs_under_load" in u]
    prompts = len(PROMPTS)
    return {
        "probed_updates": len(rows),
        "every_probe_nearer_its_checkpoint": bool(rows)
        and all(count == prompts for row in rows for count in row["nearer_own"].values()),
        "max_abs_diff_vs_own": max(
            (v["max_abs_diff"] for row in rows for v in row["vs_own"].values()), default=None
        ),
        "min_of_max_abs_diff_vs_other": min(
            (v["max_abs_diff"] for row in rows for v in row["vs_other"].values()), default=None
        ),
        "same_within_tolerance_vs_own": [v["same"] for row in rows for v in row["vs_own"].values()],
        "tolerance": TOLERANCE,
    }
