"""`-` for the standard streams: `--data -` (evaluate, predict) reads standard input,
`--output -` (predict) writes standard output, and `tokenizer encode -` encodes standard input."""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bertlab.cli.common import CommandError
from bertlab.core.atomic import atomic_writer

STREAM = "-"
STDIN_NAME = "<stdin>"  # how messages name standard input
STDOUT = Path("/dev/stdout")  # written in place (bertlab.core.atomic), never renamed over
HEAD_BYTES = 4096  # what a suffix is chosen from


@contextmanager
def input_path(value: str, suffix_for: Callable[[str], str] | None = None) -> Iterator[Path]:
    """`value` as a path; `-`: standard input, copied to a temporary file first (the readers
    take a path, and the tagging predictions read their input twice). Errors that name the
    copy name `<stdin>` instead.

    Args:
        value: the flag's value.
        suffix_for: the copy's suffix from the text's beginning, for readers that choose the
            format by the suffix (`--task classification`).
    """
    if value != STREAM:
        yield Path(value)
        return
    data = sys.stdin.buffer.read()
    suffix = suffix_for(data[:HEAD_BYTES].decode("utf-8", "replace")) if suffix_for else ""
    with tempfile.TemporaryDirectory(prefix="bertlab-stdin-") as directory:
        path = Path(directory) / f"stdin{suffix}"
        with atomic_writer(path) as file:
            file.write(data)
        try:
            yield path
        except ValueError as error:
            from bertlab.cli.wording import error_in_flag_words

            message = error_in_flag_words(error)  # a reader's message, in the flags' words
            raise CommandError(message.replace(str(path), STDIN_NAME)) from error


def output_path(value: str) -> Path:
    """`value` as a path; `-`: standard output."""
    return STDOUT if value == STREAM else Path(value)


def text_argument(value: str) -> str:
    """`value`; `-`: the text of standard input, without its final line break.

    Raises:
        CommandError: standard input is not UTF-8 (read strictly, as in a UTF-8 locale).
        ValueError: it is not UTF-8 (read with surrogateescape, as in the C locale).
    """
    if value != STREAM:
        return value
    from bertlab.tokenizer.wordpiece import check_utf8

    try:
        text = sys.stdin.read().removesuffix("\n")
    except UnicodeDecodeError as error:
        raise CommandError(
            f"{STDIN_NAME} is not UTF-8 (byte 0x{error.object[error.start]:02x}); convert it "
            "first (e.g. iconv -t utf-8)"
        ) from error
    check_utf8([text], STDIN_NAME)
    return text
