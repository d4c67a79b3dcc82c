"""Running the app: load every model once, bind the address, serve until interrupted."""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Sequence

import uvicorn

from bertlab.apps.serve.api import create_app
from bertlab.apps.serve.models import ServedModel, load_served_model
from bertlab.apps.serve.settings import ServeConfig
from bertlab.core import hub

logger = logging.getLogger(__name__)

LOOPBACK_NAMES = ("127.0.0.1", "localhost")
SHUTDOWN_GRACE_SECONDS = 5  # requests still running when interrupted get this long to finish


def load_models(models: Sequence[tuple[str, object]]) -> list[ServedModel]:
    """Every (name, directory) loaded once, in order; a directory may also be a shipped model's
    name (`bertlab:mini-reviews-en`) or a Hub id, as in every `--model` (`hub.resolve`).

    Raises:
        FileNotFoundError, ValueError: a directory that is not a servable model (named).
    """
    return [load_served_model(name, hub.resolve(directory)) for name, directory in models]


def allowed_hosts(host: str) -> list[str]:
    """The Host headers to answer: the loopback names on a loopback server, any elsewhere."""
    return list(LOOPBACK_NAMES) if host in LOOPBACK_NAMES else ["*"]


class AddressUnavailable(OSError):
    """The server's address cannot be bound: the port is taken (`is_in_use`), or the host is
    not one of this machine's."""

    def __init__(self, host: str, port: int, reason: str, is_in_use: bool) -> None:
        super().__init__(f"cannot listen on {host}:{port}: {reason}")
        self.is_in_use = is_in_use


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port); port 0 picks a free one.

    Raises:
        AddressUnavailable: the address is taken or cannot be bound (its message names why).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen()  # holds the port while the models load; uvicorn accepts from it later
    except OSError as error:
        sock.close()
        is_in_use = error.errno == errno.EADDRINUSE
        reason = "the port is in use (another server?)" if is_in_use else error.strerror
        raise AddressUnavailable(host, port, reason or str(error), is_in_use) from None
    return sock


def run_server(config: ServeConfig) -> None:
    """Bind the address, load the models, then serve the page and the API on
    `config.host:config.port` until interrupted (Ctrl-C). Errors in the address or the models
    are raised before anything is served; a taken port before any model is loaded."""
    sock = bind(config.host, config.port)  # first: loading the models can take minutes
    try:
        models = load_models(config.models)
    except BaseException:
        sock.close()
        raise
    app = create_app(models, config.limits, config.workers, allowed_hosts(config.host))
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_config=None,  # keep the command line's logging
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
            limit_concurrency=config.limits.max_connections,
        )
    )
    port = sock.getsockname()[1]
    shown = f"[{config.host}]" if ":" in config.host else config.host
    logger.info("serving %d model(s) at http://%s:%d/ (Ctrl-C stops)", len(models), shown, port)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn raises Ctrl-C again once it has shut down
        pass
    logger.info("stopped")
