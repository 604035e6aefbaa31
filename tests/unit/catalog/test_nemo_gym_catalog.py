"""The compat table's classifier and renderer on small server folders written here.

Each folder has the shape of one of NeMo Gym 0.7.0's resources servers (named in its test), cut
down to the lines the rule reads, so CI needs no NeMo Gym tree. The script's own run over the
145 real folders is how docs/compat.md's table is made (`scripts/nemo_gym_compat_table.py`).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ng_cli.catalog.classify import Category, classify
from ng_cli.catalog.facts import read_server
from ng_cli.catalog.table import BEGIN, END, build_rows, load_results, render, replace_table
from ng_cli.errors import ConfigError, DataError
from scripts.nemo_gym_compat_table import main

NEMO_GYM = "-e nemo-gym[dev] @ ../../\n"
APP_HEAD = (
    "from pydantic import BaseModel\nfrom nemo_gym.base_resources_server import SimpleResourcesServer\n"
)


def _server(root: Path, name: str, *, app: str | None = APP_HEAD, requirements: str = NEMO_GYM,
            config: str = "", files: dict[str, str] | None = None) -> Path:  # fmt: skip
    folder = root / "resources_servers" / name
    (folder / "configs").mkdir(parents=True)
    if app is not None:
        (folder / "app.py").write_text(app)
    (folder / "requirements.txt").write_text(requirements)
    agent = f"""
    {name}_agent:
      responses_api_agents:
        simple_agent:
          resources_server: {{type: resources_servers, name: {name}}}
          model_server: {{type: responses_api_models, name: policy_model}}
    """
    block = textwrap.indent(textwrap.dedent(config), "      ")
    text = f"{name}:\n  resources_servers:\n    {name}:\n      entrypoint: app.py\n{block}" + textwrap.dedent(
        agent
    )
    (folder / "configs" / f"{name}.yaml").write_text(text)
    for relative, body in (files or {}).items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(body)
    return folder


def test_pure_python_follows_its_own_helper_modules(tmp_path: Path) -> None:
    # example_multi_step: app.py and a helper module, NeMo Gym's dependencies only
    folder = _server(
        tmp_path, "pure_env", app=APP_HEAD + "from resources_servers.pure_env.helpers import score\n",
        files={"helpers.py": "import numpy\nfrom . import more\n", "more.py": "import yaml\n",
               "prepare_data.py": "import PIL\n"},  # not reached from app.py: not counted
    )  # fmt: skip
    facts = read_server(folder)
    assert facts.imports == {"pydantic", "numpy", "yaml"}
    assert facts.agents == ["simple_agent"]
    assert classify(facts).category is Category.PURE


def test_a_judge_reference_is_a_second_model(tmp_path: Path) -> None:
    # math_with_judge / agentif: a model-server reference, or a judge endpoint with its key
    by_ref = _server(
        tmp_path, "judged", config="judge_model_server: {type: responses_api_models, name: judge}\n"
    )
    by_url = _server(tmp_path, "judged_url", config="judge_base_url: http://x/v1\njudge_api_key: k\n")
    assert classify(read_server(by_ref)).needs == "second model (judge_model_server)"
    assert classify(read_server(by_url)).category is Category.MODEL


def test_packages_from_requirements_and_from_imports(tmp_path: Path) -> None:
    # grl_tetris (listed), iheval (imports regex without listing it)
    listed = _server(
        tmp_path,
        "listed",
        app=APP_HEAD + "import gymnasium\n",
        requirements=NEMO_GYM + "gymnasium==1.1.1  # MIT\n",
    )
    unlisted = _server(tmp_path, "unlisted", app=APP_HEAD + "import regex\nfrom PIL import Image\n")
    assert classify(read_server(listed)).needs == "PyPI packages: gymnasium==1.1.1"
    assert classify(read_server(unlisted)).packages == (
        "pillow (imported, not in requirements.txt)",
        "regex (imported, not in requirements.txt)",
    )


@pytest.mark.parametrize(
    ("requirements", "config", "app", "reason"),
    [
        ("-e nemo-gym[dev,sandbox] @ ../..\n", "", APP_HEAD, "a code sandbox"),  # swe_rebench
        (
            NEMO_GYM + "git+https://github.com/o/tale-suite.git@x#egg=tale-suite\n",
            "",
            APP_HEAD,
            "not on PyPI: o/tale-suite.git",
        ),  # tales
        (
            NEMO_GYM,
            "tavily_api_key: ${tavily_api_key}\n",
            APP_HEAD,
            "API keys (tavily_api_key)",
        ),  # tavily_search
        (NEMO_GYM + "torch==2.12.0\n", "", APP_HEAD, "a GPU model stack (torch)"),  # wmt_translation
        (
            NEMO_GYM,
            "",
            APP_HEAD + "import requests\nrequests.get('https://example.org')\n",
            "the network at run time",
        ),  # google_search
        (NEMO_GYM, "", APP_HEAD + "from desktop_env import DesktopEnv\n", "OSWorld's desktop_env"),  # osworld
    ],
    ids=["sandbox-extra", "git-url", "api-key", "gpu", "network", "not-on-pypi-import"],
)
def test_outside_needs_are_named(
    tmp_path: Path, requirements: str, config: str, app: str, reason: str
) -> None:
    judged = config + "judge_model_server: {type: responses_api_models, name: judge}\n"  # outside wins
    classification = classify(
        read_server(_server(tmp_path, "env", app=app, requirements=requirements, config=judged))
    )
    assert classification.category is Category.OUTSIDE
    assert reason in classification.needs


def test_files_fetched_at_start_and_data_a_script_downloads_are_outside_needs(tmp_path: Path) -> None:
    # bigcodebench: a helper module pip-installs a requirements file by URL
    fetched = _server(
        tmp_path, "fetches", app=APP_HEAD + "from setup_venv import build\n",
        files={"setup_venv.py": 'URL = "https://raw.example.org/o/r/main/requirements-eval.txt"\n'},
    )  # fmt: skip
    assert (
        "its code fetches raw.example.org/o/r/main/requirements-eval.txt"
        in classify(read_server(fetched)).needs
    )
    # wordle: app.py reads data/guesses.txt, which only its generate_data.py makes (by downloading)
    unshipped = _server(
        tmp_path, "unshipped", app=APP_HEAD + 'PATH = Path(__file__).parent / "data" / "guesses.txt"\n',
        files={"generate_data.py": "import urllib.request\nurllib.request.urlopen(URL)\n",
               "data/example.jsonl": "{}\n"},
    )  # fmt: skip
    needs = classify(read_server(unshipped)).needs
    assert needs == "outside: data it does not ship (data/guesses.txt: its generate_data.py downloads it)"
    # the same with the file shipped, and a URL in a docstring only: pure Python
    shipped = _server(
        tmp_path, "shipped", app='"""See https://example.org/paper.json"""\n' + APP_HEAD + 'P = "data/words.txt"\n',
        files={"generate_data.py": "import urllib.request\nurllib.request.urlopen(URL)\n",
               "data/words.txt": "crane\n"},
    )  # fmt: skip
    assert classify(read_server(shipped)).category is Category.PURE


