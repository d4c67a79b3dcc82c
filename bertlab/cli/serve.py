"""`bertlab serve`: a local web page and JSON API on one or more model directories."""

from __future__ import annotations

import argparse
from pathlib import Path

from bertlab.cli.common import CommandError

SERVE_PACKAGES = ("fastapi", "uvicorn")  # the web app and its ASGI server
DEMO_COMMAND = (
    "bertlab serve --model encoder=runs/demo/pretrain/final "
    "--model sst2=runs/demo/finetune/pre-trained/seed-1/best"
)


def add_serve_command(subparsers: argparse._SubParsersAction) -> None:
    from bertlab.apps.serve.settings import DEFAULT_PORT, LOOPBACK_HOST, MAX_BATCH_TEXTS

    parser = subparsers.add_parser(
        "serve",
        help="a local web page and JSON API to try models and look inside them",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Load each model once and serve a web page (fill-mask, generate, score, "
        "classify,\ntag, answer, attention, embeddings) and a JSON API under /api (OpenAPI: "
        "/openapi.json).\nWhat a model can do follows from its head: a left-to-right (causal) "
        "model generates\nand scores text, a masked one fills in [MASK]s and scores. Listens "
        "on this machine\nonly unless --host says otherwise.\n\nOn the models `bertlab demo` "
        "writes, then open "
        f"http://127.0.0.1:{DEFAULT_PORT}/ :\n\n  {DEMO_COMMAND}\n\n"
        "More: docs/serve.md",
    )
    parser.add_argument(
        "--model",
        action="append",
        required=True,
        metavar="[NAME=]MODEL",
        help="a model directory (safetensors weights), a shipped model (bertlab:mini-reviews-en) "
        "or a Hub id, named NAME in the API and the page (default: the directory's or the "
        "model's name); repeat for several models",
    )
    parser.add_argument(
        "--host",
        default=LOOPBACK_HOST,
        help=f"interface to listen on (default: {LOOPBACK_HOST}, this machine only; "
        "0.0.0.0 opens it to the network)",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default: {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--max-batch-texts",
        type=int,
        default=MAX_BATCH_TEXTS,
        help="texts of requests that arrive together run in one forward pass, up to this many "
        "(default: %(default)s; 1 turns batching off)",
    )
    parser.set_defaults(handler=run_serve)


def model_arguments(values: list[str]) -> tuple[tuple[str, Path], ...]:
    """`--model` values as (name, directory): `NAME=DIR`, or `DIR` named by its last part (a
    shipped model's name without `bertlab:`, a Hub id's name without its owner)."""
    from bertlab.apps.serve.settings import MODEL_NAME
    from bertlab.core.hub import SHIPPED_PREFIX

    models = []
    for value in values:
        name, separator, directory = value.partition("=")
        if not (separator and MODEL_NAME.fullmatch(name) and directory):
            name, directory = Path(value.removeprefix(SHIPPED_PREFIX)).name, value
            if not MODEL_NAME.fullmatch(name):
                raise CommandError(f"--model {value}: name it with --model NAME={value}")
        models.append((name, Path(directory)))
    return tuple(models)


def run_serve(args: argparse.Namespace) -> int:
    import dataclasses

    from bertlab.core.optional import require

    # The web app's packages are optional (bertlab.core.optional): say which one is missing in one
    # line, before importing the app that needs them.
    for package in SERVE_PACKAGES:
        require(package, "bertlab serve")
    from bertlab.apps.serve.server import AddressUnavailable, run_server
    from bertlab.apps.serve.settings import ServeConfig, ServeLimits

    limits = dataclasses.replace(ServeLimits(), max_batch_texts=args.max_batch_texts)
    config = ServeConfig(model_arguments(args.model), args.host, args.port, limits=limits)
    try:
        run_server(config)
    except AddressUnavailable as error:
        if not error.is_in_use:
            raise
        raise CommandError(f"{error}; choose another with --port (0: any free port)") from None
    return 0
