"""CancelOnDisconnectMiddleware with a scripted ASGI connection: who gets cancelled, and when."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import Message, Receive, Scope, Send

from ng_cli.servers.disconnect import CancelOnDisconnectMiddleware

SCOPE: Scope = {"type": "http", "method": "POST", "path": "/x"}


class Connection:
    """The server side of one request: a body in two chunks, then a disconnect when told."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[Message] = asyncio.Queue()
        for chunk, more in ((b"ab", True), (b"c", False)):
            self.messages.put_nowait({"type": "http.request", "body": chunk, "more_body": more})
        self.sent: list[Message] = []

    async def receive(self) -> Message:
        return await self.messages.get()

    async def send(self, message: Message) -> None:
        self.sent.append(message)

    def disconnect(self) -> None:
        self.messages.put_nowait({"type": "http.disconnect"})


async def test_a_client_gone_while_the_handler_waits_cancels_it() -> None:
    seen: dict[str, Any] = {}

    async def app(_scope: Scope, receive: Receive, _send: Send) -> None:
        seen["body"] = (await receive())["body"] + (await receive())["body"]
        try:
            await asyncio.sleep(30)  # waiting on the model
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise

    connection = Connection()
    served = asyncio.create_task(
        CancelOnDisconnectMiddleware(app)(SCOPE, connection.receive, connection.send)
    )
    await asyncio.sleep(0.01)
    connection.disconnect()
    await asyncio.wait_for(served, timeout=5)  # returns (no error to the server) once cancelled
    assert seen == {"body": b"abc", "cancelled": True}


async def test_a_disconnect_after_the_response_cancels_nothing() -> None:
    finished: list[str] = []

    async def app(_scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok", "more_body": False})
        connection.disconnect()  # uvicorn says "disconnect" once the response is complete
        await asyncio.sleep(0.01)
        finished.append("cleanup ran")

    connection = Connection()
    await CancelOnDisconnectMiddleware(app)(SCOPE, connection.receive, connection.send)
    assert finished == ["cleanup ran"]
    assert connection.sent[-1]["body"] == b"ok"


async def test_a_server_shutdown_still_cancels_the_handler_and_propagates() -> None:
    cancelled: list[bool] = []

    async def app(_scope: Scope, receive: Receive, _send: Send) -> None:
        await receive()
        await receive()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    connection = Connection()
    served = asyncio.create_task(
        CancelOnDisconnectMiddleware(app)(SCOPE, connection.receive, connection.send)
    )
    await asyncio.sleep(0.01)
    served.cancel()
    try:
        await served
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the middleware swallowed the server's own cancellation")
    await asyncio.sleep(0)
    assert cancelled == [True]
