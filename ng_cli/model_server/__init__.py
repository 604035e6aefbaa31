"""The model servers' routes and per-request work: where `/v1/responses` and `/v1/chat/completions` are.

VllmModelServer     vllm_model's and local_vllm_model's routes (`vllm_server.py`)
VllmChat            per-request work of a call (`vllm.py`); VllmStreams the same with stream: true
TokenExactChat      the `token_exact` call: `/v1/completions` with a token prompt
open_relay          openai_model's streams, relayed unchanged (`relay.py`)
install_admin_routes  `/admin/weights...`, `/admin/sleep`, `/admin/wake_up`

They sit on `ng_cli.upstream` (endpoints, client, weights), `ng_cli.conversion` and `ng_cli.tokens`.
Modules are imported by their full path; this package imports nothing itself.
"""
