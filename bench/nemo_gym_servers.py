"""Try every NeMo Gym resources server under our stack; write bench/results/nemo_gym_servers.json.

    python bench/nemo_gym_servers.py --root /path/to/nemo_gym-0.7.0 [--only NAME ...] [--rows 5]

For each folder of `<root>/resources_servers/` (NeMo Gym 0.7.0 unpacked: `pip download --no-deps
--ignore-requires-python nemo_gym==0.7.0` and unzip), in a child process of its own:
  1. its resources block (the first in its `configs/`, composed by our config code) is validated
     and the server built and served by our framework (`ng_cli.servers.loading`: NeMo Gym's
     imports answered by `ng_cli.nemo_gym_compat`);
  2. the agent its configs pair it with, when this project has it (`simple_agent`,
     `gymnasium_agent`, `tool_simulation_agent`, `speed_bench_agent`, with the block's
     `max_steps` / `skip_verification`), runs its own `data/example.jsonl` rows (`--rows` at
     most), the policy replaying the model turns NeMo Gym recorded in
     `data/example_rollouts.jsonl` for the same prompt (an empty answer where there is none:
     bench/_nemo_gym_replay.py), and each `/run` answer's reward is kept;
  3. a model-server reference other than the policy (a judge, a user simulator) points at a stub
     judge on loopback answering `/v1/responses` and `/v1/chat/completions` with one fixed text
     that carries the common verdict forms; `policy_base_url` is that stub too, for servers that
     call their judge by URL (verifif: `judge_base_url: ${policy_base_url}`).
     With `--judge engine` (the judge mode) it is a real model instead: `local_vllm_model` serving
     the embedded tiny model on its own CPU engine, started by `ng_run` for each server, behind a
     tap that records every judge call (bench/_judge_engine.py); a row counts as `judged` when its
     reward came after at least one judge call and every judge call of the row was answered by the
     engine. The results go to bench/results/nemo_gym_servers_judge.json.
With `--install-requirements /tmp/SCRATCH`, each server first gets its requirements.txt installed
by ng_run's own step into a virtual environment of its own, and the packages it imports without
listing them are installed when NeMo Gym's own dependencies bring them (every server's
requirements.txt installs nemo-gym[dev]); the row says which (`unlisted_nemo_gym_deps`) and which
it imports that nothing lists (`unlisted_other`): see bench/_nemo_gym_envs.py. The rows it sends
carry `_ng_task_index`/`_ng_rollout_index` as NeMo Gym's collector's do, and a cohort server
(`num_rollouts_per_prompt` > 1) gets that many concurrent rollouts of a row.
A server that drives Playwright gets the OS's Chromium where Playwright looks for its own build
(`PLAYWRIGHT_BROWSERS_PATH`, bench/_nemo_gym_browser.py: Playwright's build is a download outside
the registries); an agent that `npm install -g`s its CLI installs it into the run's own prefix, and
one that runs Claude Code against Anthropic's API (claude_code_agent) finds the replay there too
(the CLI's ANTHROPIC_BASE_URL: bench/_nemo_gym_replay.py's Messages API).
A `/run` with no answer within 120 s is counted as such, and the server's later rows are not sent;
an agent of NeMo Gym's that does not start has its last error line in the row.
A row is "scored" when `/run` answered a reward that is not masked (`mask_sample`) and not given
after our sandbox refused the server's provider. A server that does not score says in its reason,
after what the run saw, what it needs beyond this machine (bench/_nemo_gym_outside.py). The JSON is
{server: {"starts", "rows", "scored", "reward_mean", "agent", "reason", "category"}}; `category`
is this script's reading of the server's needs (pure, second_model, pypi, infra), from its
requirements.txt, imports and config, and is printed as counts at the end.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _judge_engine import JudgeCall, JudgeTap
from _nemo_gym_browser import os_chromium_for_playwright
from _nemo_gym_outside import outside_reach
from _nemo_gym_replay import ReplayPolicy, anthropic_replay_app, stub_judge_app

from ng_cli.packages.requirements import requirement_lines, requirements_file
from ng_cli.rollouts.results import ROLLOUT_KEY, TASK_KEY

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results" / "nemo_gym_servers.json"
JUDGE_RESULTS = REPO / "bench" / "results" / "nemo_gym_servers_judge.json"
PURE_PACKAGES = {"pydantic", "fastapi", "pyyaml", "numpy", "jsonschema", "math-verify", "uvicorn", "rich"}
INFRA_IMPORTS = re.compile(r"^\s*(from|import)\s+(nemo_gym\.sandbox|docker|playwright)\b", re.MULTILINE)
POLICY_MODEL_CONFIG = "responses_api_models/vllm_model/configs/vllm_model.yaml"
AGENTS = {
    "simple_agent": "responses_api_agents.simple_agent.app:SimpleAgent",
    "gymnasium_agent": "responses_api_agents.gymnasium_agent.app:GymnasiumAgent",
    "tool_simulation_agent": "responses_api_agents.tool_simulation_agent.app:ToolSimulationAgent",
    "speed_bench_agent": "responses_api_agents.speed_bench_agent.app:SpeedBenchAgent",
}
"""NeMo Gym's agents this project has (same names, their config blocks): the rows go through them."""
MESSAGE_ENDS_TURN = frozenset({"speed_bench_agent"})
"""Agents whose recorded output is one model call per user turn, each ending with its message,
with nothing of the agent's between them (the replay cuts turns there)."""
AGENT_KEYS = ("max_steps", "skip_verification", "skip_verification_reward")
"""The keys of a server's agent block (as its configs write it) that the harness's agent gets."""


