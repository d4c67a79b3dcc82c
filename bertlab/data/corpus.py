"""The on-disk pre-training corpus: raw text tokenized once into memory-mapped arrays.

Input is Google's layout (google-research/bert `create_pretraining_data.py`): plain-text files,
`.txt` or gzipped, one sentence or paragraph per line, a blank line between documents (a new file
also starts a new document). Each line is split into sentences (`split_sentences`, English or
Chinese rules, chosen per file) and every sentence is tokenized without special tokens.

`build_corpus` writes one directory:

    token_ids.bin         (T,) uint16 (uint32 when an id exceeds 65535): all sentences, end to end
    sentence_offsets.npy  (S + 1,) int64: start of each sentence in token_ids, then T
    document_offsets.npy  (D + 1,) int64: index of each document's first sentence, then S
    word_starts.bin       (T,) bool: whether each token starts a word (only with `whole_word`)
    meta.json             format version, counts, dtype, fingerprints, the statistics of the read

Memory stays bounded: lines are read in chunks, a few chunks are in flight at a time, and results
are appended to the files as they arrive. Chunks are split and tokenized by a pool of worker
processes (one per core), so the Python sentence splitter and the Rust tokenizer both use every
core. The directory is assembled under a temporary name next to `out_dir` and renamed into place
at the end, so a failure never leaves a half-written corpus.

Cache: `meta.json` records two fingerprints. The tokenizer fingerprint hashes the vocabulary, the
normalization switches, the `tokenizers` version and this format's version. The corpus fingerprint
hashes the *content* of the files, in order (BLAKE2b over the stored bytes, compressed or not).
Content rather than path/size/mtime: a copied, moved or touched corpus is still recognised, an
edit that keeps size and mtime is not missed, and reading the bytes costs about 1% of tokenizing
them. Same fingerprints and options: `build_corpus` opens the existing directory and returns.

Lines that are not valid UTF-8 are skipped and counted, as in tokenizer training; a file that is
binary (NUL bytes) or mostly not UTF-8 is refused.
"""

# Shapes: T tokens in the corpus, S sentences, D documents.

from __future__ import annotations

import collections
import dataclasses
import gzip
import hashlib
import itertools
import json
import logging
import multiprocessing
import os
import re
import shutil
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tokenizers
from tqdm.auto import tqdm

from bertlab.config import OBJECTIVES
from bertlab.data.pretraining import chinese_word_starts, english_word_starts, split_sentences
from bertlab.tokenization import Tokenizer

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1  # bump when the layout or the splitting/tokenizing of lines changes
TOKEN_IDS_FILE = "token_ids.bin"
SENTENCE_OFFSETS_FILE = "sentence_offsets.npy"
DOCUMENT_OFFSETS_FILE = "document_offsets.npy"
WORD_STARTS_FILE = "word_starts.bin"
META_FILE = "meta.json"
LANGS = ("auto", "en", "zh")

LINES_PER_CHUNK = 2000  # lines sent to a worker at once (about 0.5 MB of Wikipedia paragraphs)
CHUNKS_IN_FLIGHT_PER_WORKER = 2  # bounds memory: at most this many chunks queued per worker
SNIFF_BYTES = 65536  # start of each file inspected for binary content and language
CJK_FRACTION_FOR_CHINESE = 0.5  # "auto": Chinese when ideographs are >= half of the letters
MAX_UINT16_ID = np.iinfo(np.uint16).max
HASH_BYTES = 8  # duplicate-line detection: 8-byte BLAKE2b digests (collisions ~ n^2 / 2^65)
# Headings and other short lines repeat naturally (Wikipedia: 10k "References."); duplicates are
# counted among longer lines only, which is where copied boilerplate and repeated pages show.
MIN_DUPLICATE_CHECK_BYTES = 50
MAX_HASHED_LINES = 50_000_000  # 400 MB of hashes at most; later lines are not checked
COPY_BLOCK = 1 << 22  # elements copied at a time when finishing an offsets array
BYTES_PER_MEGABYTE = 1e6
CORPUS_DIR_MODE = 0o755
_GZIP_ERRORS = (gzip.BadGzipFile, EOFError, zlib.error)  # not gzip, truncated, corrupt

_CJK_IDEOGRAPH = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LETTER = re.compile(r"[^\W\d_]")


# --- fingerprints ----------------------------------------------------------------------------


