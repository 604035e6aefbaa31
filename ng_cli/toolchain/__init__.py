"""What engines need before they start: their environment, offline models, the embedded model's trainer.

local_vllm            where the engine venv is (`vllm_venv_python`, `default_engine_python`),
                      `build_tiny_model`, and `VllmServer` for engine tests
wheelhouse/           offline engine environments: make a hash-checked wheelhouse, install it
tiny_model.py         a tiny Qwen2 / Qwen3-MoE directory from nothing (runs under the engine venv)
train_weather_model.py  the quickstart's embedded model (runs under the engine venv)

Engine planning (what to start, where, with which options) is `ng_cli.engines`.
"""
