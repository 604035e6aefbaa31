"""Console scripts: one thin module per command (parse, call the library, render, exit).

Each module exposes `main()`, which `pyproject.toml` maps to a script name (and NeMo Gym's
`nemo_gym_*` alias), and `OPTIONS`, the pydantic model of its `+key` options, read through
`ng_cli.config.command_options` before any work; shared plumbing (the Typer app, error rendering,
exit codes) lives in `_app.py`.
"""
