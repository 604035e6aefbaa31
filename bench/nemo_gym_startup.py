"""Start-up of one NeMo Gym server: here (our child process) vs NeMo Gym's own `python app.py`.

    python bench/nemo_gym_startup.py --root <NeMo Gym 0.7.0 root> --nemo-gym-deps <dir> [--runs 3]

Both start the same unchanged `resources_servers/<server>/app.py` (default
example_session_state_mgmt) as a fresh process and are timed from spawn to the first 200 from
`GET /health`:
  * here: `python -m ng_cli.servers.child <spec>`, what ng_run starts per server, in this
    project's environment (NeMo Gym's imports answered by `ng_cli.nemo_gym_compat`);
  * NeMo Gym: `python app.py` in the server's folder with `NEMO_GYM_CONFIG_DICT` /
    `NEMO_GYM_CONFIG_PATH` set as its launcher sets them, its package and dependencies (ray,
    wandb, mlflow, ...) on `PYTHONPATH` from `--nemo-gym-deps` (a `pip install --target` of
    NeMo Gym's requirements; its source from `--root`).
Runs alternate (ours, theirs, ours, ...) so load on the machine falls on both alike. Prints a
table (each run and the median) and writes bench/results/nemo_gym_startup.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ng_cli.servers.spec import ServerSpec, write_spec  # noqa: E402

RESULTS = REPO / "bench" / "results" / "nemo_gym_startup.json"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _until_healthy(process: subprocess.Popen[bytes], port: int, timeout_s: float) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode} before answering /health")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as answer:
                if answer.status == 200:
                    return time.monotonic() - started
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"no /health answer within {timeout_s} s")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def start_here(app: Path, block: dict[str, object], name: str, timeout_s: float) -> float:
    port = _free_port()
    with tempfile.TemporaryDirectory() as tmp:
        spec = ServerSpec(
            name=name,
            server_type="resources_servers",
            implementation=app.parent.name,
            app_path=str(app),
            config=block,
            port=port,
            session_secret="bench",
        )
        spec_path = Path(tmp) / "spec.json"
        write_spec(spec, spec_path)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        started = time.monotonic()
        process = subprocess.Popen(
            [sys.executable, "-m", "ng_cli.servers.child", str(spec_path)],
            cwd=app.parents[2], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _until_healthy(process, port, timeout_s)
            return time.monotonic() - started
        finally:
            _stop(process)


def start_nemo_gym(app: Path, block: dict[str, object], name: str, deps: Path, timeout_s: float) -> float:
    port = _free_port()
    config = {
        "dry_run": False,
        "head_server": {"host": "127.0.0.1", "port": _free_port()},
        name: {"resources_servers": {app.parent.name: {**block, "host": "127.0.0.1", "port": port}}},
    }
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(deps), str(app.parents[2])]),
        "NEMO_GYM_CONFIG_DICT": json.dumps(config),
        "NEMO_GYM_CONFIG_PATH": name,
    }
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, app.name],
        cwd=app.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _until_healthy(process, port, timeout_s)
        return time.monotonic() - started
    finally:
        _stop(process)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--nemo-gym-deps", type=Path, required=True)
    parser.add_argument("--server", default="example_session_state_mgmt")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--timeout-s", type=float, default=300.0)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args()
    app = (args.root / "resources_servers" / args.server / "app.py").resolve()
    block: dict[str, object] = {"entrypoint": "app.py", "domain": "agent"}
    name = f"{args.server}_resources_server"
    here: list[float] = []
    theirs: list[float] = []
    for run in range(args.runs):
        here.append(start_here(app, block, name, args.timeout_s))
        theirs.append(start_nemo_gym(app, block, name, args.nemo_gym_deps.resolve(), args.timeout_s))
        print(f"run {run + 1}: here {here[-1]:.2f} s   NeMo Gym python app.py {theirs[-1]:.2f} s", flush=True)
    result = {
        "server": args.server,
        "here_s": here,
        "nemo_gym_s": theirs,
        "here_median_s": statistics.median(here),
        "nemo_gym_median_s": statistics.median(theirs),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_1m": os.getloadavg()[0],
        },
    }
    print(f"\n{'start-up to /health':28s} {'median':>8s}  runs")
    print(
        f"{'here (ng_cli child)':28s} {result['here_median_s']:7.2f}s  {', '.join(f'{t:.2f}' for t in here)}"
    )
    print(
        f"{'NeMo Gym (python app.py)':28s} {result['nemo_gym_median_s']:7.2f}s  {', '.join(f'{t:.2f}' for t in theirs)}"
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written: {args.output}")


if __name__ == "__main__":
    main()
