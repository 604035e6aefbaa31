"""Servers' own packages: their `requirements.txt` read (`requirements`), checked against an
environment and each other (`resolve`, pure), and installed with pip (`environment`). The
launcher's step that uses them is `ng_cli.launcher.packages`."""
