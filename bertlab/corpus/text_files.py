"""Corpus files: plain or gzipped UTF-8 text, checked the same way by every command that reads one.

`bertlab tokenizer train`, `bertlab pretrain` (the tokenized corpus) and the word vectors all read
their text files here (through `bertlab.corpus.readers`, which reads every format), so a
binary file, a broken or truncated gzip file and a file mostly not UTF-8 are refused alike, each
with one line naming the file; `read_lines` (a command's input file) also refuses a missing file
and a directory:

- `check_files`: the files exist and are files (a directory is named as one);
- `open_bytes`: the file's bytes, decompressed when it starts with gzip's magic number (whatever
  its name), a binary file (NUL bytes near its start) refused before anything is read further;
- `read_errors`: gzip's and zlib's errors while reading (not gzip, truncated, CRC mismatch),
  which `gzip_error` turns into the one-line `ValueError`;
- `check_mostly_utf8`: after reading, a file whose lines are mostly not UTF-8 is refused;
- `read_lines`: all of it for a reader that wants the plain lines; a line that is not UTF-8 is
  skipped (and the first one's place logged), or refused with its place (`file:line`);
- `bounded_lines` and `cut_line`: a corpus's lines, each longer than MAX_LINE_BYTES cut into
  pieces (a dump in one line, a record of megabytes), read a piece at a time.
"""

from __future__ import annotations

import contextlib
import gzip
import logging
import os
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

logger = logging.getLogger(__name__)

GZIP_MAGIC = b"\x1f\x8b"
SNIFF_BYTES = 65536  # the start of each file inspected for binary content
READ_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)  # not gzip, truncated, corrupt
# A corpus line longer than this is read and handed on in pieces of at most this many bytes, cut
# after a space: a paragraph is rarely a tenth of it, while a dump without line breaks (50 MB in
# one line) made the tokenizer's regular expressions give up ("Onig: retry-limit-in-match over",
# a Rust panic) after 2.4 GB. A piece is a line of the same document.
MAX_LINE_BYTES = 1 << 16
BLANKS = (b" ", b"\t", b"\r", b"\x0b", b"\x0c")  # where a long line is cut, after the last one


def check_files(paths: Sequence[str | os.PathLike], what: str = "corpus") -> list[Path]:
    """`paths` as Paths, each an existing file.

    Raises:
        ValueError: no paths, or a directory among them.
        FileNotFoundError: a path that does not exist.
    """
    paths = [Path(path) for path in paths]
    if not paths:
        raise ValueError(f"no {what} files given")
    for path in paths:
        if path.is_dir():
            raise ValueError(f"{path} is a directory; pass the {what} files in it")
        if not path.is_file():
            raise FileNotFoundError(f"{what} file not found: {path}")
    return paths


def gzip_error(path: Path, error: BaseException) -> ValueError:
    """The one-line error for a gzip or zlib failure while reading `path`."""
    return ValueError(f"{path} is not a readable gzip file ({error or type(error).__name__})")


@contextlib.contextmanager
def open_bytes(path: Path) -> Iterator[tuple[BinaryIO, BinaryIO]]:
    """(stream, raw): the file's bytes, decompressed when gzipped, and the raw file under them
    (`raw.tell()` is how far the file has been read, for progress bars). Errors while reading
    `stream` are `READ_ERRORS`; `gzip_error` words them.

    Raises:
        ValueError: the file looks binary (NUL bytes in its first SNIFF_BYTES bytes), or it is a
            gzip file whose start cannot be read.
    """
    with contextlib.ExitStack() as stack:
        raw = stack.enter_context(open(path, "rb"))
        is_gzip = raw.read(len(GZIP_MAGIC)) == GZIP_MAGIC
        raw.seek(0)
        stream = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb")) if is_gzip else raw
        try:
            head = stream.read(SNIFF_BYTES)
        except READ_ERRORS as error:
            raise gzip_error(path, error) from error
        if b"\x00" in head:
            raise ValueError(f"{path} looks binary (NUL bytes in its first {SNIFF_BYTES} bytes)")
        stream.seek(0)
        yield stream, raw


def read_head(path: Path, num_bytes: int = SNIFF_BYTES) -> bytes:
    """The first `num_bytes` bytes of the file's text (decompressed), after `open_bytes`' checks."""
    with open_bytes(path) as (stream, _):
        try:
            return stream.read(num_bytes)
        except READ_ERRORS as error:
            raise gzip_error(path, error) from error


