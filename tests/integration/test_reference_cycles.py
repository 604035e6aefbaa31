"""A failed upstream call leaves no reference cycle behind: its request goes when the call ends.

A frame that keeps the exception it raises (a parameter or a local named in `raise`) is a cycle
(frame -> exception -> traceback -> frame), and every frame on the traceback holds its locals:
the request body, the chat payload. Only the cyclic GC, which counts objects, not bytes, frees
them; a model server answering large prompts that overflow then grew by a body's worth per
request until it ran (measured, 31 MB prompts that overflow, one at a time: the peak grew
by 620 MB over 16 requests before, by 150 MB over 30 after).
vllm_model runs in this process here, so the test can ask the collector what it found.
"""

from __future__ import annotations

import gc
import types
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from ng_cli.config.schema import validate_block
from ng_cli.servers.loading import load_server_class
from ng_cli.servers.testing import serve_in_thread
from tests.fixtures.stub_vllm import StubVllm

pytestmark = pytest.mark.integration

APP = Path(__file__).resolve().parents[2] / "responses_api_models" / "vllm_model" / "app.py"
PACKAGE = str(Path(__file__).resolve().parents[2] / "ng_cli")


@contextmanager
def _cyclic_garbage() -> Iterator[list[object]]:
    """What only the cyclic GC would free of what the block made."""
    gc.collect()
    gc.disable()
    found: list[object] = []
    try:
        yield found
    finally:
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found.extend(gc.garbage)
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()


@pytest.mark.parametrize("stream", [False, True], ids=["unstreamed", "streamed"])
@pytest.mark.parametrize("fault", ["overflow", "bad_request", "error_500"])
def test_a_failed_call_leaves_no_frame_of_ours_to_the_cyclic_gc(fault: str, stream: bool) -> None:
    stub = StubVllm(fault=fault)
    server_class = load_server_class(APP)
    block = {"api_key": "stub-key", "model": "stub-model", "return_token_id_information": False,
             "uses_reasoning_parser": False, "max_attempts": 2, "backoff_s": 0.01}  # fmt: skip
    with serve_in_thread(stub.build_app()) as root:
        config = validate_block(server_class.config_class, block={"base_url": f"{root}/v1", **block})
        server = server_class(config, name="policy_model")
        with serve_in_thread(server.build_app()) as url:
            body = orjson.dumps({"input": "hello", "stream": stream})
            call = urllib.request.Request(
                f"{url}/v1/responses", data=body, headers={"Content-Type": "application/json"}
            )
            with _cyclic_garbage() as garbage:
                try:
                    urllib.request.urlopen(call, timeout=30).read()
                except urllib.error.HTTPError as error:
                    error.read()

    ours = sorted(
        f"{item.f_code.co_filename.rsplit('/', 2)[-2]}/{item.f_code.co_name}"
        for item in garbage
        if isinstance(item, types.FrameType) and item.f_code.co_filename.startswith(PACKAGE)
    )
    assert ours == []
