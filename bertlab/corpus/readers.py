"""Corpus readers: each format users keep unlabeled text in, read as Google's layout.

`READERS` is the one table of formats (`bertlab.corpus.sources` chooses the entry for a file
or folder):

    text     Google's layout as it is: one sentence or paragraph a line, a blank line between
             documents (`.txt`, and any name no other reader claims)
    jsonl    JSON Lines (`.jsonl`, `.json`, `.ndjson`): one object a line, one document each
    csv      comma-separated, standard quoting (`.csv`): a header row, then one document a row
    tsv      tab-separated, no quoting (`.tsv`, as GLUE's and `bertlab finetune`'s TSV)
    parquet  a text column of a Parquet file (`.parquet`), streamed a batch of rows at a time
    dataset  a folder written by Hugging Face `datasets`' `save_to_disk`

The text formats may be gzip-compressed (`bertlab.corpus.text_files` finds gzip by its magic
number). Parquet and saved datasets need pyarrow, imported where they are read.

A record (a JSON object, a row) is one document. Its text is cut at its line breaks into the
lines of Google's layout, blank lines left out so that the record stays one document, and a
blank line follows it (`document_lines`). What happens next, splitting each line into sentences
and tokenizing them, is the plain-text path: equal text gives equal tokens in every format.

Never a silent misread. `Reader.check` reads the start of a file before anything else is done
with it, and reading refuses what does not fit the format, each in one line naming the file,
the line (or row) and the setting that fixes it: JSON objects or a header row read as plain
text, a line that is not a JSON object, a missing field or column, a row whose fields do not
match the header, a text column that is empty in most rows, a value that is not text.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from bertlab.core.optional import require
from bertlab.core.wording import Worded
from bertlab.corpus.text_files import (
    READ_ERRORS,
    SNIFF_BYTES,
    bounded_lines,
    cut_line,
    gzip_error,
    not_utf8_error,
    open_bytes,
    read_head,
)

LINES_PER_CHUNK = 2000  # lines handed on at once (about 0.5 MB of Wikipedia paragraphs)
HEAD_RECORDS = 1000  # records (or plain-text lines) a file is checked on before it is read
SAMPLE_CHARACTERS = 65536  # text read to decide a file's language
PARQUET_MAGIC = b"PAR1"  # the first (and last) four bytes of a Parquet file
PARQUET_BUFFER_BYTES = 1 << 20  # pyarrow reads pages through this buffer: a row group streams
ROWS_PER_BATCH = 1000  # Parquet and Arrow rows decoded at a time
# pyarrow's allocator keeps freed memory for reuse, and more of it the longer a read goes on
# (+64 MB over 390 MB of Parquet; given back every 10 batches: +31 MB)
RELEASE_EVERY_BATCHES = 10
# A text that is empty in more than this share of the records is not the text: refused.
MAX_EMPTY_FRACTION = 0.5
HEADER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a column name, e.g. "review", "label"
JSON_KINDS = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
DATASET_STATE_FILE = "state.json"  # written by `Dataset.save_to_disk` beside its .arrow files
DATASET_DICT_FILE = "dataset_dict.json"  # written by `DatasetDict.save_to_disk`


@dataclass(frozen=True)
class LineChunk:
    """Raw lines in Google's layout (bytes; an empty line is a document break), and how far the
    source has been read: `position` of its `size` (bytes, or rows scaled to bytes)."""

    lines: list[bytes]
    position: int


@dataclass
class ReadCounts:
    """What a record reader saw in one source (none for plain text, which has no records)."""

    records: int = 0
    empty_records: int = 0


def document_lines(text: str | None) -> list[bytes]:
    """A record's text as the lines of one document: cut at its line breaks, lines that are
    blank left out (in Google's layout a blank line would end the document), UTF-8 encoded; a
    line of megabytes in pieces, as plain text's (`text_files.cut_line`).

    Example:
        >>> document_lines("First paragraph. Two sentences.\\n\\nSecond paragraph.\\n")
        [b'First paragraph. Two sentences.', b'Second paragraph.']
        >>> document_lines(None), document_lines("  \\n")
        ([], [])
    """
    if not text:
        return []
    # Lone surrogates (a JSON escape such as "\\ud800") stay as bytes that are not UTF-8: the
    # line is skipped and counted as not UTF-8, as a plain-text line would be.
    encoded = text.encode("utf-8", errors="surrogatepass")
    lines = (line.rstrip(b"\r") for line in encoded.split(b"\n") if line.strip())
    return [piece for line in lines for piece in cut_line(line)]


def _words(kind: str) -> tuple[str, str]:
    """The setting that names a reader's text (`{text_field}`/`{text_column}`) and its value."""
    if kind == "field":
        return "text_field", "set_text_field"
    return "text_column", "set_text_column"


def longest_text(values: dict[str, object]) -> str | None:
    """The name whose value is the longest string: the likeliest to hold a record's text.

    Example:
        >>> longest_text({"id": 7, "title": "Short", "body": "A longer text."})
        'body'
    """
    texts = [(len(value), name) for name, value in values.items() if isinstance(value, str)]
    return max(texts)[1] if texts else None


def missing_text_error(
    where: str, column: str, kind: str, names: Iterable[str], suggested: str | None
) -> ValueError:
    """No field or column `column` at `where`: the names there, and the one to read instead."""
    names = list(names)
    setting, set_setting = _words(kind)
    template = "{where}: no {kind} {column!r} ({" + setting + "}); its {kind}s are {names}"
    if suggested is not None:
        template += "; to read {suggested!r}, give {" + set_setting + "}{suggested!r}"
    shown = ", ".join(repr(name) for name in names) or "none"
    return ValueError(
        Worded(template, where=where, kind=kind, column=column, names=shown, suggested=suggested)
    )


def _not_text_error(where: str, column: str, kind: str, what: str) -> ValueError:
    setting, _ = _words(kind)
    return ValueError(
        Worded(
            "{where}: {kind} {column!r} ({" + setting + "}) holds {what}, not text",
            where=where,
            kind=kind,
            column=column,
            what=what,
        )
    )


# --- the readers -------------------------------------------------------------------------------


class Reader:
    """A corpus format: how a file of it is checked and read.

    Attributes:
        name: the format's name (`corpus_format`, `--corpus-format`).
        title: its name in the pre-flight report.
        suffixes: the file names it reads when the format is chosen by suffix.
        kind: what names the text, "field" or "column"; None: the whole text is read.
    """

    name = ""
    title = ""
    suffixes: tuple[str, ...] = ()
    kind: str | None = None

    def __repr__(self) -> str:
        return f"<{self.title}>"

    def check(self, path: Path, column: str, is_chosen: bool) -> None:
        """Refuse a file whose start does not fit this format, before it is read; `is_chosen`:
        the format was named (`corpus_format`), not guessed from the file's name."""
        raise NotImplementedError

    def chunks(self, path: Path, column: str, counts: ReadCounts) -> Iterator[LineChunk]:
        """The file as chunks of raw lines in Google's layout."""
        raise NotImplementedError

    def sample_text(self, path: Path, column: str) -> str:
        """The start of the file's text, to decide its language."""
        raise NotImplementedError


class TextReader(Reader):
    """Plain text in Google's layout, read line by line as it is."""

    name, title, suffixes = "text", "plain text", (".txt",)

    def check(self, path: Path, column: str, is_chosen: bool) -> None:
        with open(path, "rb") as file:
            if file.read(len(PARQUET_MAGIC)) == PARQUET_MAGIC:
                raise ValueError(
                    Worded(
                        "{path} is a Parquet file, not plain text; name it .parquet or give "
                        "{set_corpus_format}'parquet'",
                        path=path,
                    )
                )
        head = read_head(path)  # a binary or broken gzip file is refused here
        if is_chosen:  # read as plain text, whatever it looks like
            return
        lines = head.decode("utf-8", errors="replace").split("\n")
        if len(head) == SNIFF_BYTES:  # the last line may be cut short
            lines.pop()
        numbered = [(n, line.strip()) for n, line in enumerate(lines, 1) if line.strip()]
        numbered = numbered[:HEAD_RECORDS]
        self._refuse_json(path, numbered)
        if numbered and numbered[0][0] == 1:  # a header row is the file's first line
            self._refuse_header(path, numbered[0][1], numbered[1:2])

    @staticmethod
    def _refuse_json(path: Path, numbered: list[tuple[int, str]]) -> None:
        """JSON objects read as prose (the keys would become words): refused when most of the
        first lines are objects."""
        objects = [n for n, line in numbered if _is_json_object(line)]
        if objects and len(objects) * 2 > len(numbered):
            raise ValueError(
                Worded(
                    "{where}: a JSON object where plain text was expected ({count} of the first "
                    "{total} lines are); name the file .jsonl (or give "
                    "{set_corpus_format}'jsonl') to read each object's text ({text_field}), or "
                    "give {set_corpus_format}'text' to read the lines as they are",
                    where=f"{path}:{objects[0]}",
                    count=len(objects),
                    total=len(numbered),
                )
            )

    @staticmethod
    def _refuse_header(path: Path, first: str, following: list[tuple[int, str]]) -> None:
        """A header row read as prose: the first line is column names (`review,sentiment`)
        and the next line has as many separators."""
        for separator, name in (("\t", "tsv"), (",", "csv")):
            names = [field.strip('"') for field in first.split(separator)]
            if len(names) < 2 or not all(HEADER_NAME.match(field) for field in names):
                continue
            if following and following[0][1].count(separator) < len(names) - 1:
                continue
            raise ValueError(
                Worded(
                    "{where}: a header row ({first}) where plain text was expected; name the "
                    "file .{name} (or give {set_corpus_format}'{name}') to read one column's "
                    "text ({text_column}), or give {set_corpus_format}'text' to read the lines "
                    "as they are",
                    where=f"{path}:1",
                    first=repr(first[:60]),
                    name=name,
                )
            )

    def chunks(self, path: Path, column: str, counts: ReadCounts) -> Iterator[LineChunk]:
        try:
            with open_bytes(path) as (stream, raw):
                lines_read = bounded_lines(stream)  # a line of megabytes in pieces
                while lines := list(itertools.islice(lines_read, LINES_PER_CHUNK)):
                    yield LineChunk(lines, raw.tell())
        except READ_ERRORS as error:
            raise gzip_error(path, error) from error

    def sample_text(self, path: Path, column: str) -> str:
        return read_head(path).decode("utf-8", errors="ignore")


def _is_json_object(line: str) -> bool:
    if not (line.startswith("{") and line.endswith("}")):
        return False
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return False
    return isinstance(value, dict) and bool(value)


class RecordReader(Reader):
    """A format of records, one document each; subclasses yield (where, text, position)."""

    def records(self, path: Path, column: str) -> Iterator[tuple[str, str | None, int]]:
        """(`file:line` or `file: row N`, the record's text or None, position)."""
        raise NotImplementedError

    def check(self, path: Path, column: str, is_chosen: bool) -> None:
        counts = ReadCounts()
        first_empty = None
        for where, text, _ in itertools.islice(self.records(path, column), HEAD_RECORDS):
            counts.records += 1
            if not document_lines(text):
                counts.empty_records += 1
                first_empty = first_empty or where
        self._refuse_mostly_empty(column, counts, first_empty)

    def chunks(self, path: Path, column: str, counts: ReadCounts) -> Iterator[LineChunk]:
        lines: list[bytes] = []
        first_empty, position = None, 0
        for where, text, position in self.records(path, column):
            counts.records += 1
            document = document_lines(text)
            if not document:
                counts.empty_records += 1
                first_empty = first_empty or where
                continue
            lines += document
            lines.append(b"")  # the blank line that ends the document
            if len(lines) >= LINES_PER_CHUNK:
                yield LineChunk(lines, position)
                lines = []
        self._refuse_mostly_empty(column, counts, first_empty)
        if lines:
            yield LineChunk(lines, position)

    def _refuse_mostly_empty(self, column: str, counts: ReadCounts, first_empty: str | None):
        if counts.empty_records <= MAX_EMPTY_FRACTION * counts.records:
            return
        setting, _ = _words(self.kind)
        raise ValueError(
            Worded(
                "{where}: {kind} {column!r} ({" + setting + "}) is empty here and in "
                "{others:,} more of the {total:,} records; give {" + setting + "} the "
                "{kind} that holds the text",
                where=first_empty,
                kind=self.kind,
                column=column,
                others=counts.empty_records - 1,
                total=counts.records,
            )
        )

    def sample_text(self, path: Path, column: str) -> str:
        texts, size = [], 0
        for _, text, _ in self.records(path, column):
            if text:
                texts.append(text)
                size += len(text)
            if size >= SAMPLE_CHARACTERS:
                break
        return "\n".join(texts)[:SAMPLE_CHARACTERS]


def _decoded_lines(path: Path, stream: Iterable[bytes]) -> Iterator[str]:
    """The file's lines as text, a byte-order mark dropped; a line that is not UTF-8 is refused
    with its place (a record cannot be read in part)."""
    for line_number, raw_line in enumerate(stream, 1):
        try:
            line = raw_line.decode("utf-8")
        except UnicodeDecodeError as error:
            raise not_utf8_error(path, line_number, error) from error
        yield line.removeprefix("\ufeff") if line_number == 1 else line


class JsonLinesReader(RecordReader):
    """JSON Lines: one object a line; the field `column` is the document's text."""

    name, title, suffixes, kind = "jsonl", "JSON Lines", (".jsonl", ".json", ".ndjson"), "field"

    def records(self, path: Path, column: str) -> Iterator[tuple[str, str | None, int]]:
        try:
            with open_bytes(path) as (stream, raw):
                for line_number, line in enumerate(_decoded_lines(path, stream), 1):
                    if line.strip():
                        text = _record_text(path, line_number, line, column)
                        yield f"{path}:{line_number}", text, raw.tell()
        except READ_ERRORS as error:
            raise gzip_error(path, error) from error


def _record_text(path: Path, line_number: int, line: str, column: str) -> str | None:
    where = f"{path}:{line_number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"{where}: not a JSON object (malformed JSON at column {error.colno}: {error.msg}); "
            "JSON Lines hold one object a line"
        ) from None
    if not isinstance(record, dict):
        kind = JSON_KINDS.get(type(record), "a number")
        raise ValueError(f"{where}: {kind}, not a JSON object; JSON Lines hold one object a line")
    if column not in record:
        raise missing_text_error(where, column, "field", record, longest_text(record))
    text = record[column]
    if text is not None and not isinstance(text, str):
        raise _not_text_error(where, column, "field", JSON_KINDS.get(type(text), "a number"))
    return text