def tokenizer_fingerprint(tokenizer: Tokenizer) -> str:
    """SHA-256 of everything that decides the ids of a text: vocabulary and switches.

    `model_max_length` is left out: it does not change how a sentence is tokenized.
    """
    options = tokenizer.options
    vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    state = {
        "format_version": FORMAT_VERSION,
        "tokenizers_version": tokenizers.__version__,
        "lowercase": options.lowercase,
        "strip_accents": options.is_stripping_accents,
        "handle_chinese_chars": options.handle_chinese_chars,
        "vocab": vocab,
    }
    return hashlib.sha256(json.dumps(state, ensure_ascii=False).encode("utf-8")).hexdigest()


def corpus_fingerprint(paths: Sequence[Path]) -> str:
    """BLAKE2b of the files' bytes, in order (see the module docstring for why content)."""
    digest = hashlib.blake2b()
    for path in paths:
        file_digest = hashlib.blake2b()
        with open(path, "rb") as file:
            for block in iter(lambda: file.read(1 << 20), b""):
                file_digest.update(block)
        digest.update(file_digest.digest())
    return digest.hexdigest()


# --- the memory-mapped corpus ----------------------------------------------------------------


class _DocumentView(Sequence):
    """`view[d][s]`: sentence s of document d, a slice of a memory-mapped (T,) array."""

    def __init__(self, corpus: TokenizedCorpus, values: np.ndarray) -> None:
        self._corpus = corpus
        self._values = values

    def __len__(self) -> int:
        return self._corpus.num_documents

    def __getitem__(self, index: int) -> list[np.ndarray]:
        return self._corpus._slices(self._values, index)


@dataclass(frozen=True, eq=False)
class TokenizedCorpus:
    """A corpus written by `build_corpus`, memory-mapped read-only.

    `documents` is a lazy sequence usable wherever `pretraining.create_instances_from_document`
    wants its `documents`; `word_starts` (or None) likewise for its `word_starts`.

    token_ids: (T,) uint16 or uint32. sentence_offsets: (S + 1,) int64. document_offsets:
    (D + 1,) int64. word_start_flags: (T,) bool or None.
    """

    directory: Path
    meta: dict
    token_ids: np.ndarray
    sentence_offsets: np.ndarray
    document_offsets: np.ndarray
    word_start_flags: np.ndarray | None

    @classmethod
    def open(cls, directory: str | os.PathLike) -> TokenizedCorpus:
        """Memory-map a corpus directory.

        Raises:
            FileNotFoundError: no `meta.json` in `directory`.
            ValueError: another format version, or files that do not match the metadata.
        """
        directory = Path(directory)
        meta_path = directory / META_FILE
        if not meta_path.is_file():
            raise FileNotFoundError(f"no pre-training corpus at {directory} (no {META_FILE})")
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(
                f"corpus at {directory} has format version {meta.get('format_version')}, "
                f"this bertlab reads {FORMAT_VERSION}; build it again"
            )
        counts = meta["counts"]
        try:
            token_ids = np.memmap(directory / TOKEN_IDS_FILE, dtype=meta["dtype"], mode="r")
            sentence_offsets = np.load(directory / SENTENCE_OFFSETS_FILE, mmap_mode="r")
            document_offsets = np.load(directory / DOCUMENT_OFFSETS_FILE, mmap_mode="r")
            word_start_flags = None
            if meta["whole_word"]:
                word_start_flags = np.memmap(directory / WORD_STARTS_FILE, dtype=bool, mode="r")
        except (OSError, ValueError) as error:
            raise ValueError(
                f"corpus at {directory} is damaged ({error}); build it again"
            ) from error
        shapes = [
            (len(token_ids), counts["tokens"]),
            (len(sentence_offsets), counts["sentences"] + 1),
            (len(document_offsets), counts["documents"] + 1),
        ]
        if word_start_flags is not None:
            shapes.append((len(word_start_flags), counts["tokens"]))
        if any(actual != expected for actual, expected in shapes):
            raise ValueError(f"corpus at {directory} does not match its {META_FILE}; rebuild it")
        return cls(directory, meta, token_ids, sentence_offsets, document_offsets, word_start_flags)

    @property
    def num_documents(self) -> int:
        return len(self.document_offsets) - 1

    @property
    def num_sentences(self) -> int:
        return len(self.sentence_offsets) - 1

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    def _slices(self, values: np.ndarray, index: int) -> list[np.ndarray]:
        if not -self.num_documents <= index < self.num_documents:
            raise IndexError(f"document {index} out of range (corpus has {self.num_documents})")
        index %= self.num_documents
        first, last = self.document_offsets[index], self.document_offsets[index + 1]
        bounds = self.sentence_offsets[first : last + 1].tolist()
        return [values[start:end] for start, end in itertools.pairwise(bounds)]

    def document(self, index: int) -> list[np.ndarray]:
        """The sentences of document `index`: a list of (sentence length,) id arrays (views)."""
        return self._slices(self.token_ids, index)

    def document_word_starts(self, index: int) -> list[np.ndarray]:
        """Parallel to `document(index)`: (sentence length,) bool, whether a token starts a word.

        Raises:
            ValueError: the corpus was built without `whole_word`.
        """
        if self.word_start_flags is None:
            raise ValueError(f"corpus at {self.directory} was built without whole_word=True")
        return self._slices(self.word_start_flags, index)

    @property
    def documents(self) -> Sequence[list[np.ndarray]]:
        return _DocumentView(self, self.token_ids)

    @property
    def word_starts(self) -> Sequence[list[np.ndarray]] | None:
        if self.word_start_flags is None:
            return None
        return _DocumentView(self, self.word_start_flags)