def requirements(folder: Path) -> list[str]:
    """Its requirements.txt's (or pyproject.toml's) lines, NeMo Gym's own left out."""
    path = requirements_file(folder)
    return [line for _, line in requirement_lines(path)] if path else []


def config_files(folder: Path) -> list[Path]:
    return sorted((folder / "configs").glob("*.yaml")) if (folder / "configs").is_dir() else []


def _resources_block(path: Path, name: str) -> tuple[str, dict[str, Any]] | None:
    import yaml

    try:
        tree = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError:
        return None
    for instance, node in tree.items():
        if isinstance(node, dict) and isinstance(node.get("resources_servers"), dict):
            implementations = node["resources_servers"]
            if name in implementations and isinstance(implementations[name], dict):
                return str(instance), implementations[name]
    return None


def _agent_of(folder: Path, instance: str) -> tuple[str, str, dict[str, Any]]:
    """The agent that drives `instance` in its configs (implementation, instance name, its block as
    written): the first of ours (AGENTS) when one is listed, else the first listed (simple_agent
    when none is)."""
    import yaml

    listed: list[tuple[str, str, dict[str, Any]]] = []
    for path in config_files(folder):
        try:
            tree = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError:
            continue
        for agent_instance, node in tree.items():
            agents = node.get("responses_api_agents") if isinstance(node, dict) else None
            for implementation, block in (agents or {}).items():
                ref = block.get("resources_server") if isinstance(block, dict) else None
                if isinstance(ref, dict) and ref.get("name") == instance:
                    listed.append((str(implementation), str(agent_instance), block))
    ours = [found for found in listed if found[0] in AGENTS]
    return (ours or listed or [("simple_agent", "simple_agent", {})])[0]