@contextlib.contextmanager
def _long_fields() -> Iterator[None]:
    """The csv module refuses fields over 128 KiB; a document (a book, a long article) may be
    larger. The limit is the module's, so it is raised only while a corpus file is read."""
    limit = csv.field_size_limit()
    csv.field_size_limit(sys.maxsize)
    try:
        yield
    finally:
        csv.field_size_limit(limit)


class DelimitedReader(RecordReader):
    """CSV or TSV with a header row: the column `column` of each row is a document's text."""

    kind = "column"

    def __init__(self, name: str, title: str, suffixes: tuple, delimiter: str, quoting: int):
        self.name, self.title, self.suffixes = name, title, suffixes
        self.delimiter, self.quoting = delimiter, quoting

    def records(self, path: Path, column: str) -> Iterator[tuple[str, str | None, int]]:
        try:
            with open_bytes(path) as (stream, raw), _long_fields():
                yield from self._rows(path, column, stream, raw)
        except READ_ERRORS as error:
            raise gzip_error(path, error) from error

    def _rows(self, path: Path, column: str, stream, raw) -> Iterator[tuple[str, str, int]]:
        reader = csv.reader(
            _decoded_lines(path, stream),
            delimiter=self.delimiter,
            quoting=self.quoting,
            strict=True,  # a stray quote is an error naming its line, not a merged row
        )
        try:
            header = next(reader, None)
            if not header:
                raise ValueError(f"{path}:1: no header row; a {self.title} corpus starts with one")
            if column not in header:
                self._refuse_other_delimiter(path, header)
                first = next(reader, None)
                values = dict(zip(header, first, strict=False)) if first else {}
                suggested = longest_text(values)
                raise missing_text_error(f"{path}:1", column, "column", header, suggested)
            index = header.index(column)
            for row in reader:
                if not row:
                    continue
                if len(row) != len(header):
                    raise ValueError(
                        f"{path}:{reader.line_num}: {len(row)} fields where the header has "
                        f"{len(header)}{self._why_fields_differ()}"
                    )
                yield f"{path}:{reader.line_num}", row[index], raw.tell()
        except csv.Error as error:
            raise ValueError(f"{path}:{reader.line_num}: {error}") from None

    def _refuse_other_delimiter(self, path: Path, header: list[str]) -> None:
        """A TSV named .csv (a header of one field, 'id\\ttext'), or a CSV named .tsv."""
        other = READERS["tsv" if self.name == "csv" else "csv"]
        names = header[0].split(other.delimiter) if len(header) == 1 else []
        if len(names) > 1 and all(HEADER_NAME.match(name.strip('"')) for name in names):
            template = (
                "{where}: the header row {first!r} is cut by {looks}s: the file looks "
                "{looks}-separated; name it {suffix} or give {set_corpus_format}'{name}'"
            )
            looks = "tab" if other.delimiter == "\t" else "comma"
            where, first, suffix = f"{path}:1", header[0], other.suffixes[0]
            raise ValueError(Worded(template, where=where, first=first, looks=looks,
                                    suffix=suffix, name=other.name))  # fmt: skip

    def _why_fields_differ(self) -> str:
        if self.quoting == csv.QUOTE_NONE:
            return f" (a tab in a text? {self.title} is read without quoting: use CSV for that)"
        return " (a comma in a text that is not quoted?)"