def check_mostly_utf8(path: Path, num_lines: int, num_skipped: int) -> None:
    """Refuse a file whose lines are mostly not UTF-8 (`num_skipped` of them could not be
    decoded, `num_lines` could).

    Raises:
        ValueError: more skipped lines than decoded ones.
    """
    if num_skipped > num_lines:
        raise ValueError(
            f"{path} is mostly not UTF-8 ({num_skipped} of {num_skipped + num_lines} lines); "
            "convert it first (e.g. iconv -t utf-8)"
        )


def not_utf8_error(path: Path, line_number: int, error: UnicodeDecodeError) -> ValueError:
    """The one-line error for line `line_number` (1-based) of `path` that is not UTF-8."""
    return ValueError(
        f"{path}:{line_number}: not UTF-8 (byte 0x{error.object[error.start]:02x} at byte "
        f"{error.start + 1} of the line); convert the file first (e.g. iconv -t utf-8)"
    )


def read_lines(paths: Sequence[str | os.PathLike], do_skip_not_utf8: bool = True) -> Iterator[str]:
    """The non-blank lines of the files, stripped.

    Args:
        paths: the files.
        do_skip_not_utf8: skip a line that is not UTF-8 (the number skipped and the first one's
            place are logged); False: refuse it, for readers whose lines must all be there.

    Raises:
        FileNotFoundError: a file is missing.
        ValueError: a directory, a binary, broken gzip or mostly non-UTF-8 file, or (unless
            `do_skip_not_utf8`) a line that is not UTF-8, named `file:line`.
    """
    for path in check_files(paths):
        num_lines = num_skipped = 0
        first_skipped = None
        try:
            with open_bytes(path) as (stream, _):
                for line_number, raw_line in enumerate(stream, 1):
                    try:
                        line = raw_line.decode("utf-8").strip()
                    except UnicodeDecodeError as error:
                        if not do_skip_not_utf8:
                            raise not_utf8_error(path, line_number, error) from error
                        num_skipped += 1
                        first_skipped = first_skipped or line_number
                        continue
                    if line:
                        num_lines += 1
                        yield line
        except READ_ERRORS as error:
            raise gzip_error(path, error) from error
        check_mostly_utf8(path, num_lines, num_skipped)
        if num_skipped:
            logger.warning(
                "skipped %d line(s) that are not UTF-8, the first at %s:%d",
                num_skipped,
                path,
                first_skipped,
            )


def cut_line(line: bytes, limit: int = MAX_LINE_BYTES) -> list[bytes]:
    """`line` (without its line break), in pieces of at most `limit` bytes when it is longer:
    each cut after the last blank of the piece's bytes, or, where it has none, before the last
    character that fits (a UTF-8 character is never split). Pieces of blanks only are left out
    (a blank line would end the document).

    Example:
        >>> cut_line(b"one two three", limit=8)
        [b'one two ', b'three']
        >>> cut_line(b"abcdefghij", limit=4)
        [b'abcd', b'efgh', b'ij']
    """
    if len(line) <= limit:
        return [line]
    pieces = []
    while len(line) > limit:
        cut = _cut_at(line, limit)
        pieces.append(line[:cut])
        line = line[cut:]
    pieces.append(line)
    return [piece for piece in pieces if piece.strip()]


def bounded_lines(stream: BinaryIO, limit: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of `stream` as iterating it gives them, but a line longer than `limit` bytes
    (its line break aside) in the pieces `cut_line` makes of it, read at most `limit` + 2 bytes
    at a time: a line of any length takes no more memory than that."""
    while line := stream.readline(limit + 2):  # + the line break, which may be 2 bytes
        if len(line.rstrip(b"\r\n")) <= limit:
            yield line
        else:
            yield from _pieces(stream, line, limit)


def _pieces(stream: BinaryIO, start: bytes, limit: int) -> Iterator[bytes]:
    """`cut_line`'s pieces of the long line that begins with `start`, the rest read from
    `stream` as it is needed."""
    buffer = start
    while True:
        is_ended = buffer.endswith(b"\n")
        content = buffer.rstrip(b"\r\n") if is_ended else buffer
        while len(content) > limit:  # the first `limit` bytes are known: a piece can be cut
            cut = _cut_at(content, limit)
            if content[:cut].strip():
                yield content[:cut]
            content = content[cut:]
        more = b"" if is_ended else stream.readline(limit + 2 - len(content))
        if not more:  # the line ends
            if content.strip():
                yield content
            return
        buffer = content + more


def _cut_at(line: bytes, limit: int) -> int:
    """Where the first piece of a line longer than `limit` bytes ends (`cut_line`)."""
    blank = max(line.rfind(character, 0, limit) for character in BLANKS)
    if blank >= 0:
        return blank + 1
    cut = limit
    while cut > 0 and line[cut] & 0xC0 == 0x80:  # inside a character (a continuation byte)
        cut -= 1
    return cut or limit