# --- reading ---------------------------------------------------------------------------------


def _open_binary(path: Path):
    """The file's bytes, decompressed when it starts with the gzip magic number."""
    raw = open(path, "rb")  # the caller closes both
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw
    raw.seek(0)
    return raw, raw


def _sniff_lang(path: Path, lang: str) -> str:
    """Refuse binary files; with `lang="auto"` say whether the file looks Chinese or English."""
    stream, raw = _open_binary(path)
    try:
        with raw, stream:
            head = stream.read(SNIFF_BYTES)
    except _GZIP_ERRORS as error:
        raise ValueError(f"{path} is not a readable gzip file ({error})") from error
    if b"\x00" in head:
        raise ValueError(f"{path} looks binary (NUL bytes in its first {SNIFF_BYTES} bytes)")
    if lang != "auto":
        return lang
    text = head.decode("utf-8", errors="ignore")
    ideographs = len(_CJK_IDEOGRAPH.findall(text))
    letters = len(_LETTER.findall(text))
    return "zh" if ideographs >= CJK_FRACTION_FOR_CHINESE * max(letters, 1) else "en"


@dataclass(frozen=True)
class _Task:
    file_index: int
    lang: str
    lines: list[bytes]


def _read_tasks(paths: Sequence[Path], langs: Sequence[str], progress: tqdm) -> Iterator[_Task]:
    """Chunks of raw lines (bytes, blank lines kept); a chunk never spans two files."""
    done_bytes = 0
    for file_index, (path, lang) in enumerate(zip(paths, langs, strict=True)):
        stream, raw = _open_binary(path)
        try:
            with raw, stream:
                while True:
                    lines = list(itertools.islice(stream, LINES_PER_CHUNK))
                    if not lines:
                        break
                    progress.update((done_bytes + raw.tell()) / BYTES_PER_MEGABYTE - progress.n)
                    yield _Task(file_index, lang, lines)
        except _GZIP_ERRORS as error:
            raise ValueError(f"{path} is not a readable gzip file ({error})") from error
        done_bytes += path.stat().st_size


# --- splitting and tokenizing one chunk (in a worker process) --------------------------------


@dataclass(frozen=True)
class _Chunk:
    """What a worker returns for one `_Task`.

    token_ids: (T_chunk,) ids. sentence_lengths: (S_chunk,) int64. starts_document: (S_chunk,)
    bool, a blank line came before the sentence (within the chunk). word_starts: (T_chunk,) bool
    or None. line_hashes: (checked lines,) uint64, of the lines long enough to be checked.
    """

    file_index: int
    token_ids: np.ndarray
    sentence_lengths: np.ndarray
    starts_document: np.ndarray
    ends_with_break: bool  # a blank line after the last sentence (or anywhere, if none)
    word_starts: np.ndarray | None
    num_lines: int  # non-blank, valid UTF-8
    line_hashes: np.ndarray
    num_skipped_lines: int  # not valid UTF-8
    num_tokenless_lines: int  # non-blank, yet no token (e.g. only control characters)