def _pyarrow(what: str) -> ModuleType:
    return require("pyarrow", what, "pyarrow")


def _is_text_type(pyarrow: ModuleType, data_type) -> bool:
    types = pyarrow.types
    if types.is_dictionary(data_type):  # pandas' categorical strings
        data_type = data_type.value_type
    return (
        types.is_string(data_type)
        or types.is_large_string(data_type)
        or (hasattr(types, "is_string_view") and types.is_string_view(data_type))
    )


def _column_texts(pyarrow: ModuleType, batches: Iterable, index: int) -> Iterator[str | None]:
    """The values of column `index` of record batches. The memory pyarrow's allocator keeps is
    given back every RELEASE_EVERY_BATCHES batches and when the read ends: the check and the
    language sample read a file's first rows before the tokenizing workers are forked, and what
    the allocator kept then would be copied into every worker."""
    pool = pyarrow.default_memory_pool()
    try:
        for count, batch in enumerate(batches, 1):
            yield from batch.column(index).to_pylist()
            if count % RELEASE_EVERY_BATCHES == 0:
                pool.release_unused()
    finally:
        pool.release_unused()


def _check_text_type(pyarrow: ModuleType, schema, where: str, column: str) -> None:
    if column not in schema.names:
        texts = [field.name for field in schema if _is_text_type(pyarrow, field.type)]
        suggested = texts[0] if texts else None
        raise missing_text_error(where, column, "column", schema.names, suggested)
    data_type = schema.field(column).type
    if not _is_text_type(pyarrow, data_type):
        raise _not_text_error(where, column, "column", f"values of type {data_type}")


