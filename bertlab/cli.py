"""The `bertlab` command line. The only module that reads argv or environment variables.

Each subcommand is a thin function that builds configs from flags and calls the library. Errors the
user can fix (bad paths, bad files, bad flags) end as one line on stderr and a non-zero exit code.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

EXIT_USER_ERROR = 1
EXIT_INTERRUPTED = 130


class CommandError(Exception):
    """An error the user can fix; printed as one line, without a traceback."""


# --- tokenizer ----------------------------------------------------------------------------------


def add_tokenizer_commands(subparsers: argparse._SubParsersAction) -> None:
    """`bertlab tokenizer train|encode`."""
    parser = subparsers.add_parser(
        "tokenizer",
        help="train a WordPiece vocabulary or look at how text is tokenized",
        description="Train a WordPiece vocabulary on a corpus, or encode text with a tokenizer.",
    )
    parser.set_defaults(handler=lambda args: parser.print_help() or 0)


# --- entry point --------------------------------------------------------------------------------

COMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (add_tokenizer_commands,)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bertlab",
        description="Pre-train, fine-tune and inspect BERT-style models. "
        "Run `bertlab COMMAND --help` for the options of each command.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for add_commands in COMMANDS:
        add_commands(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 0
    try:
        return int(handler(args) or 0)
    except KeyboardInterrupt:
        print("bertlab: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (CommandError, ValueError, OSError) as error:
        print(f"bertlab: error: {error}", file=sys.stderr)
        return EXIT_USER_ERROR


if __name__ == "__main__":
    sys.exit(main())
