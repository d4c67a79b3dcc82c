"""Building a corpus, piece by piece: read chunks of lines, split and tokenize them in worker
processes, append the results to the files of the corpus directory.

Memory stays bounded: lines are read in chunks, a few chunks are in flight at a time, and results
are appended to the files as they arrive. Chunks are split and tokenized by a pool of worker
processes (one per core), so the Python sentence splitter and the tokenizer both use every core.

Sources are read by `bertlab.corpus.sources`, as in tokenizer training: each format as
lines of Google's layout (a record of JSON Lines, CSV or Parquet one document). Lines that are
not valid UTF-8 are skipped and counted, a binary or broken gzip file is refused, and one that is
mostly not UTF-8 is refused by `build_corpus` after reading.
"""

# Shapes: T tokens in the corpus, S sentences; T_chunk, S_chunk those of one chunk of lines.

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import multiprocessing
import os
import queue
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from bertlab.corpus.format import TOKEN_IDS_FILE, WORD_STARTS_FILE, token_dtype
from bertlab.corpus.readers import ReadCounts
from bertlab.corpus.sources import CorpusSource
from bertlab.corpus.text_units import chinese_word_starts, english_word_starts, split_sentences
from bertlab.tokenizer.wordpiece import Tokenizer

CHUNKS_IN_FLIGHT_PER_WORKER = 2  # bounds memory: at most this many chunks queued per worker
CJK_FRACTION_FOR_CHINESE = 0.5  # "auto": Chinese when ideographs are >= half of the letters
HASH_BYTES = 8  # duplicate-line detection: 8-byte BLAKE2b digests (collisions ~ n^2 / 2^65)
# Headings and other short lines repeat naturally (Wikipedia: 10k "References."); duplicates are
# counted among longer lines only, which is where copied boilerplate and repeated pages show.
MIN_DUPLICATE_CHECK_BYTES = 50
MAX_HASHED_LINES = 50_000_000  # 400 MB of hashes at most; later lines are not checked
COPY_BLOCK = 1 << 22  # elements copied at a time when finishing an offsets array
BYTES_PER_MEGABYTE = 1e6

_CJK_IDEOGRAPH = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LETTER = re.compile(r"[^\W\d_]")


# --- reading ---------------------------------------------------------------------------------


def sniff_lang(source: CorpusSource, lang: str) -> str:
    """With `lang="auto"`, whether the source's text looks Chinese or English."""
    if lang != "auto":
        return lang
    text = source.sample_text()
    ideographs = len(_CJK_IDEOGRAPH.findall(text))
    letters = len(_LETTER.findall(text))
    return "zh" if ideographs >= CJK_FRACTION_FOR_CHINESE * max(letters, 1) else "en"


@dataclass(frozen=True)
class _Task:
    file_index: int
    lang: str
    lines: list[bytes]


def read_tasks(
    sources: Sequence[CorpusSource],
    langs: Sequence[str],
    counts: Sequence[ReadCounts],
    progress: tqdm,
) -> Iterator[_Task]:
    """Chunks of raw lines (bytes, blank lines kept); a chunk never spans two sources. Each
    source's `counts` receive the records its reader read."""
    done_bytes = 0
    for file_index, (source, lang) in enumerate(zip(sources, langs, strict=True)):
        for chunk in source.chunks(counts[file_index]):
            progress.update((done_bytes + chunk.position) / BYTES_PER_MEGABYTE - progress.n)
            yield _Task(file_index, lang, chunk.lines)
        done_bytes += source.size()


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


class ChunkEncoder:
    """Splits a chunk's lines into sentences and tokenizes them; lives in each worker."""

    def __init__(self, tokenizer: Tokenizer, whole_word: bool) -> None:
        self.tokenizer = tokenizer
        self.whole_word = whole_word
        self.dtype = token_dtype(tokenizer)
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


def _serve(connection: Connection, encoder: ChunkEncoder, others: list[Connection]) -> None:
    """A worker process: encode each task that comes through `connection` and send back the
    chunk (or the error), until None or the end of the connection (the main process gone). A
    thread takes the tasks as they come, so the main process never waits to hand one over."""
    for other in others:  # the main process's ends of the pipes, if forked
        other.close()
    # One process per core already: keep the tokenizers library from adding threads of its own.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    tasks: queue.SimpleQueue = queue.SimpleQueue()
    threading.Thread(target=_take_tasks, args=(connection, tasks), daemon=True).start()
    for task in iter(tasks.get, None):
        try:
            result = (True, encoder(task))
        except Exception as error:  # any encoder's: raised again in the main process
            result = (False, error)
        try:
            connection.send(result)
        except OSError:  # the main process is gone (killed): no one to tell
            return


