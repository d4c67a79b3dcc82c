"""File checks shared by the task readers: each error names the file and, if known, the line."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path


def at(path: Path | str, line: int | None = None) -> str:
    """`path:line`, the prefix of every reader error message."""
    return f"{path}:{line}" if line is not None else str(path)


def existing_file(path: Path | str) -> Path:
    """The path as a `Path`, after checking that it is a file.

    Raises:
        FileNotFoundError: naming the path when it is missing or is not a file.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    return path


def require_examples(examples: list, path: Path | str) -> list:
    """The examples unchanged; an empty list means an empty file, which is an error."""
    if not examples:
        raise ValueError(f"{path}: the file holds no examples")
    return examples


def read_utf8(path: Path | str) -> str:
    """The text of a task file, a UTF-8 byte-order mark dropped.

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: the file is not UTF-8, naming the first line that is not.
    """
    path = existing_file(path)
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise ValueError(
            f"{at(path, line)}: not UTF-8 (byte {data[error.start]:#04x}); convert the file "
            "first (e.g. iconv -t utf-8)"
        ) from None


def text_lines(path: Path | str, newline: str | None = None) -> io.StringIO:
    """`read_utf8`'s text as a file of lines: `newline` as for `open` ("" for the csv module)."""
    return io.StringIO(read_utf8(path), newline=newline)


def read_json(path: Path | str) -> object:
    """The parsed JSON document; malformed JSON raises a ValueError naming file, line and column."""
    text = read_utf8(path)
    if not text.strip():
        raise ValueError(f"{path}: the file is empty")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{at(path, error.lineno)}: malformed JSON at column {error.colno}: {error.msg}"
        ) from None


def read_jsonl(path: Path | str) -> Iterator[tuple[int, dict]]:
    """Yield (1-based line number, object) for each non-blank line of a JSON Lines file.

    Raises:
        ValueError: a line that is not JSON or not a JSON object, naming file and line.
    """
    with text_lines(path) as file:
        for line_number, line in enumerate(file, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"{at(path, line_number)}: malformed JSON at column {error.colno}: {error.msg}"
                ) from None
            if not isinstance(record, dict):
                raise ValueError(f"{at(path, line_number)}: expected a JSON object per line")
            yield line_number, record