class _ChunkEncoder:
    """Splits a chunk's lines into sentences and tokenizes them; lives in each worker."""

    def __init__(self, tokenizer: Tokenizer, whole_word: bool) -> None:
        self.tokenizer = tokenizer
        self.whole_word = whole_word
        self.dtype = _token_dtype(tokenizer)
        vocab = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
        self.id_to_token = {index: token for token, index in vocab}
        table = np.ones(max(self.id_to_token) + 1, dtype=bool)
        table[[index for _, index in vocab]] = english_word_starts([token for token, _ in vocab])
        self.english_word_start_table = table

    def __call__(self, task: _Task) -> _Chunk:
        sentences: list[str] = []
        sentence_line: list[int] = []  # which non-blank line each sentence came from
        breaks_before: list[bool] = []  # per non-blank line: a blank line came before it
        hashes: list[int] = []
        num_skipped, seen_break = 0, False
        for raw_line in task.lines:
            stripped = raw_line.strip()
            if not stripped:
                seen_break = True
                continue
            try:
                line = stripped.decode("utf-8")
            except UnicodeDecodeError:
                num_skipped += 1
                continue
            if len(stripped) >= MIN_DUPLICATE_CHECK_BYTES:
                digest = hashlib.blake2b(stripped, digest_size=HASH_BYTES).digest()
                hashes.append(int.from_bytes(digest, "little"))
            pieces = split_sentences(line, task.lang)
            sentences.extend(pieces)
            sentence_line.extend([len(breaks_before)] * len(pieces))
            breaks_before.append(seen_break)
            seen_break = False
        ids = self.tokenizer.encode_ids(sentences)
        kept = [index for index, sentence_ids in enumerate(ids) if sentence_ids]
        kept_lines = {sentence_line[index] for index in kept}
        # A document break belongs to the first kept sentence after it.
        starts_document, previous_line = [], -1
        for index in kept:
            line = sentence_line[index]
            is_start = line != previous_line and any(breaks_before[previous_line + 1 : line + 1])
            starts_document.append(is_start)
            previous_line = line
        ends_with_break = seen_break or any(breaks_before[previous_line + 1 :])
        kept_ids = [ids[index] for index in kept]
        lengths = np.fromiter(map(len, kept_ids), dtype=np.int64, count=len(kept_ids))
        flat = np.fromiter(
            itertools.chain.from_iterable(kept_ids), dtype=self.dtype, count=int(lengths.sum())
        )
        word_starts = None
        if self.whole_word:
            word_starts = self._word_starts(flat, kept_ids, task.lang)
        return _Chunk(
            file_index=task.file_index,
            token_ids=flat,
            sentence_lengths=lengths,
            starts_document=np.asarray(starts_document, dtype=bool),
            ends_with_break=ends_with_break,
            word_starts=word_starts,
            num_lines=len(breaks_before),
            line_hashes=np.asarray(hashes, dtype=np.uint64),
            num_skipped_lines=num_skipped,
            num_tokenless_lines=len(breaks_before) - len(kept_lines),
        )

    def _word_starts(self, flat: np.ndarray, ids: list[list[int]], lang: str) -> np.ndarray:
        if lang == "en":
            return self.english_word_start_table[flat]
        # Chinese whole-word masking segments each sentence with jieba (Chinese-BERT-wwm).
        starts = [
            chinese_word_starts([self.id_to_token[index] for index in sentence_ids])
            for sentence_ids in ids
        ]
        return np.fromiter(itertools.chain.from_iterable(starts), dtype=bool, count=len(flat))


def _token_dtype(tokenizer: Tokenizer) -> np.dtype:
    largest_id = max(tokenizer.get_vocab().values())
    return np.dtype(np.uint16 if largest_id <= MAX_UINT16_ID else np.uint32)


# Worker processes hold their encoder here: it is built once per process by the pool initializer
# instead of being pickled with every chunk.
_worker_encoder: _ChunkEncoder | None = None


def _init_worker(encoder: _ChunkEncoder) -> None:
    global _worker_encoder
    # One process per core already: keep the tokenizers library from adding threads of its own.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    _worker_encoder = encoder


def _encode_in_worker(task: _Task) -> _Chunk:
    return _worker_encoder(task)


def _pool_context() -> multiprocessing.context.BaseContext:
    # fork: workers start at once and share the tokenizer; spawn where fork does not exist.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return multiprocessing.get_context(method)


def _encoded_chunks(
    tasks: Iterator[_Task], encoder: _ChunkEncoder, num_workers: int
) -> Iterator[_Chunk]:
    """Results in task order, with at most a few chunks in flight (bounded memory)."""
    if num_workers == 0:
        yield from map(encoder, tasks)
        return
    with _pool_context().Pool(num_workers, _init_worker, (encoder,)) as pool:
        pending: collections.deque = collections.deque()
        for task in tasks:
            pending.append(pool.apply_async(_encode_in_worker, (task,)))
            if len(pending) >= num_workers * CHUNKS_IN_FLIGHT_PER_WORKER:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


# --- writing ---------------------------------------------------------------------------------