def _model_refs(node: Any, path: str = "") -> list[tuple[str, str]]:
    """(key, instance) of every `{type: responses_api_models, name}` inside a block."""
    found: list[tuple[str, str]] = []
    if isinstance(node, dict):
        if node.get("type") == "responses_api_models" and isinstance(node.get("name"), str):
            return [(path, node["name"])]
        for key, child in node.items():
            found += _model_refs(child, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for index, child in enumerate(node):
            found += _model_refs(child, f"{path}[{index}]")
    return found


def classify(folder: Path) -> dict[str, Any]:
    """What the server needs, read from its files (no import)."""
    app = folder / "app.py"
    source = "".join(p.read_text(errors="replace") for p in folder.glob("*.py"))
    found = next((b for p in config_files(folder) if (b := _resources_block(p, folder.name))), None)
    instance, block = found if found else (folder.name, {})
    extra = [r for r in requirements(folder) if re.split(r"[<>=\[ ;@]", r)[0].lower() not in PURE_PACKAGES]
    if not app.exists() or not found:
        category = "library"
    elif INFRA_IMPORTS.search(source) or any("git+" in r or "://" in r or r.startswith("-e") for r in extra):
        category = "infra"
    elif _model_refs(block):
        category = "second_model"
    elif extra:
        category = "pypi"
    else:
        category = "pure"
    agent, agent_instance, agent_block = _agent_of(folder, instance)
    return {
        "category": category,
        "instance": instance,
        "agent": agent,
        "agent_instance": agent_instance,
        "agent_block": agent_block,
        "agent_keys": {k: v for k, v in agent_block.items() if k in AGENT_KEYS},
        "extra_packages": extra,
        "model_refs": _model_refs(block),
    }


# ---------------------------------------------------------------- the child: one server's run


def run_one(root: Path, name: str, max_rows: int, judge_target: str | None = None) -> dict[str, Any]:
    """One server's run, then its modules and path entries forgotten: ng_run gives each server a
    process of its own, so a helper module named like another server's (`util`) must not leak."""
    path_before = list(sys.path)
    try:
        return _run_one(root, name, max_rows, judge_target)
    finally:
        folder = str(root / "resources_servers" / name)
        for module_name, module in list(sys.modules.items()):
            if (getattr(module, "__file__", None) or "").startswith(folder + os.sep):
                del sys.modules[module_name]
        sys.path[:] = path_before


def _run_one(root: Path, name: str, max_rows: int, judge_target: str | None) -> dict[str, Any]:
    """Start one server under our framework and run its example rows (in this process), with the
    stub judge on loopback as every second model it names, and as `policy_base_url` (the judge
    endpoint of servers that call one by URL: verifif's `judge_base_url: ${policy_base_url}`);
    with `judge_target` (a model server's URL: the judge mode), a tap forwarding to it instead."""
    from ng_cli.servers.testing import serve_in_thread

    if judge_target is None:
        with serve_in_thread(stub_judge_app()) as judge_url:
            return _run_with_judge(root, name, max_rows, judge_url)
    tap = JudgeTap(judge_target)
    with serve_in_thread(tap.build_app()) as judge_url:
        return _run_with_judge(root, name, max_rows, judge_url, tap)


def _judge_problem(calls: list[JudgeCall]) -> str | None:
    """Why a row's reward did not come from the judge's answers (None when it did)."""
    if not calls:
        return "reward given without a judge call"
    failed = [call for call in calls if not call.answered]
    if failed:
        return f"judge call answered {failed[0].status}: {failed[0].text[:160]}"
    return None


def _run_with_judge(
    root: Path, name: str, max_rows: int, judge_url: str, tap: JudgeTap | None = None
) -> dict[str, Any]:
    import httpx2 as httpx  # the HTTP client the project's dev environment has

    from ng_cli.config.compose import compose_config
    from ng_cli.servers.loading import load_server_class
    from ng_cli.servers.spec import ServerAddress
    from ng_cli.servers.testing import assistant_message, serve_agent, serve_in_thread

    folder = root / "resources_servers" / name
    info = classify(folder)
    result: dict[str, Any] = {
        "starts": False,
        "rows": 0,
        "scored": 0,
        "reward_mean": None,
        "agent": info["agent"],
        "reason": None,
        "category": info["category"],
    }
    if tap is not None:
        result.update({"judged": 0, "judged_reward_mean": None, "judge_calls": 0, "judge_sample": None})
    instance = info["instance"]
    # Ours, imported before the server's app puts NeMo Gym's root (its own responses_api_agents/)
    # first on sys.path.
    module_name, _, class_name = AGENTS.get(info["agent"], "").partition(":")
    agent_class = getattr(importlib.import_module(module_name), class_name) if module_name else None
    # Else NeMo Gym's own agent, when its tree has it: served unchanged on our stand-ins, in a
    # process of its own started from their root, as ng_run starts it.
    their_agent = root / "responses_api_agents" / info["agent"] / "app.py"
    agent_block = dict(info["agent_block"])
    config_path = next(p for p in config_files(folder) if _resources_block(p, name))
    os.chdir(root)
    try:
        # With NeMo Gym's policy model config, as `ng_run "+config_paths=[server, model]"` is run
        # from their root: the agent's policy_model reference resolves, and so the whole file.
        paths = [str(config_path.relative_to(root))]
        if (root / POLICY_MODEL_CONFIG).exists():
            paths.append(POLICY_MODEL_CONFIG)
        composed = compose_config(
            [f"+config_paths=[{','.join(paths)}]", f"policy_base_url={judge_url}/v1"], cwd=root
        )
        block = dict(composed.instances[instance].block)
        if info["agent_instance"] in composed.instances:
            agent_block = dict(composed.instances[info["agent_instance"]].block)
    except Exception as error:  # a config ours cannot compose: NeMo Gym's own block, as written
        _, block = _resources_block(config_path, name) or (instance, {})
        result["config_note"] = f"composed raw: {str(error).splitlines()[0][:200]}"
    try:
        server_class = load_server_class(folder / "app.py")
        config = server_class.validate_config(block, instance=instance)
    except BaseException as error:
        lines = " | ".join(line.strip() for line in str(error).splitlines() if line.strip())
        result["reason"] = f"does not start: {type(error).__name__}: {lines[:400]}"
        return result
    secret = "bench-secret"
    servers = {
        ref_name: ServerAddress(
            server_type="responses_api_models", implementation="stub_judge", url=judge_url
        )
        for _, ref_name in info["model_refs"]
    }
    if getattr(server_class, "run_in_own_folder", False):
        os.chdir(folder)  # as ng_run's server process does (and NeMo Gym's launcher)
    try:
        server = server_class(config, name=instance, servers=servers, session_secret=secret)
        app = server.build_app()
    except BaseException as error:
        result["reason"] = f"does not start: {type(error).__name__}: {str(error)[:300]}"
        return result
    try:
        serving = serve_in_thread(app, startup_timeout_s=60)
        resources_url = serving.__enter__()
    except BaseException as error:
        result["reason"] = f"does not start: {type(error).__name__}: {str(error)[:300]}"
        return result
    try:
        health = httpx.get(f"{resources_url}/health", timeout=30)
        if health.status_code != 200:  # ng_run waits for it: without it the server never is ready
            result["reason"] = f"does not start: GET /health answered {health.status_code}, not 200"
            return result
        result["starts"] = True  # the app started, accepts connections and answers ng_run's probe
        if agent_class is None and not their_agent.is_file():
            result["reason"] = f"pairs with {info['agent']}, not run by this harness"
            return result
        if agent_class is not None:
            fields = agent_class.config_class.model_fields
            agent_keys = {k: v for k, v in info["agent_keys"].items() if k in fields}
        example = folder / "data" / "example.jsonl"
        if not example.exists():
            result["reason"] = "no data/example.jsonl"
            return result
        rows = [json.loads(line) for line in example.read_text().splitlines() if line.strip()][:max_rows]
        policy = ReplayPolicy(
            folder,
            rows,
            lambda: [assistant_message("")],
            message_ends_turn=info["agent"] in MESSAGE_ENDS_TURN,
        )

        # A cohort server (genrm_compare) scores a prompt's rollouts together: each row is sent
        # as that many concurrent rollouts, as NeMo Gym's num_repeats would.
        cohort = int(getattr(config, "num_rollouts_per_prompt", 1) or 1)
        if cohort > 1:
            rows = rows[: max(1, max_rows // cohort)]
        runs = [
            {**row, TASK_KEY: task, ROLLOUT_KEY: repeat}
            for task, row in enumerate(rows)
            for repeat in range(cohort)
        ]
        agent_stack = (
            serve_agent(
                agent_class,
                policy,
                resources_url=resources_url,
                resources_server_type="resources_servers",
                resources_name=instance,
                session_secret=secret,
                agent_config=agent_keys,
            )
            if agent_class is not None
            else _serve_their_agent(
                root,
                their_agent,
                info["agent_instance"],
                agent_block,
                policy,
                resources=(instance, resources_url),
                judge_url=judge_url,
                session_secret=secret,
            )
        )
        with ExitStack() as exits:
            try:
                stack: Any = exits.enter_context(agent_stack)
            except AgentDidNotStart as error:
                result["reason"] = str(error)
                return result
            pool = exits.enter_context(ThreadPoolExecutor(max_workers=cohort))
            rewards: list[float] = []
            judged: list[float] = []
            problems = Counter[str]()

            wait_s = 300 if tap else 120

            def post(run: dict[str, Any]) -> Any:
                try:
                    return httpx.post(f"{stack.agent_url}/run", json=run, timeout=wait_s)
                except httpx.TimeoutException:
                    return None  # the agent is still at it: counted, and no more rows are sent

            # A prompt's rollouts at a time: the judge calls between two marks are that group's.
            groups = [runs[start : start + cohort] for start in range(0, len(runs), cohort)]
            for group in groups:
                mark = tap.mark() if tap else 0
                answers = list(pool.map(post, group))
                calls = tap.since(mark) if tap else []
                if tap is not None:
                    result["judge_calls"] += len(calls)
                    result["judge_capped"] = result.get("judge_capped", 0) + sum(c.capped for c in calls)
                    ok = [call.text for call in calls if call.answered]
                    result["judge_sample"] = result["judge_sample"] or (ok[0][:160] if ok else None)
                for answer in answers:
                    if answer is None:
                        result["rows"] += 1
                        problems[f"no answer from /run within {wait_s} s (the rows after it not sent)"] += 1
                    else:
                        _count(answer, result, rewards, problems, tap, calls, judged)
                if None in answers:
                    break
            if rewards:
                result["reward_mean"] = sum(rewards) / len(rewards)
            if judged:
                result["judged_reward_mean"] = sum(judged) / len(judged)
            if problems:
                result["reason"] = "; ".join(f"{n}x {p}" for p, n in problems.most_common(2))
    finally:
        serving.__exit__(None, None, None)
    return result


REFUSED_SANDBOX = re.compile(r"NeMo Gym's sandbox provider '[^']+' is not available here: it needs [^;\"]+")
"""Our `nemo_gym.sandbox` stand-in's refusal (`unavailable_provider`), as a server may pass it on."""


def _count(
    answer: Any,
    result: dict[str, Any],
    rewards: list[float],
    problems: Counter[str],
    tap: JudgeTap | None,
    calls: list[JudgeCall],
    judged: list[float],
) -> None:
    """One `/run` answer into the result: scored (an unmasked reward), and in the judge mode
    judged (that reward came after judge calls the engine answered), or why not."""
    result["rows"] += 1
    body = answer.json() if answer.headers.get("content-type", "").startswith("application/json") else {}
    refused = REFUSED_SANDBOX.search(answer.text) if answer.status_code == 200 else None
    if refused is not None:  # the server scored our sandbox's refusal (cvdp: 0.0), not the answer
        problems[f"reward {body.get('reward')} given after the sandbox was refused: {refused.group(0)}"] += 1
        return
    if (
        answer.status_code == 200
        and isinstance(body.get("reward"), int | float)
        and not body.get("mask_sample")
    ):
        result["scored"] += 1
        rewards.append(float(body["reward"]))
        if tap is not None:
            problem = _judge_problem(calls)
            if problem is None:
                result["judged"] += 1
                judged.append(float(body["reward"]))
            else:
                problems[f"scored, not judged: {problem}"] += 1
        return
    message = body["error"].get("message") if isinstance(body.get("error"), dict) else None
    problems[f"{answer.status_code}: {(message or body.get('failure_reason') or answer.text)[:200]}"] += 1


_ERROR_LINE = re.compile(r"^(error: |[A-Za-z_.]*(Error|Exception|Exit)\b)")


def last_error(stderr: str) -> str | None:
    """The last error a process printed (ng_cli's `error: ...` with its indented lines, or a
    traceback's exception line), on one line: why NeMo Gym's agent did not start."""
    lines = stderr.splitlines()
    starts = [index for index, line in enumerate(lines) if _ERROR_LINE.match(line)]
    if not starts:
        return None
    said = [lines[starts[-1]].strip()]
    said += [
        line.strip() for line in lines[starts[-1] + 1 :] if line.startswith((" ", "\t")) and line.strip()
    ]
    return " | ".join(said)[:400]


class AgentDidNotStart(Exception):
    """NeMo Gym's agent's process ended before it answered /health (the server itself started)."""


@dataclass(frozen=True)
class _TheirAgent:
    agent_url: str


@contextmanager
def _serve_their_agent(
    root: Path,
    app_path: Path,
    name: str,
    block: dict[str, Any],
    policy: Any,
    *,
    resources: tuple[str, str],
    judge_url: str,
    session_secret: str,
) -> Iterator[_TheirAgent]:
    """NeMo Gym's own agent (`app_path`), its block as its configs compose it, served by
    ng_run's server process (`ng_cli.servers.child`) started from NeMo Gym's root, so their
    `responses_api_agents` package is the one it imports; the replay policy is its
    `model_server`, the stub judge every other model it names (a user simulator)."""
    from ng_cli.servers.spec import ServerAddress
    from ng_cli.servers.testing import ScriptedModel, serve_in_child, serve_in_thread

    model = ScriptedModel(policy)
    resources_name, resources_url = resources
    with (
        serve_in_thread(model.build_app()) as model_url,
        serve_in_thread(anthropic_replay_app(policy.turns)) as anthropic_url,
        tempfile.TemporaryDirectory() as spec_dir,
    ):
        servers = {
            resources_name: ServerAddress(
                server_type="resources_servers", implementation=resources_name, url=resources_url
            )
        }
        for key, ref in _model_refs(block):
            url = model_url if key == "model_server" else judge_url
            servers[ref] = ServerAddress(server_type="responses_api_models", implementation="stub", url=url)
        here = Path.cwd()
        os.chdir(root)  # the child's sys.path[0]: their responses_api_agents before ours
        log = Path(spec_dir) / f"{name}.stderr"
        saved = os.dup(2)  # the agent's process inherits fd 2: its own error is kept for the row
        # An agent that runs Claude Code against Anthropic's API (claude_code_agent with no
        # model_server) reaches the replay there: the CLI's own ANTHROPIC_BASE_URL, inherited.
        anthropic_before = os.environ.get("ANTHROPIC_BASE_URL")
        os.environ["ANTHROPIC_BASE_URL"] = anthropic_url
        with log.open("wb") as sink:
            os.dup2(sink.fileno(), 2)
        try:
            serving = serve_in_child(
                app_path, block, name=name, spec_dir=Path(spec_dir), session_secret=session_secret,
                servers=servers, ready_timeout_s=120,
            )  # fmt: skip
            child = serving.__enter__()
        except RuntimeError as error:
            said = last_error(log.read_text(errors="replace"))
            raise AgentDidNotStart(
                f"its agent {app_path.parent.name} (NeMo Gym's) does not start: {error}"
                + (f": {said}" if said else "")
            ) from None
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            if anthropic_before is None:
                os.environ.pop("ANTHROPIC_BASE_URL", None)
            else:
                os.environ["ANTHROPIC_BASE_URL"] = anthropic_before
            os.chdir(here)
        try:
            yield _TheirAgent(child.url)
        finally:
            serving.__exit__(None, None, None)


# ---------------------------------------------------------------- the parent: every server


def _run_all(root: Path, names: list[str], args: argparse.Namespace) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every server's result; with --install-requirements, each runs in its scratch environment
    (servers whose requirements.txt the shared layer meets share one child). In the judge mode
    each server gets a child and a judge engine of its own."""
    if args.judge == "engine":
        yield from _judged(root, names, args)
        return
    if args.install_requirements is None:
        yield from _children(root, names, args.rows, args.timeout_s)
        return
    from _nemo_gym_envs import Scratch

    from ng_cli.errors import NgError

    scratch = Scratch(args.install_requirements.resolve(), root)
    shared: list[str] = []
    notes: dict[str, dict[str, Any]] = {}
    for name in names:
        agent = classify(root / "resources_servers" / name)["agent"]
        theirs = agent not in AGENTS and (root / "responses_api_agents" / agent / "app.py").is_file()
        try:
            python, notes[name] = scratch.prepare(name, agent=agent if theirs else None)
        except NgError as error:
            reason = _not_installed(error)
            yield name, {**_failed(root, name, reason), "requirements": "failed"}
            continue
        if python == scratch.base:
            shared.append(name)
            continue
        for server, result in _children(root, [name], args.rows, args.timeout_s, str(python)):
            yield server, _annotated({**result, **notes[server]})
    for server, result in _children(root, shared, args.rows, args.timeout_s, str(scratch.base)):
        yield server, _annotated({**result, **notes[server]})


def _not_installed(error: Exception) -> str:
    """pip's failure, as the row says it: the step's first line and pip's first error line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    said = next((line for line in lines[1:] if re.search(r"\b(fatal|ERROR|error):", line)), None)
    return f"requirements.txt not installed: {' | '.join(lines[:1] + ([said] if said else lines[1:2]))[:400]}"


def _judged(root: Path, names: list[str], args: argparse.Namespace) -> Iterator[tuple[str, dict[str, Any]]]:
    """The judge mode: for each server, `ng_run` starts the tiny model's CPU engine and its
    `local_vllm_model` server (bench/_judge_engine.py), and the server runs in a child of its
    own (its scratch environment's interpreter with --install-requirements) against it."""
    from _judge_engine import judge_stack

    scratch = None
    if args.install_requirements is not None:
        from _nemo_gym_envs import Scratch

        scratch = Scratch(args.install_requirements.resolve(), root)
    for name in names:
        python, notes = sys.executable, dict[str, Any]()
        if scratch is not None:
            from ng_cli.errors import NgError

            agent = classify(root / "resources_servers" / name)["agent"]
            theirs = agent not in AGENTS and (root / "responses_api_agents" / agent / "app.py").is_file()
            try:
                found, notes = scratch.prepare(name, agent=agent if theirs else None)
            except NgError as error:
                reason = _not_installed(error)
                yield name, {**_failed(root, name, reason), "requirements": "failed"}
                continue
            python = str(found)
        with tempfile.TemporaryDirectory(prefix="ng_judge_") as work:
            try:
                with judge_stack(Path(work)) as judge_url:
                    for server, result in _children(
                        root, [name], args.rows, args.timeout_s, python, judge_target=judge_url
                    ):
                        yield server, _annotated({**result, **notes})
            except SystemExit as error:  # ng_run's judge engine did not become ready
                yield name, _failed(root, name, f"judge engine did not start: {str(error)[-300:]}")


OUTSIDE_REACH = "; outside reach: "


def _with_outside_reach(root: Path, name: str, found: dict[str, Any]) -> str | None:
    """The row's reason: what the run saw, then (for a server that did not score) what it needs
    beyond this machine (bench/_nemo_gym_outside.py); derived again on every run, seeded rows too."""
    seen = (found.get("reason") or "").split(OUTSIDE_REACH)[0]
    folder = root / "resources_servers" / name
    note = None
    if found["scored"] == 0 and found["category"] != "library" and folder.is_dir():
        note = outside_reach(name, folder)
    if note is None:
        return seen or None
    return f"{seen[:300]}{OUTSIDE_REACH}{note}" if seen else f"outside reach: {note}"


def _annotated(result: dict[str, Any]) -> dict[str, Any]:
    """A start that failed on a module the server imports without listing it says so."""
    reason = result.get("reason") or ""
    missing = re.search(r"No module named '([^'.]+)", reason)
    if missing and missing.group(1) in result.get("unlisted_other", []):
        result["reason"] = (
            f"{reason} (imported, listed neither in its requirements.txt nor among NeMo Gym's dependencies)"
        )
    return result


def _failed(root: Path, name: str, reason: str) -> dict[str, Any]:
    info = classify(root / "resources_servers" / name)
    return {"starts": False, "rows": 0, "scored": 0, "reward_mean": None, "agent": info["agent"],
            "reason": reason, "category": info["category"]}  # fmt: skip


def _children(
    root: Path,
    names: list[str],
    rows: int,
    timeout_s: float,
    python: str = sys.executable,
    *,
    judge_target: str | None = None,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Run the servers in child processes of `python`, many per child (imports are paid once); a
    child that hangs on one server (`timeout_s` without a result) or dies is replaced for the rest.
    With `judge_target` (a model server's URL) their second models are it, not the stub."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    with tempfile.TemporaryDirectory() as tmp:
        env_yaml = Path(tmp) / "env.yaml"
        env_yaml.write_text(
            "policy_base_url: http://127.0.0.1:9/v1\npolicy_api_key: stub\npolicy_model_name: stub\n"
            "anthropic_api_key: stub\n"  # claude_code_agent's ${anthropic_api_key}: the replay takes any
        )
        env["NG_ENV_YAML"] = str(env_yaml)
        # An agent that installs its CLI with `npm install -g` (claude_code_agent's Claude Code)
        # installs it into the run's own prefix, never the machine's.
        env.setdefault("NPM_CONFIG_PREFIX", str(Path(tmp) / "npm_global"))
        left = list(names)
        while left:
            command = [python, __file__, "--root", str(root), "--rows", str(rows), "--one", *left]
            if judge_target is not None:
                command[2:2] = ["--judge-url", judge_target]
            child = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, start_new_session=True)  # fmt: skip
            lines: queue.Queue[str | None] = queue.Queue()
            threading.Thread(target=_pump, args=(child, lines), daemon=True).start()
            while left:
                try:
                    line = lines.get(timeout=timeout_s)
                except queue.Empty:
                    yield left[0], _failed(root, left[0], f"timed out after {timeout_s:.0f} s")
                    left.pop(0)
                    break
                if line is None:
                    yield left[0], _failed(root, left[0], f"harness child died (exit {child.wait()})")
                    left.pop(0)
                    break
                if line.startswith("RESULT "):
                    name, _, found = line[len("RESULT ") :].partition(" ")
                    left.remove(name)
                    yield name, json.loads(found)
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()


def _pump(child: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
    assert child.stdout is not None
    for line in child.stdout:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def _write(output: Path, results: dict[str, Any]) -> dict[str, Any]:
    ordered = {name: results[name] for name in sorted(results)}
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(ordered, indent=1, sort_keys=True) + "\n")
    tmp.replace(output)
    return ordered


def _drives_playwright(folder: Path) -> bool:
    return any("playwright" in path.read_text(errors="replace") for path in folder.rglob("*.py"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root", type=Path, required=True, help="NeMo Gym 0.7.0's root (its resources_servers/)"
    )
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--rows", type=int, default=5)
    parser.add_argument("--timeout-s", type=float, default=180.0)
    parser.add_argument(
        "--categories", nargs="*", default=None, help="default: all; second_model with --judge engine"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help=f"default: {RESULTS.name}; {JUDGE_RESULTS.name} with --judge engine",
    )
    parser.add_argument(
        "--judge", choices=["stub", "engine"], default="stub",
        help="the second models: the stub judge's fixed text, or (engine) the tiny model on a CPU "
        "engine that ng_run starts for each server (bench/_judge_engine.py)",
    )  # fmt: skip
    parser.add_argument("--judge-url", help=argparse.SUPPRESS)
    parser.add_argument(
        "--seed",
        type=Path,
        help="an earlier results file: every server in it is kept (with --only too), none run again",
    )
    parser.add_argument(
        "--install-requirements", type=Path, metavar="SCRATCH",
        help="install each server's requirements.txt (ng_run's own step) into a virtual environment "
        "of its own under SCRATCH, and the packages NeMo Gym itself brings that servers import "
        "unlisted into one shared layer (bench/_nemo_gym_envs.py); without it, servers run in this "
        "interpreter as it is",
    )  # fmt: skip
    parser.add_argument("--one", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    judge_mode = args.judge == "engine"
    if args.categories is None:
        args.categories = ["second_model"] if judge_mode else ["pure", "second_model", "pypi", "infra"]
    if args.output is None:
        args.output = JUDGE_RESULTS if judge_mode else RESULTS
    root = args.root.resolve()
    if args.one:
        with tempfile.TemporaryDirectory(prefix="ng_browsers_") as browsers:
            # Playwright's own Chromium is a download outside the registries: the OS's stands in
            browser = os_chromium_for_playwright(Path(browsers))
            for name in args.one:
                try:
                    found = run_one(root, name, args.rows, args.judge_url)
                except BaseException as error:
                    found = _failed(root, name, f"harness: {type(error).__name__}: {str(error)[:300]}")
                if browser is not None and _drives_playwright(root / "resources_servers" / name):
                    found["browser"] = f"the OS's {browser} as Playwright's Chromium"
                print(f"RESULT {name} " + json.dumps(found), flush=True)
        return
    folders = sorted(
        p for p in (root / "resources_servers").iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
    )
    names = [f.name for f in folders if (args.only is None or f.name in args.only)]
    results: dict[str, Any] = {}
    tried = [n for n in names if classify(root / "resources_servers" / n)["category"] in args.categories]
    for name in names:
        if name not in tried and not judge_mode:  # the judge file holds the servers it ran
            info = classify(root / "resources_servers" / name)
            reason = f"not tried: needs {', '.join(info['extra_packages'][:4]) or 'infrastructure (sandbox, docker, browser)'}"
            results[name] = {
                "starts": False,
                "rows": 0,
                "scored": 0,
                "reward_mean": None,
                "agent": info["agent"],
                "reason": reason
                if info["category"] != "library"
                else "a library other servers import, not a server",
                "category": info["category"],
            }
    if args.only is not None and args.output.exists() and args.seed is None:
        raise SystemExit(
            f"{args.output} exists and --only runs a part of it: pass --seed {args.output} to add to it "
            "(its other servers are kept), or another --output"
        )
    if args.seed and args.seed.exists():
        earlier = json.loads(args.seed.read_text())
        for name, found in earlier.items():  # every earlier server is kept, --only or not
            folder = root / "resources_servers" / name
            # the category is re-read: the files decide it, not the earlier run
            results[name] = {
                **found,
                "category": classify(folder)["category"] if folder.is_dir() else found["category"],
            }
        tried = [name for name in tried if name not in earlier]
    started = time.monotonic()

    for name, found in _run_all(root, tried, args):
        results[name] = found
        _write(args.output, results)  # after each server: a stopped run keeps what it measured
        print(
            f"{name:45s} {found['category']:13s} starts={found['starts']!s:5s} rows={found['rows']} "
            f"scored={found['scored']} judged={found.get('judged', '-')} mean={found['reward_mean']} "
            f"{found['reason'] or ''}"[:260],
            flush=True,
        )
    if not judge_mode:
        for name, found in results.items():
            found["reason"] = _with_outside_reach(root, name, found)
    ordered = _write(args.output, results)
    table = Counter[tuple[str, str]]()
    for found in ordered.values():
        table[(found["category"], "servers")] += 1
        table[(found["category"], "starts")] += int(found["starts"])
        table[(found["category"], "scores")] += int(found["scored"] > 0)
    print(
        f"\n{'category':14s} {'servers':>8s} {'start':>6s} {'score':>6s}   ({time.monotonic() - started:.0f} s)"
    )
    for category in ("pure", "second_model", "pypi", "infra", "library"):
        print(
            f"{category:14s} {table[(category, 'servers')]:8d} {table[(category, 'starts')]:6d} {table[(category, 'scores')]:6d}"
        )
    if judge_mode:
        judged = sum(int(found.get("judged", 0) > 0) for found in ordered.values())
        print(
            f"judge mode: {judged} of {len(ordered)} servers judged (a row's reward after engine-answered judge calls)"
        )
    print(f"written: {args.output}")


if __name__ == "__main__":
    main()