class ParquetReader(RecordReader):
    """A text column of a Parquet file, read a batch of rows at a time: pages stream through a
    small buffer, so a row group as large as the file is never in memory whole."""

    name, title, suffixes, kind = "parquet", "Parquet", (".parquet", ".pq"), "column"

    def _open(self, path: Path, column: str):
        pyarrow = _pyarrow("reading Parquet corpora")
        parquet = require("pyarrow.parquet", "reading Parquet corpora", "pyarrow")
        try:
            file = parquet.ParquetFile(path, buffer_size=PARQUET_BUFFER_BYTES, pre_buffer=False)
        except (pyarrow.ArrowException, OSError) as error:
            raise ValueError(f"{path} is not a readable Parquet file ({error})") from None
        _check_text_type(pyarrow, file.schema_arrow, str(path), column)
        return pyarrow, file

    def records(self, path: Path, column: str) -> Iterator[tuple[str, str | None, int]]:
        pyarrow, file = self._open(path, column)
        with file:
            size, num_rows = path.stat().st_size, max(file.metadata.num_rows, 1)
            num_groups, row = file.num_row_groups, 0
            for group in range(num_groups):
                # One column read in order: no decoding threads (the tokenizing workers have the
                # cores), which also keeps their memory out of the workers forked after a check.
                batches = file.iter_batches(
                    ROWS_PER_BATCH, row_groups=[group], columns=[column], use_threads=False
                )
                try:
                    for text in _column_texts(pyarrow, batches, 0):
                        row += 1
                        yield f"{path}: row {row}", text, size * row // num_rows
                except (pyarrow.ArrowException, OSError) as error:
                    raise ValueError(
                        f"{path}: row group {group + 1} of {num_groups} (after row {row}) cannot "
                        f"be read ({error})"
                    ) from None