@dataclass
class _Counts:
    """Running totals while writing; `file_lines`/`file_skipped` per input file."""

    tokens: int = 0
    sentences: int = 0
    documents: int = 0
    lines: int = 0
    skipped_lines: int = 0
    tokenless_lines: int = 0
    unk_tokens: int = 0
    hashed_lines: int = 0
    file_lines: list[int] = dataclasses.field(default_factory=list)
    file_skipped: list[int] = dataclasses.field(default_factory=list)


class _CorpusWriter:
    """Appends chunks to the files of a directory under construction."""

    def __init__(self, directory: Path, num_files: int, unk_id: int, whole_word: bool) -> None:
        self.directory = directory
        self.unk_id = unk_id
        self.counts = _Counts(file_lines=[0] * num_files, file_skipped=[0] * num_files)
        self.hashes: list[np.ndarray] = []
        self.is_break_pending = True
        self.current_file = -1
        # Closed by close() (or finish()), also when building fails half-way.
        self.token_file = open(directory / TOKEN_IDS_FILE, "wb")
        self.sentence_file = open(directory / "sentence_offsets.raw", "wb")
        self.document_file = open(directory / "document_offsets.raw", "wb")
        self.word_file = open(directory / WORD_STARTS_FILE, "wb") if whole_word else None

    def add(self, chunk: _Chunk) -> None:
        counts = self.counts
        if chunk.file_index != self.current_file:
            self.current_file, self.is_break_pending = chunk.file_index, True
        num_lines = chunk.num_lines
        counts.file_lines[chunk.file_index] += num_lines
        counts.file_skipped[chunk.file_index] += chunk.num_skipped_lines
        counts.lines += num_lines
        counts.skipped_lines += chunk.num_skipped_lines
        counts.tokenless_lines += chunk.num_tokenless_lines
        room = MAX_HASHED_LINES - counts.hashed_lines
        self.hashes.append(chunk.line_hashes[:room])
        counts.hashed_lines += len(self.hashes[-1])
        if len(chunk.sentence_lengths) == 0:
            self.is_break_pending = self.is_break_pending or chunk.ends_with_break
            return
        starts = counts.tokens + np.cumsum(chunk.sentence_lengths) - chunk.sentence_lengths
        starts_document = chunk.starts_document.copy()
        starts_document[0] |= self.is_break_pending
        self.is_break_pending = chunk.ends_with_break
        first_sentences = counts.sentences + np.flatnonzero(starts_document)
        self.token_file.write(chunk.token_ids.tobytes())
        self.sentence_file.write(starts.astype(np.int64).tobytes())
        self.document_file.write(first_sentences.astype(np.int64).tobytes())
        if self.word_file is not None:
            self.word_file.write(chunk.word_starts.astype(bool).tobytes())
        counts.tokens += len(chunk.token_ids)
        counts.sentences += len(chunk.sentence_lengths)
        counts.documents += len(first_sentences)
        counts.unk_tokens += int(np.count_nonzero(chunk.token_ids == self.unk_id))

    def close(self) -> None:
        for file in (self.token_file, self.sentence_file, self.document_file, self.word_file):
            if file is not None:
                file.close()

    def finish(self) -> int:
        """Close the files, write the .npy offsets; return the number of duplicate lines."""
        self.close()
        _raw_to_npy(self.directory / "sentence_offsets.raw", self.counts.tokens)
        _raw_to_npy(self.directory / "document_offsets.raw", self.counts.sentences)
        hashes = np.concatenate(self.hashes) if self.hashes else np.zeros(0, np.uint64)
        self.hashes = []
        return len(hashes) - len(np.unique(hashes))


def _raw_to_npy(raw_path: Path, end: int) -> None:
    """`name.raw` (int64 values) -> `name.npy` with `end` appended, copied in blocks."""
    num_values = raw_path.stat().st_size // np.dtype(np.int64).itemsize
    target = np.lib.format.open_memmap(
        raw_path.with_suffix(".npy"), mode="w+", dtype=np.int64, shape=(num_values + 1,)
    )
    if num_values:
        source = np.memmap(raw_path, dtype=np.int64, mode="r")
        for start in range(0, num_values, COPY_BLOCK):
            stop = min(start + COPY_BLOCK, num_values)
            target[start:stop] = source[start:stop]
        del source
    target[num_values] = end
    target.flush()
    del target
    raw_path.unlink()


# --- building --------------------------------------------------------------------------------


