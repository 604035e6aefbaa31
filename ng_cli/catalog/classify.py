"""One NeMo Gym resources server's needs as one of four categories, from `facts.ServerFacts`.

The categories of ../shared/NEMO_GYM_ENVS.md, first match wins:

1. **outside** (why): a code sandbox (NeMo Gym's `sandbox` extra), Docker, API keys (a judge's
   excepted), a GPU model stack (torch, vLLM), packages that are not on PyPI (git URLs, wheel
   URLs, local paths), modules it imports that its requirements.txt does not name and that
   are not on PyPI, a sandbox service its code calls by host, or the network at run time
   (downloads, web APIs);
2. **second model**: its config refers to a model server or a judge endpoint (LLM judge, user
   simulator, generative reward model);
3. **PyPI packages** (which): it needs packages beyond NeMo Gym's own dependencies (named in its
   requirements.txt, or imported and published on PyPI under a known name);
4. **pure Python**: nothing beyond NeMo Gym's own dependencies (pydantic, fastapi, pyyaml,
   numpy, scipy, openai, tqdm, datasets, aiohttp, ...) and jsonschema / math-verify.

Folders without an `app.py` are **libraries** other servers import (not counted in the four).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ng_cli.catalog.facts import DOWNLOADS, ServerFacts

__all__ = ["Category", "Classification", "classify"]


class Category(Enum):
    PURE = "pure Python"
    MODEL = "second model"
    PYPI = "PyPI packages"
    OUTSIDE = "outside"
    LIBRARY = "library"


# NeMo Gym 0.7.0's own dependencies (its pyproject.toml) and theirs that servers import, plus
# jsonschema and math-verify: the "pure Python" set. Module name -> distribution name.
BASE_MODULES = {
    "openai": "openai", "anthropic": "anthropic", "tqdm": "tqdm", "pydantic": "pydantic",
    "pydantic_core": "pydantic-core", "devtools": "devtools", "packaging": "packaging",
    "fastapi": "fastapi", "starlette": "starlette", "mcp": "mcp", "anyio": "anyio",
    "itsdangerous": "itsdangerous", "uvicorn": "uvicorn", "httptools": "httptools",
    "uvloop": "uvloop", "hydra": "hydra-core", "omegaconf": "omegaconf", "rich": "rich",
    "mlflow": "mlflow", "scipy": "scipy", "numpy": "numpy", "aiohttp": "aiohttp", "ray": "ray",
    "jinja2": "jinja2", "psutil": "psutil", "datasets": "datasets", "orjson": "orjson",
    "urllib3": "urllib3", "jwt": "pyjwt", "sqlparse": "sqlparse", "pyarrow": "pyarrow",
    "wandb": "wandb", "git": "gitpython", "yaml": "pyyaml", "httpx": "httpx", "requests": "requests",
    "huggingface_hub": "huggingface-hub", "pandas": "pandas", "fsspec": "fsspec",
    "filelock": "filelock", "jsonschema": "jsonschema", "math_verify": "math-verify",
    "latex2sympy2_extended": "latex2sympy2-extended", "sympy": "sympy", "multipart": "python-multipart",
}  # fmt: skip
BASE_DISTRIBUTIONS = frozenset(BASE_MODULES.values()) | {"ray", "mlflow-skinny", "pydantic_core"}

# Imported under another name than the distribution's (only those the 145 servers use).
PYPI_MODULES = {
    "PIL": "pillow", "sklearn": "scikit-learn", "bs4": "beautifulsoup4", "fitz": "pymupdf",
    "docx": "python-docx", "pptx": "python-pptx", "dotenv": "python-dotenv", "absl": "absl-py",
    "defusedxml": "defusedxml", "regex": "regex", "tabulate": "tabulate", "pdfplumber": "pdfplumber",
    "markitdown": "markitdown", "immutabledict": "immutabledict", "langdetect": "langdetect",
    "nltk": "nltk", "rouge_score": "rouge-score", "bert_score": "bert-score", "tiktoken": "tiktoken",
    "editdistance": "editdistance", "xmltodict": "xmltodict", "toml": "toml", "tomli_w": "tomli-w",
    "matplotlib": "matplotlib", "openapi_schema_validator": "openapi-schema-validator",
    "pycld2": "pycld2", "fasttext": "fasttext", "pkg_resources": "setuptools", "gymnasium": "gymnasium",
    "gym_sokoban": "gym-sokoban", "dateparser": "dateparser", "pathspec": "pathspec",
    "openpyxl": "openpyxl", "pdfminer": "pdfminer.six", "mammoth": "mammoth", "tavily": "tavily-python",
    "trafilatura": "trafilatura", "rdkit": "rdkit", "safe": "safe-mol", "jiwer": "jiwer",
    "whisper_normalizer": "whisper-normalizer", "reasoning_gym": "reasoning-gym", "evalplus": "evalplus",
    "bigcodebench": "bigcodebench", "swebench": "swebench", "transformers": "transformers",
    "playwright": "playwright", "assaybench": "assaybench", "attrs": "attrs", "ccy": "ccy",
    "decorator": "decorator", "dill": "dill", "geopy": "geopy", "holidays": "holidays",
    "comet": "unbabel-comet", "pytest": "pytest", "aviary": "fhaviary", "ether0": "ether0",
}  # fmt: skip
# Imported, named in no requirements.txt, and not published on PyPI under that name.
NOT_ON_PYPI = {
    "desktop_env": "OSWorld's desktop_env (a VM)",
    "vlmeval": "VLMEvalKit (installed from its repository)",
    "harbor": "harbor (its agent harness)",
    "human_eval_infilling": "human-eval-infilling (installed from its repository)",
    "benchmarks": "NeMo Gym's benchmarks package (its repository)",
    "usersim": "NeMo UserSim (a git URL)",
    "nemo_skills": "NeMo-Skills tools (a git URL)",
    "verifiable_instructions": "verifiable-instructions (a git URL)",
    "hypotest": "hypotest (a git URL)",
    "finance_agent": "finance-agent-v2 (a git URL)",
    "openenv": "OpenEnv's environments (git URLs)",
    "laser_encoders": "LASER (a git URL)",
    "ersatz": "ersatz (a git URL)",
}
_SANDBOX_SERVICE = re.compile(r"SandboxClient|sandbox_url|sandbox_host|SANDBOX_HOST")
GPU_DISTRIBUTIONS = frozenset({"torch", "torchvision", "vllm", "unbabel-comet"})


@dataclass(frozen=True)
class Classification:
    category: Category
    needs: str
    """The table's "what it needs" text: the category and its particulars."""
    packages: tuple[str, ...] = ()
    """PyPI distributions beyond the pure set (for the PyPI category, and noted elsewhere)."""


