"""Which files a corpus is, and how each is read: `open_corpus(paths, CorpusReading(...))`.

`bertlab pretrain`, `bertlab tokenizer train`, `bertlab neighbours word2vec` and the Python API
(`PretrainRun(corpus=...)`, `build_corpus`, `train_tokenizer`, `write_word_corpus`) all read a
corpus through `open_corpus`, so a path means the same thing everywhere:

- a file: read by the reader of its suffix (`.gz` aside: `reviews.jsonl.gz` is JSON Lines),
  plain text when no reader claims the suffix; `corpus_format` chooses one reader for all;
- a folder: a dataset saved by `datasets`' `save_to_disk`, or else every file in it and in its
  subfolders, in sorted order (hidden files and folders aside), each read by its suffix; a
  symbolic link to a folder that holds it (a loop) is refused;
- a pattern (`corpus/*.jsonl`, `shards/**/*.txt`) that names no file: the paths it matches,
  sorted (for the Python API and quoted shell arguments; the shell expands unquoted ones).

Each source is checked by content before anything is done with it (`CorpusSource.check`), so
that a file read the wrong way is refused in one line, not trained on.
"""

from __future__ import annotations

import glob
import logging
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bertlab.core.wording import Worded
from bertlab.corpus.readers import (
    DATASET_DICT_FILE,
    DATASET_STATE_FILE,
    READERS,
    LineChunk,
    ReadCounts,
    Reader,
)
from bertlab.corpus.text_files import check_mostly_utf8

logger = logging.getLogger(__name__)

CORPUS_FORMATS = ("auto", *READERS)  # auto: each file by its suffix, a saved dataset by its files
DEFAULT_TEXT_COLUMN = "text"  # `run_mlm.py`'s and `datasets`' usual name for it
# The languages whose rules split a corpus's lines into sentences and words
# (`bertlab.corpus.text_units`); "auto" chooses one for each file by its share of CJK
# ideographs (`bertlab.corpus.encode.sniff_lang`).
LANGS = ("auto", "en", "zh")
COMPRESSED_SUFFIX = ".gz"
_GLOB_CHARACTERS = re.compile(r"[*?[]")


@dataclass(frozen=True)
class CorpusReading:
    """How a corpus is read. Field names are the flags' (`--corpus-format`, `--text-column`).

    Attributes:
        corpus_format: one of CORPUS_FORMATS; "auto" chooses each file's reader by its suffix.
        text_column: the JSON field or the column (CSV, TSV, Parquet, dataset) that holds each
            document's text.
    """

    corpus_format: str = "auto"
    text_column: str = DEFAULT_TEXT_COLUMN

    def __post_init__(self) -> None:
        if self.corpus_format not in CORPUS_FORMATS:
            raise ValueError(
                f"unknown corpus format {self.corpus_format!r}; choose one of "
                f"{', '.join(CORPUS_FORMATS)}"
            )
        if not self.text_column:
            raise ValueError("the text column must be named")


@dataclass(frozen=True)
class CorpusSource:
    """One file (or saved dataset) of a corpus and the reader that reads it."""

    path: Path
    reader: Reader
    text_column: str
    is_chosen: bool = False  # the reader was named (`corpus_format`), not chosen by suffix

    @property
    def read_as(self) -> str:
        """How it is read, for the pre-flight report: "JSON Lines, field 'text'"."""
        if self.reader.kind is None:
            return self.reader.title
        return f"{self.reader.title}, {self.reader.kind} {self.text_column!r}"

    @property
    def key(self) -> str:
        """What decides its documents besides its bytes: the reader and its column."""
        if self.reader.kind is None:
            return self.reader.name
        return f"{self.reader.name}:{self.text_column}"

    def files(self) -> list[Path]:
        """The files on disk that hold it, in a fixed order."""
        if not self.path.is_dir():
            return [self.path]
        return sorted(path for path in self.path.rglob("*") if path.is_file())

    def size(self) -> int:
        """Bytes on disk (progress bars count them)."""
        return sum(path.stat().st_size for path in self.files())

    def check(self) -> None:
        """Refuse content that does not fit the reader (see `bertlab.corpus.readers`)."""
        self.reader.check(self.path, self.text_column, self.is_chosen)

    def chunks(self, counts: ReadCounts | None = None) -> Iterator[LineChunk]:
        """Chunks of raw lines in Google's layout; `counts` receives the records read."""
        return self.reader.chunks(self.path, self.text_column, counts or ReadCounts())

    def sample_text(self) -> str:
        """The start of its text (to decide its language)."""
        return self.reader.sample_text(self.path, self.text_column)


