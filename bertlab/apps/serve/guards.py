"""An ASGI middleware that checks requests (Host, body type, size and encoding) as they arrive
and sets safe response headers. Every refusal is the API's JSON error, `{"detail": "one line"}`.

- A Host header that is not this server's is refused with 400 (against DNS rebinding: a page
  elsewhere cannot reach a loopback server under its own name).
- A body sent as anything but JSON (`Content-Type: application/json`) is refused with 415,
  naming the type it came with: `curl -d` sends a form type unless told otherwise. Bodies of
  other types are not read as JSON, so that a page elsewhere cannot make a browser send one
  without the preflight check that a JSON type needs (CSRF).
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
from collections.abc import Sequence

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


JSON_MEDIA_TYPE = "application/json"
METHODS_WITH_BODY = ("POST", "PUT", "PATCH")
ANY_HOST = "*"


class RequestGuard:
    """Host, body type, size and encoding checks, and the security headers; see the module
    docstring.

    Args:
        app: the app it guards.
        max_body_bytes: the largest body taken.
        allowed_hosts: the Host header values (without the port) answered; `*`: any.
    """

    def __init__(
        self, app: ASGIApp, max_body_bytes: int, allowed_hosts: Sequence[str] = (ANY_HOST,)
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.allowed_hosts = tuple(host.lower() for host in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                # A response that says how long to keep it (the CJK font) keeps its own word.
                named = {name.lower() for name, _ in headers}
                extra = [header for header in SECURITY_HEADERS if header[0] not in named]
                message["headers"] = [*headers, *extra]
            await send(message)

        refusal = self._refusal(scope)
        if refusal is not None:
            await _drain(receive, DRAIN_BYTES)
            await _problem(send_with_headers, *refusal)
            return
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

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        """(status, detail) for a foreign Host or a body that is not JSON; None: go on."""
        host = _header(scope, b"host")
        if ANY_HOST not in self.allowed_hosts and _host_name(host) not in self.allowed_hosts:
            return 400, (
                f"the Host header {host!r} is not this server's; it answers "
                f"{', '.join(self.allowed_hosts)}"
            )
        if scope["method"] in METHODS_WITH_BODY:
            content_type = _header(scope, b"content-type")
            media_type = content_type.split(";", 1)[0].strip().lower()
            if media_type != JSON_MEDIA_TYPE:
                sent = f"as {content_type}" if content_type else "without a Content-Type"
                return 415, (
                    f"the body came {sent}; send JSON with Content-Type: {JSON_MEDIA_TYPE} "
                    f"(curl: -H 'Content-Type: {JSON_MEDIA_TYPE}')"
                )
        return None

    def _too_large(self, size: int, qualifier: str = "") -> str:
        return (
            f"the request body has {qualifier}{size} bytes; this server takes at most "
            f"{self.max_body_bytes}"
        )


def _header(scope: Scope, name: bytes) -> str:
    """The first value of a request header, or "" when absent (latin-1, as HTTP sends it)."""
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return ""


def _host_name(host: str) -> str:
    """A Host header without its port, lower-cased: "LocalHost:8000" -> "localhost",
    "[::1]:8000" -> "[::1]"."""
    host = host.strip().lower()
    if host.startswith("["):
        return host.split("]", 1)[0] + "]"
    return host.rsplit(":", 1)[0] if ":" in host else host


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