def _check_paths(paths: Sequence[str | os.PathLike]) -> list[Path]:
    paths = [Path(path) for path in paths]
    if not paths:
        raise ValueError("no corpus files given")
    for path in paths:
        if path.is_dir():
            raise ValueError(f"{path} is a directory; pass the corpus files in it")
        if not path.is_file():
            raise FileNotFoundError(f"corpus file not found: {path}")
    return paths


def _cached(out_dir: Path, expected: dict) -> TokenizedCorpus | None:
    meta_path = out_dir / META_FILE
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    if any(meta.get(key) != value for key, value in expected.items()):
        return None
    try:
        return TokenizedCorpus.open(out_dir)
    except (OSError, ValueError) as error:
        logger.warning("rebuilding the corpus at %s: %s", out_dir, error)
        return None


def default_num_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def build_corpus(
    paths: Sequence[str | os.PathLike],
    tokenizer: Tokenizer,
    out_dir: str | os.PathLike,
    lang: str = "auto",
    show_progress: bool = True,
    whole_word: bool = False,
    num_workers: int | None = None,
) -> TokenizedCorpus:
    """Tokenize a plain-text corpus once into `out_dir`, or reuse it if already built.

    Example:
        >>> corpus = build_corpus(["wiki.txt.gz"], tokenizer, "cache/wiki")  # doctest: +SKIP
        >>> corpus.num_documents, corpus.document(0)[0][:3]  # doctest: +SKIP
        (36183, memmap([ 4926, 22517, 7767], dtype=uint16))

    Args:
        paths: `.txt` or gzipped files in Google's layout (blank line between documents).
        tokenizer: encodes every sentence, without [CLS]/[SEP].
        out_dir: the corpus directory; replaced when stale, returned as is when up to date.
        lang: sentence-splitting rules, `"en"`, `"zh"` or `"auto"` (decided per file from the
            share of CJK ideographs at its start).
        show_progress: a progress bar over the bytes read.
        whole_word: also write `word_starts.bin` (Chinese words found with jieba: slower).
        num_workers: worker processes; one per available core when None, 0 for in-process.

    Returns:
        The memory-mapped corpus.

    Raises:
        FileNotFoundError: a corpus file is missing.
        ValueError: no files, a binary / mostly non-UTF-8 / broken gzip file, an empty corpus, an
            unknown `lang`, or an `out_dir` that holds something other than a corpus.
    """
    if lang not in LANGS:
        raise ValueError(f"unknown lang {lang!r}; choose one of {LANGS}")
    paths = _check_paths(paths)
    out_dir = Path(out_dir)
    expected = {
        "format_version": FORMAT_VERSION,
        "tokenizer_fingerprint": tokenizer_fingerprint(tokenizer),
        "corpus_fingerprint": corpus_fingerprint(paths),
        "lang": lang,
        "whole_word": whole_word,
    }
    cached = _cached(out_dir, expected)
    if cached is not None:
        logger.info("reusing the tokenized corpus at %s", out_dir)
        return cached
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / META_FILE).is_file():
        raise ValueError(f"{out_dir} exists and is not a bertlab corpus; choose another out_dir")
    langs = [_sniff_lang(path, lang) for path in paths]
    num_workers = default_num_workers() if num_workers is None else num_workers
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".partial", dir=out_dir.parent)
    )
    staging.chmod(CORPUS_DIR_MODE)  # mkdtemp makes it private; a corpus is shared data
    try:
        meta = _write(paths, langs, tokenizer, staging, whole_word, num_workers, show_progress)
        meta.update(expected)
        meta["langs"] = langs
        meta["files"] = [{"path": str(p), "bytes": p.stat().st_size} for p in paths]
        (staging / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        _replace_directory(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return TokenizedCorpus.open(out_dir)


def _write(
    paths: list[Path],
    langs: list[str],
    tokenizer: Tokenizer,
    directory: Path,
    whole_word: bool,
    num_workers: int,
    show_progress: bool,
) -> dict:
    """Stream every file through the workers into `directory`; return the metadata."""
    encoder = _ChunkEncoder(tokenizer, whole_word)
    writer = _CorpusWriter(directory, len(paths), tokenizer.unk_token_id, whole_word)
    total_mb = sum(path.stat().st_size for path in paths) / BYTES_PER_MEGABYTE
    progress = tqdm(
        total=total_mb,
        unit="MB",
        bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} MB [{elapsed}<{remaining}]",
        desc="tokenizing corpus",
        disable=not show_progress,
    )
    try:
        with progress:
            for chunk in _encoded_chunks(_read_tasks(paths, langs, progress), encoder, num_workers):
                writer.add(chunk)
            progress.update(total_mb - progress.n)
    finally:
        writer.close()
    counts = writer.counts
    for path, lines, skipped in zip(paths, counts.file_lines, counts.file_skipped, strict=True):
        if skipped > lines:
            raise ValueError(
                f"{path} is mostly not UTF-8 ({skipped} of {skipped + lines} lines); "
                "convert it first (e.g. iconv -t utf-8)"
            )
    if counts.tokens == 0:
        note = f" ({counts.skipped_lines} lines were not UTF-8)" if counts.skipped_lines else ""
        names = ", ".join(map(str, paths))
        raise ValueError(f"corpus is empty: no sentence with a token in {names}{note}")
    num_duplicate_lines = writer.finish()
    if counts.skipped_lines:
        logger.warning("skipped %d lines that are not valid UTF-8", counts.skipped_lines)
    return {
        "format_version": FORMAT_VERSION,
        "dtype": encoder.dtype.name,
        "whole_word": whole_word,
        "unk_token_id": tokenizer.unk_token_id,
        "counts": {
            "documents": counts.documents,
            "sentences": counts.sentences,
            "tokens": counts.tokens,
            "lines": counts.lines,
            "duplicate_lines": num_duplicate_lines,
            "checked_lines": counts.hashed_lines,
            "skipped_lines": counts.skipped_lines,
            "tokenless_lines": counts.tokenless_lines,
            "unk_tokens": counts.unk_tokens,
        },
    }


def _replace_directory(staging: Path, out_dir: Path) -> None:
    """Move the finished `staging` directory to `out_dir`, replacing a stale corpus there."""
    if not out_dir.exists():
        os.rename(staging, out_dir)
        return
    # rename() cannot replace a non-empty directory: move the old one aside first. Between the
    # two renames `out_dir` is briefly absent, never half-written.
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", suffix=".old", dir=out_dir.parent))
    os.rename(out_dir, old / out_dir.name)
    os.rename(staging, out_dir)
    shutil.rmtree(old, ignore_errors=True)


# --- pre-flight report -----------------------------------------------------------------------

MIN_DOCUMENT_SENTENCES = 2  # NSP draws B from the same document: one sentence gives no IsNext pair
MIN_DOCUMENT_TOKENS = 16  # below this a document adds hardly any context (our choice)
MAX_UNK_RATE = 0.01  # more [UNK] than 1% suggests a vocabulary that does not fit the corpus
MAX_DUPLICATE_LINE_RATIO = 0.10  # Lee et al. 2022: duplicated text is memorized, hurts training
MAX_SHORT_DOCUMENT_FRACTION = 0.5  # warn when most documents are short
MIN_SEQUENCES = 1000  # fewer full-length sequences than this: the model will simply memorize
NUM_SPECIAL_TOKENS_NSP = 3  # [CLS] A [SEP] B [SEP]


@dataclass(frozen=True)
class PreflightReport:
    """What the corpus holds and what will train badly, checked before pre-training starts."""

    objective: str
    max_seq_length: int
    num_documents: int
    num_sentences: int
    num_tokens: int
    num_lines: int
    num_checked_lines: int  # lines of at least MIN_DUPLICATE_CHECK_BYTES, checked for duplicates
    num_duplicate_lines: int
    num_skipped_lines: int  # not valid UTF-8
    num_single_sentence_documents: int
    num_short_documents: int  # < MIN_DOCUMENT_SENTENCES sentences or < MIN_DOCUMENT_TOKENS tokens
    num_unk_tokens: int
    warnings: list[str]

    @property
    def duplicate_line_ratio(self) -> float:
        return self.num_duplicate_lines / max(self.num_checked_lines, 1)

    @property
    def unk_rate(self) -> float:
        return self.num_unk_tokens / max(self.num_tokens, 1)

    def summary(self) -> list[str]:
        """Lines to print before training."""
        lines = [
            f"corpus: {self.num_documents:,} documents, {self.num_sentences:,} sentences, "
            f"{self.num_tokens:,} tokens",
            f"duplicate lines: {self.num_duplicate_lines:,} of {self.num_checked_lines:,} lines "
            f"of {MIN_DUPLICATE_CHECK_BYTES}+ bytes ({self.duplicate_line_ratio:.2%}); "
            f"{self.num_lines:,} lines in all",
            f"short documents (< {MIN_DOCUMENT_SENTENCES} sentences or < {MIN_DOCUMENT_TOKENS} "
            f"tokens): {self.num_short_documents:,}; one sentence long: "
            f"{self.num_single_sentence_documents:,}",
            f"[UNK] rate: {self.unk_rate:.3%}",
        ]
        if self.num_skipped_lines:
            lines.append(f"skipped {self.num_skipped_lines:,} lines that are not valid UTF-8")
        lines += [f"warning: {warning}" for warning in self.warnings]
        return lines


def preflight_report(
    corpus: TokenizedCorpus, tokenizer: Tokenizer, objective: str, max_seq_length: int = 128
) -> PreflightReport:
    """Statistics of `corpus` and warnings about what will train badly with `objective`.

    Args:
        corpus: a built corpus.
        tokenizer: the tokenizer training will use; must be the one the corpus was built with.
        objective: one of `OBJECTIVES`.
        max_seq_length: L of the training sequences (`PretrainDataConfig.max_seq_length`).

    Raises:
        ValueError: an unknown objective, or a corpus built with another tokenizer.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}; choose one of {OBJECTIVES}")
    if corpus.meta["tokenizer_fingerprint"] != tokenizer_fingerprint(tokenizer):
        raise ValueError(
            f"corpus at {corpus.directory} was tokenized with another tokenizer; build it again"
        )
    counts = corpus.meta["counts"]
    document_offsets = np.asarray(corpus.document_offsets)
    sentences_per_document = np.diff(document_offsets)
    tokens_per_document = np.diff(np.asarray(corpus.sentence_offsets)[document_offsets])
    num_single = int(np.count_nonzero(sentences_per_document == 1))
    is_short = (sentences_per_document < MIN_DOCUMENT_SENTENCES) | (
        tokens_per_document < MIN_DOCUMENT_TOKENS
    )
    report = PreflightReport(
        objective=objective,
        max_seq_length=max_seq_length,
        num_documents=corpus.num_documents,
        num_sentences=corpus.num_sentences,
        num_tokens=corpus.num_tokens,
        num_lines=counts["lines"],
        num_checked_lines=counts["checked_lines"],
        num_duplicate_lines=counts["duplicate_lines"],
        num_skipped_lines=counts["skipped_lines"],
        num_single_sentence_documents=num_single,
        num_short_documents=int(np.count_nonzero(is_short)),
        num_unk_tokens=counts["unk_tokens"],
        warnings=[],
    )
    report.warnings.extend(_warnings(report))
    return report


def _warnings(report: PreflightReport) -> list[str]:
    warnings = []
    if report.unk_rate > MAX_UNK_RATE:
        warnings.append(
            f"[UNK] rate {report.unk_rate:.2%} is above {MAX_UNK_RATE:.0%}: the vocabulary does "
            "not fit this corpus (wrong language or casing?); train a tokenizer on it"
        )
    if report.duplicate_line_ratio > MAX_DUPLICATE_LINE_RATIO:
        warnings.append(
            f"{report.duplicate_line_ratio:.1%} of the lines are duplicates (above "
            f"{MAX_DUPLICATE_LINE_RATIO:.0%}): deduplicate the corpus, the model will memorize them"
        )
    num_documents = max(report.num_documents, 1)
    if report.num_short_documents / num_documents > MAX_SHORT_DOCUMENT_FRACTION:
        warnings.append(
            f"{report.num_short_documents} of {report.num_documents} documents are very short; "
            "is there a blank line after every line instead of between documents?"
        )
    if (
        report.objective == "mlm+nsp"
        and report.num_single_sentence_documents / num_documents > MAX_SHORT_DOCUMENT_FRACTION
    ):
        warnings.append(
            f"{report.num_single_sentence_documents} of {report.num_documents} documents are one "
            "sentence long: NSP will see few true next sentences; consider objective 'mlm'"
        )
    sequences = report.num_tokens // max(report.max_seq_length - NUM_SPECIAL_TOKENS_NSP, 1)
    if sequences < MIN_SEQUENCES:
        warnings.append(
            f"only about {sequences} sequences of {report.max_seq_length} tokens (fewer than "
            f"{MIN_SEQUENCES}): the model will memorize the corpus rather than learn from it"
        )
    if report.num_skipped_lines:
        warnings.append(f"{report.num_skipped_lines} lines were skipped as not valid UTF-8")
    return warnings


def check_objective(report: PreflightReport, objective: str) -> None:
    """Refuse an objective the corpus cannot train.

    Raises:
        ValueError: next-sentence prediction on a corpus of fewer than two documents.
    """
    if objective == "mlm+nsp" and report.num_documents < 2:
        raise ValueError(
            f"NSP needs at least two documents (random B sentences come from another document), "
            f"but the corpus has {report.num_documents}; separate documents with a blank line "
            "or use objective 'mlm'"
        )
