"""vLLM engines ng_run starts: their config, the plan (devices, ports, argv), placement, start-up checks.

The engine's environment, offline models and the embedded model's trainer are `ng_cli.toolchain`.
"""