def classify(facts: ServerFacts) -> Classification:
    """The category of one server (first match of the module's list)."""
    if not facts.has_app:
        return Classification(Category.LIBRARY, "library: no app.py; other servers import it")
    packages, off_pypi = _packages(facts)
    outside = _outside(facts, off_pypi)
    if outside:
        return Classification(Category.OUTSIDE, "outside: " + "; ".join(outside), tuple(packages))
    if facts.model_keys:
        keys = ", ".join(dict.fromkeys(facts.model_keys))
        extra = f"; packages: {', '.join(packages)}" if packages else ""
        return Classification(Category.MODEL, f"second model ({keys}){extra}", tuple(packages))
    if packages:
        return Classification(Category.PYPI, f"PyPI packages: {', '.join(packages)}", tuple(packages))
    return Classification(Category.PURE, "pure Python")


def _packages(facts: ServerFacts) -> tuple[list[str], list[str]]:
    """(PyPI distributions beyond the pure set, things not on PyPI) from requirements and imports."""
    packages: dict[str, None] = {}
    off_pypi: dict[str, None] = {}
    named: set[str] = set()
    for line in facts.requirements:
        target = line[3:].strip() if line.startswith("-e ") else line
        if "://" in target.split("@", 1)[0] or target.startswith((".", "/", "git+")):
            off_pypi[_short_url(target)] = None
            continue
        try:
            requirement = Requirement(target)
        except InvalidRequirement:
            off_pypi[target] = None
            continue
        name = canonicalize_name(requirement.name)
        named.add(name)
        if requirement.url is not None:
            off_pypi[f"{requirement.name} ({_short_url(requirement.url)})"] = None
        elif name not in BASE_DISTRIBUTIONS:
            packages[str(requirement)] = None
    for module in sorted(facts.imports):
        if module in BASE_MODULES:
            continue
        if module in NOT_ON_PYPI:
            if not any(canonicalize_name(module) == n or module in n for n in named):
                off_pypi[NOT_ON_PYPI[module]] = None
            continue
        distribution = canonicalize_name(PYPI_MODULES.get(module, module))
        if distribution not in named and distribution not in BASE_DISTRIBUTIONS:
            packages[f"{distribution} (imported, not in requirements.txt)"] = None
    return list(packages), list(off_pypi)


def _outside(facts: ServerFacts, off_pypi: list[str]) -> list[str]:
    reasons = []
    if facts.sandbox_extra:
        reasons.append("a code sandbox (NeMo Gym's `sandbox` extra)")
    if "docker" in facts.imports or "docker" in facts.requirements:
        reasons.append("Docker")
    gpu = sorted(
        {canonicalize_name(_name(line)) for line in facts.requirements} & GPU_DISTRIBUTIONS
        | ({"torch"} if "torch" in facts.imports else set())
    )
    if gpu:
        reasons.append(f"a GPU model stack ({', '.join(gpu)})")
    if facts.api_keys:
        reasons.append(f"API keys ({', '.join(facts.api_keys)})")
    if _SANDBOX_SERVICE.search(facts.source_text):
        reasons.append("a sandbox service (its code calls one by host/port)")
    if DOWNLOADS.search(facts.source_text):
        reasons.append("the network at run time (its code downloads data or calls web services)")
    elif facts.fetched_files:
        reasons.append(
            f"the network at run time (its code fetches {', '.join(map(_short_url, facts.fetched_files))})"
        )
    for data, maker in facts.unshipped_data.items():
        reasons.append(f"data it does not ship ({data}: its {maker} downloads it)")
    if off_pypi:
        reasons.append(f"not on PyPI: {', '.join(off_pypi)}")
    return reasons


def _name(line: str) -> str:
    try:
        return Requirement(line).name
    except InvalidRequirement:
        return line


def _short_url(url: str) -> str:
    url = url.removeprefix("git+").split("#", 1)[0]
    return url.split("@", 1)[0].removeprefix("https://").removeprefix("github.com/")