def test_a_folder_without_app_is_a_library(tmp_path: Path) -> None:
    # gymnasium, sec_local_index
    assert classify(read_server(_server(tmp_path, "lib", app=None))).category is Category.LIBRARY


DOC = f"# Title\n\nprose before\n\n{BEGIN}\nold table\n{END}\n\nprose after (another helper's)\n"


def _tree(tmp_path: Path) -> Path:
    _server(tmp_path, "pure_env")
    _server(tmp_path, "judged", config="judge_model_server: {type: responses_api_models, name: judge}\n")
    _server(tmp_path, "lib", app=None)
    return tmp_path


def test_the_table_replaces_only_what_is_between_the_markers(tmp_path: Path) -> None:
    rows = build_rows(_tree(tmp_path) / "resources_servers", None)
    table = render(rows)
    document = replace_table(DOC, table)
    assert document.startswith("# Title\n\nprose before\n\n" + BEGIN + "\n")
    assert document.endswith(END + "\n\nprose after (another helper's)\n")
    assert "old table" not in document
    assert (
        "| judged | second model (judge_model_server) | simple_agent | untested | expected: a judge" in table
    )
    assert "| pure_env | pure Python | simple_agent | untested |  |" in table
    assert "3 folders: pure Python 1, second model 1, PyPI packages 0, outside 0; libraries 1" in table
    assert replace_table(document, table) == document  # made twice, the same
    with pytest.raises(ConfigError, match="no table markers"):
        replace_table("# no markers\n", table)


def test_runs_here_comes_from_the_results_file(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(
        '{"pure_env": {"starts": true, "rows": 5, "scored": 5, "reward_mean": 0.8, "agent": "simple_agent", "reason": null},'
        ' "judged": {"starts": true, "rows": 5, "scored": 0, "reward_mean": null, "agent": "simple_agent",'
        ' "reason": "judge answered 404"}}'
    )
    table = render(build_rows(_tree(tmp_path) / "resources_servers", load_results(results)))
    assert (
        "| pure_env | pure Python | simple_agent | yes (5 of 5 rows scored, mean reward 0.800) |  |" in table
    )
    assert "| judged | second model (judge_model_server) | simple_agent | no | judge answered 404 |" in table
    assert (
        "| lib | library: no app.py; other servers import it | simple_agent | untested | expected: not a server |"
        in table
    )
    assert "Runs here: 1 of 2 tested." in table


def test_a_bad_results_file_names_the_server_and_key(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(
        '{"pure_env": {"starts": "maybe", "rows": 5, "scored": 5, "reward_mean": 1, "agent": "a", "reason": null}}'
    )
    with pytest.raises(DataError, match=r"results.json: pure_env.starts: "):
        load_results(results)


def test_the_script_rewrites_the_doc_and_checks_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = tmp_path / "compat.md"
    doc.write_text(DOC)
    common = [
        "--nemo-gym",
        str(_tree(tmp_path)),
        "--doc",
        str(doc),
        "--results",
        str(tmp_path / "absent.json"),
    ]
    assert main([*common, "--check"]) == 1
    assert main(common) == 0
    assert "| judged |" in doc.read_text()
    assert main([*common, "--check"]) == 0
    assert main(["--nemo-gym", str(tmp_path / "nowhere"), "--doc", str(doc)]) == 2
    assert "is not a folder; --nemo-gym takes NeMo Gym's root" in capsys.readouterr().err
