"""What a NeMo Gym server that does not score here needs beyond this machine, for its row.

bench/nemo_gym_servers.py records what it saw (a server that did not start, a `/run` that
answered an error or nothing). Where that alone does not say what is missing, the row adds:
  * `container_images(folder)`: the container images its example rows or configs name (a row
    that runs in an image needs a container runtime and that image, pulled from outside the
    package registries), read from its files;
  * `READ_IN_CODE[server]`: what its code and configs need that no machine here has, read in
    NeMo Gym 0.7.0's tree when the harness's run stopped short of it (each note says where).
A server that scores gets neither.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

__all__ = ["READ_IN_CODE", "container_images", "outside_reach"]

READ_IN_CODE = {
    "bird_sql": "BIRD's dev databases: setup_bird_sql.py downloads dev.zip from "
    "bird-bench.oss-cn-beijing.aliyuncs.com at start",
    "evalplus": "EvalPlus's HumanEval+ / MBPP+ problems and expected outputs, which the evalplus package "
    "downloads from its GitHub releases at start",
    "google_search": "Google's Custom Search API: google_api_key and google_cx (its config class requires "
    "both, its configs set neither) and the web",
    "spider2_lite": "Spider 2.0-lite's databases: setup_spider2.py downloads them from Google Drive at start",
    "bigcodebench": "its first start builds a Python 3.10 environment with uv and pip-installs bigcodebench's "
    "requirements-eval.txt from raw.githubusercontent.com (setup_bcb_venv.py, REQUIREMENTS_EVAL_URL: "
    "70+ pinned packages, tensorflow 2.11 among them)",
    "browsecomp_advanced_harness": "Tavily's search API and its key (tavily_api_key), a file of excluded "
    "domains the user supplies (exclude_domains_file_path) and a search judge endpoint "
    "(search_judge_model_*)",
    "code_fim": "`human_eval_infilling` and its HumanEval-infilling problems: PyPI's `human-eval-infilling` "
    "(2.15.0) is an empty placeholder with no module; the package is only in its Git repository",
    "competitive_coding_challenges": "NeMo Skills' code sandbox service on 127.0.0.1:6000 "
    "(ccc_eval.py: /execute, NEMO_SKILLS_SANDBOX_HOST/PORT; it waits 240 s for it; no published image, "
    "built with Docker from the NeMo-Skills repository) and its test cases, data/test_metadata.jsonl "
    "(CCC_TEST_FILE, about 27 GB, not shipped)",
    "cvdp": "its example rows (RTL generation, categories 2, 3, 4, 7 and 16) are graded by simulating the "
    "RTL in a container image (oss_sim_image: ${cvdp_sim_image}, e.g. ghcr.io/hdl/sim/osvb) from Docker "
    "Compose manifests, through the apptainer (its default) or docker sandbox provider",
    "deepsearchqa": "the agent block its config pairs it with names no harness (`agent` and `image` are "
    "required: NeMo Gym refuses it too); its benchmark configs (benchmarks/deepsearchqa/configs/*.yaml) "
    "run a CLI harness (Claude Code, Codex, ...) inside a container image through a container sandbox "
    "provider, set up by pip-installing NeMo Gym from a GitHub archive, and search with Exa's API "
    "(exa_api_key) over the web",
    "deepswe": "its task assets (data/cache/tasks: tests and oracle patches) are made by prepare.py from the "
    "DeepSWE repository (github.com/datacurve-ai/deep-swe), and each row's agent and verifier run in the "
    "row's own image through a container sandbox provider",
    "indian_banking": "data/db.json and data/kb.json: the Hugging Face dataset NPCI/nemo-gym-indian-banking "
    "(LLM-generated; no generator in its tree)",
    "job_bench": "each row's task files, from the Hugging Face dataset JobBench/job-bench (snapshot_download at "
    "seed time), a container image (python:3.13-bookworm) through a container sandbox provider, and a judge "
    "API key (JOB_BENCH_JUDGE_API_KEY or XAI_API_KEY)",
    "litmus_agent": "its configs' sandbox providers: OpenSandbox (a remote service: an account, its API key, "
    "the network) or Apptainer (the apptainer binary and a docker:// image), refused by name before it "
    "starts (its example rows call no tool)",
    "osworld": "OSWorld's desktop_env, a virtual machine per episode, from a GitHub archive",
    "rolemrc": "NLTK's wordnet, omw-1.4, punkt and punkt_tab data at start (nltk.download, NLTK's own "
    "data server; Debian's wordnet-base has WordNet 3.0 but not NLTK's `lexnames`) and BERTScore's "
    "roberta-large weights from Hugging Face for its metrics",
    "swebench": "each row runs in the SWE-bench image the swebench package names for its instance "
    "(instance_image_key, pulled by a container sandbox provider: `sandbox_provider: sandbox` is bound by a "
    "provider config such as Docker's)",
    "tavily_search": "Tavily's search API and its key (tavily_api_key), a file of excluded domains the user "
    "supplies (exclude_domains_file_path) and a search judge endpoint (search_judge_model_*)",
    "terminal_bench_4": "OpenSandbox, its configs' provider (a remote service: $OPENSANDBOX_DOMAIN, an account "
    "and its key), each task's package from Harbor's task registry (a Supabase host, at reset) and each task's "
    "Docker Compose services' images (benchmarks/terminal_bench_4/compose-images.json)",
    "vibench": "a ViBench checkout (VIBENCH_REPO_ROOT: its PRDs and grader scripts, from its Git "
    "repository), Docker (the grader stands each app up with Postgres and Playwright in containers; "
    "the agent builds in the app-bench-base image) and the grader's own model endpoints (vibench_env_file)",
    "widesearch": "the agent block its config pairs it with names no harness (`agent` and `image` are "
    "required: NeMo Gym refuses it too); its benchmark configs (benchmarks/widesearch/configs/*.yaml) run "
    "a CLI harness (Claude Code, Codex, ...) inside a container image through a container sandbox "
    "provider, set up by pip-installing NeMo Gym from a GitHub archive, and search with Exa's API "
    "(exa_api_key) over the web",
    "workspace_bench": "each row's workspace, from the Hugging Face dataset Workspace-Bench/Workspace-Bench-Lite "
    "(snapshot_download at seed time), and a container image (node:24-bookworm-slim) through a container "
    "sandbox provider",
    "wmt_translation": "xCOMET-XXL (Unbabel/XCOMET-XXL, comet_model in its config, compute_comet: true), a "
    "10.7B-parameter model downloaded from Hugging Face, run on torch 2.12 (pip's resolution of its "
    "requirements with unbabel-comet was stopped after 6 minutes of backtracking)",
    "wordle": "data/guesses.txt: generate_data.py makes it from ENABLE's enable1.txt, downloaded from "
    "GitHub (no registry package ships that list)",
}
"""Read in NeMo Gym 0.7.0's tree where the harness's run stopped before the need showed."""

_IMAGE_KEY = re.compile(r"(^|_)image(_|$)|^docker_image$")


def _images_in(node: Any, found: list[str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str) and _IMAGE_KEY.search(str(key)) and value and "${" not in value:
                found.append(value)
            else:
                _images_in(value, found)
    elif isinstance(node, list):
        for child in node:
            _images_in(child, found)


def container_images(folder: Path, rows: int = 5) -> list[str]:
    """The container images the server's first example rows name, in order, without repeats."""
    found: list[str] = []
    example = folder / "data" / "example.jsonl"
    if example.is_file():
        for line in example.read_text().splitlines()[:rows]:
            if line.strip():
                _images_in(json.loads(line), found)
    return list(dict.fromkeys(found))


def outside_reach(name: str, folder: Path) -> str | None:
    """What the server needs beyond this machine, as the row says it (None: nothing found)."""
    images = container_images(folder)
    parts = [READ_IN_CODE[name]] if name in READ_IN_CODE else []
    if images:
        more = f" and {len(images) - 1} more" if len(images) > 1 else ""
        parts.append(f"its example rows run in container images ({images[0]}{more})")
    return "; ".join(parts) or None