def open_corpus(
    paths: Sequence[str | os.PathLike], reading: CorpusReading | None = None
) -> list[CorpusSource]:
    """The sources of a corpus (files, folders, patterns), each checked by content.

    Example:
        >>> open_corpus(["reviews.jsonl.gz", "more/"])  # doctest: +SKIP
        [CorpusSource(path=PosixPath('reviews.jsonl.gz'), reader=<JSON Lines>, ...), ...]

    Raises:
        FileNotFoundError: a path that does not exist, a pattern that matches nothing.
        ValueError: no paths, a folder without files, a `datasets` folder of several splits, a
            link in a folder back to a folder that holds it, a file whose content does not fit
            its reader (one line naming the file and line).
        MissingPackageError: Parquet or a saved dataset without pyarrow installed.
    """
    reading = reading or CorpusReading()
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    if not paths:
        raise ValueError("no corpus files given")
    sources = [
        source
        for given in paths
        for path in _expanded(Path(given))
        for source in _sources(path, reading, is_given=True)
    ]
    for source in sources:
        source.check()
    return sources


def _expanded(path: Path) -> list[Path]:
    """A pattern that names no file: the paths it matches, sorted; any other path as it is."""
    if path.exists() or not _GLOB_CHARACTERS.search(str(path)):
        return [path]
    matches = sorted(glob.glob(str(path), recursive=True))
    if not matches:
        raise FileNotFoundError(f"no corpus file matches {path}")
    return [Path(match) for match in matches]


def _sources(
    path: Path, reading: CorpusReading, is_given: bool, walked: tuple[Path, ...] = ()
) -> list[CorpusSource]:
    """The sources at `path`; `walked`: the folders it lies in, as the walk went down them."""
    if path.is_dir():
        return _folder_sources(path, reading, is_given, walked)
    if not path.is_file():
        raise FileNotFoundError(f"corpus file not found: {path}")
    if reading.corpus_format == "dataset":
        raise ValueError(
            Worded(
                "{path} is a file; {set_corpus_format}'dataset' reads folders written by "
                "datasets' save_to_disk",
                path=path,
            )
        )
    reader = reader_for(path, reading.corpus_format)
    is_chosen = reading.corpus_format != "auto"
    return [CorpusSource(path, reader, reading.text_column, is_chosen)]


def _folder_sources(
    path: Path, reading: CorpusReading, is_given: bool, walked: tuple[Path, ...]
) -> list[CorpusSource]:
    real = path.resolve()
    loop = next((folder for folder in walked if folder.resolve() == real), None)
    if loop is not None:  # a link to a folder that holds it: the walk would never end
        raise ValueError(
            f"{path} is a symbolic link to {loop}, a folder that holds it: reading it would go "
            "round in a loop; remove the link, or give the folders to read"
        )
    if (path / DATASET_DICT_FILE).is_file():
        splits = sorted(entry.name for entry in path.iterdir() if entry.is_dir())
        raise ValueError(
            f"{path} holds a DatasetDict of several splits ({', '.join(splits)}); give the "
            f"folder of the one to read, e.g. {path / splits[0] if splits else path}"
        )
    if (path / DATASET_STATE_FILE).is_file() and reading.corpus_format in ("auto", "dataset"):
        return [CorpusSource(path, READERS["dataset"], reading.text_column)]
    if reading.corpus_format == "dataset":
        raise ValueError(
            f"{path} is not a folder written by datasets' save_to_disk (no {DATASET_STATE_FILE})"
        )
    entries = sorted(entry for entry in path.iterdir() if not entry.name.startswith("."))
    walked = (*walked, path)
    sources = [source for entry in entries for source in _sources(entry, reading, False, walked)]
    if is_given and not sources:
        raise ValueError(f"{path} is a folder without corpus files")
    return sources


def reader_for(path: Path, corpus_format: str = "auto") -> Reader:
    """The reader of a file: the format's, or with "auto" the one its suffix names (plain text
    when none does).

    Example:
        >>> reader_for(Path("reviews.jsonl.gz")).name, reader_for(Path("wiki_00")).name
        ('jsonl', 'text')
    """
    if corpus_format != "auto":
        return READERS[corpus_format]
    name = path.name.lower().removesuffix(COMPRESSED_SUFFIX)
    suffix = Path(name).suffix
    for reader in READERS.values():
        if suffix in reader.suffixes:
            return reader
    return READERS["text"]


def corpus_lines(sources: Sequence[CorpusSource]) -> Iterator[str]:
    """The non-blank lines of every source's text, stripped, as `text_files.read_lines` (beside)
    gives those of plain text: a line that is not UTF-8 is skipped (counted, the first one's place
    logged), and a source mostly not UTF-8 is refused.

    Raises:
        ValueError: as `open_corpus`, or a line that does not fit its reader.
    """
    for source in sources:
        num_lines = num_skipped = 0
        for chunk in source.chunks():
            for raw_line in chunk.lines:
                try:
                    line = raw_line.decode("utf-8").strip()
                except UnicodeDecodeError:
                    num_skipped += 1
                    continue
                if line:
                    num_lines += 1
                    yield line
        check_mostly_utf8(source.path, num_lines, num_skipped)
        if num_skipped:
            logger.warning("skipped %d line(s) of %s that are not UTF-8", num_skipped, source.path)