class DatasetReader(RecordReader):
    """A folder written by `datasets`' `Dataset.save_to_disk`: `state.json` lists its Arrow
    files (IPC streams), read here a batch at a time with pyarrow. Not with `load_from_disk`,
    which memory-maps them: each page read would stay in the resident size (measured: +350 MB
    over a 390 MB dataset, against none streamed), and importing `datasets` adds 80 MB more."""

    name, title, suffixes, kind = "dataset", "saved dataset", (), "column"

    @staticmethod
    def arrow_files(path: Path) -> list[Path]:
        """The dataset's Arrow files, in its rows' order.

        Raises:
            ValueError: no readable `state.json`, or one that lists no file.
        """
        state_path = path / DATASET_STATE_FILE
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
            files = [path / entry["filename"] for entry in state["_data_files"]]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise ValueError(
                f"{state_path} cannot be read ({error}); is {path} a folder written by "
                "datasets' save_to_disk?"
            ) from None
        if not files:
            raise ValueError(f"{state_path} lists no data files")
        return files

    def records(self, path: Path, column: str) -> Iterator[tuple[str, str | None, int]]:
        pyarrow = _pyarrow("reading folders saved by datasets' save_to_disk")
        done, row = 0, 0
        for file in self.arrow_files(path):
            try:
                with pyarrow.OSFile(str(file)) as source:
                    options = pyarrow.ipc.IpcReadOptions(use_threads=False)  # as Parquet's
                    stream = pyarrow.ipc.open_stream(source, options=options)
                    _check_text_type(pyarrow, stream.schema, str(file), column)
                    index = stream.schema.get_field_index(column)
                    for text in _column_texts(pyarrow, stream, index):
                        row += 1
                        yield f"{path}: row {row}", text, done + source.tell()
                done += file.stat().st_size
            except (pyarrow.ArrowException, OSError) as error:
                raise ValueError(f"{file} cannot be read (after row {row}): {error}") from None


READERS: dict[str, Reader] = {
    reader.name: reader
    for reader in (
        TextReader(),
        JsonLinesReader(),
        DelimitedReader("csv", "CSV", (".csv",), ",", csv.QUOTE_MINIMAL),
        DelimitedReader("tsv", "TSV", (".tsv", ".tab"), "\t", csv.QUOTE_NONE),
        ParquetReader(),
        DatasetReader(),
    )
}
