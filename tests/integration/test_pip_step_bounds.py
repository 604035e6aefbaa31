"""The pip run of ng_run's packages step is bounded and never outlives ng_run (issue 43, point 17).

pip here is a stand-in that does what the real one will not do on demand: run for as long as it
is let, leave behind a process that ignores SIGTERM (a build backend), print a URL with a
password. Every process it starts carries a marker in its environment, so a survivor is found in
/proc whatever its pid. A survivor must be gone (or a zombie) once the call or ng_run returns;
those killed by SIGKILL are waited for (SIGKILL cannot be ignored, and the stand-ins would
otherwise sleep for two minutes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from ng_cli.errors import LaunchError
from ng_cli.packages.environment import pip_install

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MARK = "NG_STUB_PIP_MARK"
PASSWORD = "s3cr3t-pa55word"
SLOW_LINE = "stub pip: installing slowly"
STUB = f"""
import os, signal, subprocess, sys, time
from pathlib import Path

record = Path(os.environ["STUB_PIP_RECORD"])
if os.environ["STUB_PIP_MODE"] == "fail":
    print("Collecting pkg @ git+https://alice:{PASSWORD}@example.org/o/p.git", flush=True)
    print("ERROR: could not fetch https://alice:{PASSWORD}@example.org/o/p.git", flush=True)
    sys.exit(1)
straggler = subprocess.Popen(
    [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
     "print('ignoring SIGTERM', flush=True); time.sleep(120)"],
    stdout=subprocess.PIPE, text=True,
)
straggler.stdout.readline()


def on_term(signum, frame):
    (record / "terminated").write_text("pip's leader got SIGTERM")
    sys.exit(143)


signal.signal(signal.SIGTERM, on_term)
print("{SLOW_LINE}", flush=True)
time.sleep(120)
"""


@pytest.fixture
def stub(tmp_path: Path) -> Path:
    """A folder with a stand-in `pip` package (for `python -m pip`) and a stand-in `python`."""
    folder = tmp_path / "stub"
    (folder / "pip").mkdir(parents=True)
    (folder / "pip" / "__init__.py").write_text("")
    (folder / "pip" / "__main__.py").write_text(STUB)
    python = folder / "python"
    python.write_text(f"#!{sys.executable}\n{STUB}")
    python.chmod(0o755)
    (tmp_path / "record").mkdir()
    return folder


def _env(tmp_path: Path, mode: str, mark: str) -> dict[str, str]:
    return {**os.environ, "STUB_PIP_MODE": mode, "STUB_PIP_RECORD": str(tmp_path / "record"), MARK: mark}


def _survivors(mark: str) -> list[int]:
    """Processes (zombies aside) started with the marker in their environment."""
    found: list[int] = []
    tag = f"{MARK}={mark}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if tag in environ and state != "Z":
            found.append(int(entry.name))
    return found


def _gone(mark: str) -> list[int]:
    """The survivors still there once those SIGKILLed have had 30 s to die (an event, bounded)."""
    deadline = time.monotonic() + 30
    while (left := _survivors(mark)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_pip_past_its_time_bound_is_stopped_with_its_group(tmp_path: Path, stub: Path) -> None:
    mark = uuid.uuid4().hex
    (tmp_path / "work").mkdir()
    lines: list[str] = []
    with pytest.raises(LaunchError) as caught:
        pip_install(
            str(stub / "python"), ["absent-pkg==1.0"], work_dir=tmp_path / "work", on_line=lines.append,
            env=_env(tmp_path, "sleep", mark), servers=["env"], timeout_s=3,
        )  # fmt: skip
    assert "pip did not finish within 3 s installing for env, and was stopped" in caught.value.message
    assert "+install_requirements_timeout_s" in (caught.value.hint or "")
    assert _gone(mark) == []


def test_a_stop_ends_pips_whole_group_and_waits_for_pip(tmp_path: Path, stub: Path) -> None:
    mark = uuid.uuid4().hex
    (tmp_path / "work").mkdir()
    slow = threading.Event()

    def on_line(line: str) -> None:
        if line == SLOW_LINE:
            slow.set()

    with pytest.raises(LaunchError, match="pip was stopped"):
        pip_install(
            str(stub / "python"), ["absent-pkg==1.0"], work_dir=tmp_path / "work", on_line=on_line,
            env=_env(tmp_path, "sleep", mark), should_stop=slow.is_set,
        )  # fmt: skip
    assert (tmp_path / "record" / "terminated").exists()  # pip handled SIGTERM before the call returned
    assert _gone(mark) == []  # and what it left behind, which ignores SIGTERM, got SIGKILL


def test_pips_lines_never_show_a_url_password(tmp_path: Path, stub: Path) -> None:
    (tmp_path / "work").mkdir()
    lines: list[str] = []
    with pytest.raises(LaunchError) as caught:
        pip_install(
            str(stub / "python"), ["absent-pkg==1.0"], work_dir=tmp_path / "work", on_line=lines.append,
            env=_env(tmp_path, "fail", uuid.uuid4().hex),
        )  # fmt: skip
    assert PASSWORD not in caught.value.message + "".join(lines)
    assert "alice:***@example.org" in caught.value.message
    assert lines[0] == "Collecting pkg @ git+https://alice:***@example.org/o/p.git"


def _repo(tmp_path: Path) -> Path:
    """A repo tree with one resources server whose requirement is not installed; its config."""
    root = tmp_path / "repo"
    folder = root / "resources_servers" / "slow_env"
    folder.mkdir(parents=True)
    (folder / "app.py").write_text("")
    (folder / "requirements.txt").write_text("absent-stub-pkg==1.0\n")
    (root / "stack.yaml").write_text(
        "slow_instance:\n  resources_servers:\n    slow_env:\n      entrypoint: app.py\n"
    )
    (root / "no-env.yaml").write_text("{}\n")
    return root / "stack.yaml"


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_a_signal_to_ng_run_during_pip_leaves_no_pip_running(
    tmp_path: Path, stub: Path, signum: int, code: int
) -> None:
    config = _repo(tmp_path)
    mark = uuid.uuid4().hex
    env = {
        **_env(tmp_path, "sleep", mark),
        "NG_REPO_ROOT": str(config.parent),
        "NG_ENV_YAML": str(config.parent / "no-env.yaml"),
        "PYTHONPATH": f"{stub}{os.pathsep}{REPO}",  # `python -m pip` finds the stand-in first
    }
    process = subprocess.Popen(
        [sys.executable, "-c", "from ng_cli.commands.run import main; main()", f"+config_paths=[{config}]",
         "++head_server.port=0", "+install_requirements=true"],
        cwd=config.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,  # the signal goes to ng_run alone, as `kill <pid>` sends it
    )  # fmt: skip
    output: list[str] = []
    try:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            if line.strip() == f"[pip] {SLOW_LINE}":
                break
        else:
            pytest.fail("ng_run ended before pip ran:\n" + "".join(output))
        process.send_signal(signum)
        output.append(process.communicate(timeout=60)[0])
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == code, "".join(output)
    assert "requirements: stopped by a signal; nothing was started" in "".join(output)
    assert (tmp_path / "record" / "terminated").exists()  # ng_run ended pip, and waited for it
    assert _gone(mark) == []
