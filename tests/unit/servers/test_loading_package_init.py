"""A NeMo Gym server whose package `__init__` imports its own app.py (NeMo Gym's osworld does:
`from resources_servers.osworld.app import OSWorldResourcesServer`) loads: Python imports a
package before its module, and the loader does too, so the `__init__` never meets a half-run
app.py registered under its name ("cannot import name ... from ...app")."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SERVER = ROOT / "tests" / "fixtures" / "nemo_gym_servers" / "resources_servers" / "example_session_state_mgmt"


def test_a_package_init_that_imports_its_app_loads(tmp_path: Path) -> None:
    package = tmp_path / "resources_servers" / "init_imports_app"
    package.mkdir(parents=True)
    # Its app.py imports a sibling through the package first, as osworld's imports its config.
    app = (SERVER / "app.py").read_text()
    (package / "app.py").write_text("from resources_servers.init_imports_app.sibling import VALUE\n" + app)
    (package / "sibling.py").write_text("VALUE = 1\n")
    (package / "__init__.py").write_text(
        "from resources_servers.init_imports_app.app import StatefulCounterResourcesServer\n"
    )
    # A child of its own: the loader puts NeMo Gym's root on sys.path and installs its finder.
    code = (
        "import sys; from pathlib import Path; from ng_cli.servers.loading import load_server_class; "
        "print(load_server_class(Path(sys.argv[1])).__name__)"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code, str(package / "app.py")], capture_output=True, text=True, timeout=120
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    assert loaded.stdout.strip() == "StatefulCounterResourcesServer"
