"""An ASGI middleware that checks request bodies as they arrive and sets safe response headers.

- A body over `max_body_bytes` is refused with 413: at once when its Content-Length says so,
  otherwise as soon as the bytes received pass the limit, so an oversized body is never held in
  memory. (The rest of it is read and dropped, up to `DRAIN_BYTES`, so that a client that sends
  the whole body before reading, as most do, can still read the answer.)
- A body that is not UTF-8 (RFC 8259: JSON exchanged between systems is UTF-8) is refused with
  400, naming the first bad byte.
- Every answer says `nosniff`, and the page may load scripts, styles and data only from this
  server (Content-Security-Policy): no CDN, no remote font, no inline script.
"""

from __future__ import annotations

import codecs
import json

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DRAIN_BYTES = 16 * 1024 * 1024
SECURITY_HEADERS = [
    (b"cache-control", b"no-cache"),  # revalidate: a new bertlab's page is never a stale one
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; "
        b"base-uri 'none'; form-action 'none'",
    ),
]


class RequestGuard:
    """Body size and encoding checks, and the security headers; see the module docstring."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await _drain(receive, min(declared, DRAIN_BYTES))
            await _problem(send_with_headers, 413, self._too_large(declared))
            return
        received = 0
        decoder = codecs.getincrementaldecoder("utf-8")()

        async def checked_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] != "http.request":
                return message
            body = message.get("body", b"")
            received += len(body)
            if received > self.max_body_bytes:
                if message.get("more_body", False):  # let a client that sends it all read why
                    await _drain(receive, DRAIN_BYTES)
                raise HTTPException(413, self._too_large(received, "at least "))
            try:
                decoder.decode(body, final=not message.get("more_body", False))
            except UnicodeDecodeError as error:
                position = received - len(body) + error.start
                raise HTTPException(
                    400,
                    f"the request body is not UTF-8 (byte {body[error.start]:#04x} at position "
                    f"{position}); send JSON encoded as UTF-8",
                ) from None
            return message

        await self.app(scope, checked_receive, send_with_headers)

    def _too_large(self, size: int, qualifier: str = "") -> str:
        return (
            f"the request body has {qualifier}{size} bytes; this server takes at most "
            f"{self.max_body_bytes}"
        )


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _drain(receive: Receive, limit: int) -> None:
    """Read and drop up to `limit` bytes of the request body."""
    dropped = 0
    while dropped < limit:
        message = await receive()
        if message["type"] != "http.request":
            return
        dropped += len(message.get("body", b""))
        if not message.get("more_body", False):
            return


async def _problem(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