def _take_tasks(connection: Connection, tasks: queue.SimpleQueue) -> None:
    try:
        while (task := connection.recv()) is not None:
            tasks.put(task)
    except EOFError:
        pass
    tasks.put(None)


def _pool_context() -> multiprocessing.context.BaseContext:
    # fork: workers start at once and share the tokenizer; spawn where fork does not exist.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    return multiprocessing.get_context(method)


class _Workers:
    """Worker processes, each with a pipe of its own.

    Not `multiprocessing.Pool`: its `terminate` can wait forever after a SIGTERM to the process
    group (a worker killed while it held the task queue's lock, or its task thread blocked
    writing a chunk that no worker will read: CPython issues 73945 and 78178). Here a worker
    shares nothing with the others, and a stop kills them without waiting for any.
    """

    def __init__(self, num_workers: int, encoder: ChunkEncoder) -> None:
        context = _pool_context()
        self.processes: list[multiprocessing.process.BaseProcess] = []
        self.connections: list[Connection] = []
        for _ in range(num_workers):
            mine, theirs = context.Pipe()
            # A forked worker closes its copies of the main process's ends (its own pipe's
            # included), so that it ends when the main process does, even by SIGKILL.
            mains = [*self.connections, mine]
            process = context.Process(target=_serve, args=(theirs, encoder, mains), daemon=True)
            process.start()
            theirs.close()
            self.processes.append(process)
            self.connections.append(mine)

    def send(self, worker: int, task: _Task) -> None:
        try:
            self.connections[worker].send(task)
        except OSError:  # the worker is gone (a broken pipe, a reset connection)
            raise self._ended(worker) from None

    def receive(self, worker: int) -> _Chunk:
        try:
            is_chunk, value = self.connections[worker].recv()
        except (EOFError, OSError):  # the worker is gone
            raise self._ended(worker) from None
        if not is_chunk:
            raise value
        return value

    def _ended(self, worker: int) -> ChildProcessError:
        process = self.processes[worker]
        process.join()
        return ChildProcessError(
            f"a corpus-encoding process (pid {process.pid}) ended before its chunk was done "
            f"(exit code {process.exitcode}; a negative one is the signal that ended it, -9 "
            "often the system out of memory)"
        )

    def close(self) -> None:
        """End the workers once their work is done."""
        for connection in self.connections:
            connection.send(None)
        for process, connection in zip(self.processes, self.connections, strict=True):
            process.join()
            connection.close()

    def kill(self) -> None:
        """End the workers at once (an error, Ctrl-C, SIGTERM): they hold nothing to keep."""
        for process in self.processes:
            process.kill()
        for process, connection in zip(self.processes, self.connections, strict=True):
            process.join()
            connection.close()


def encoded_chunks(
    tasks: Iterator[_Task], encoder: ChunkEncoder, num_workers: int
) -> Iterator[_Chunk]:
    """Results in task order, with at most a few chunks in flight (bounded memory): task i goes
    to worker i % num_workers."""
    if num_workers == 0:
        yield from map(encoder, tasks)
        return
    workers = _Workers(num_workers, encoder)
    in_flight = num_workers * CHUNKS_IN_FLIGHT_PER_WORKER
    try:
        sent = 0
        for task in tasks:  # read while the workers encode
            worker = sent % num_workers
            if sent < in_flight:
                workers.send(worker, task)
            else:  # the worker's oldest chunk first: it still holds the next one
                chunk = workers.receive(worker)
                workers.send(worker, task)
                yield chunk
            sent += 1
        for index in range(max(sent - in_flight, 0), sent):
            yield workers.receive(index % num_workers)
    except BaseException:  # an error, Ctrl-C, SIGTERM, or the reader stopped early
        workers.kill()
        raise
    workers.close()


# --- writing ---------------------------------------------------------------------------------


@dataclass
class _Counts:
    """Running totals while writing; `file_lines`/`file_skipped`/`file_documents` per input
    file."""

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
    file_documents: list[int] = dataclasses.field(default_factory=list)


class CorpusWriter:
    """Appends chunks to the files of a directory under construction."""

    def __init__(self, directory: Path, num_files: int, unk_id: int, whole_word: bool) -> None:
        self.directory = directory
        self.unk_id = unk_id
        self.counts = _Counts(
            file_lines=[0] * num_files,
            file_skipped=[0] * num_files,
            file_documents=[0] * num_files,
        )
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
        counts.file_documents[chunk.file_index] += len(first_sentences)
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
