"""Bulk encoding without offsets through a cache of whitespace-separated chunks. No torch import.

Google's basic tokenizer deletes control characters, maps whitespace to a space, and then treats
every whitespace-separated chunk on its own: lowercasing, accent stripping, punctuation splitting
and WordPiece never look past a space. NFC and the final-sigma rule do not either, since a space is
a starter that composes with nothing and is neither cased nor case-ignorable; special tokens such
as `[MASK]` contain no space. The ids of a text are therefore the ids of its chunks, concatenated:
`"the cat, the dog" -> ids("the") + ids("cat,") + ids("the") + ids("dog")`.

Natural text repeats chunks heavily (the 150 MB English sample has 24M chunks but only 1.1M
distinct ones), so `ChunkCache` splits texts with `str.split()` (in C), maps each chunk to a row
number through one dict, and gathers the rows' ids with numpy: the Python-level work is a few
C-level passes per batch, not a loop per chunk. Only chunks it has not seen go to the exact
`tokenizers` pipeline, each as one word of a pre-split input. Outputs are those of that pipeline by
construction; the tests compare the two.

`str.split()` splits on `str.isspace()` characters. They are BERT's whitespace except for a few
control characters (U+000B, U+000C, U+001C-U+001F, U+0085) that BERT deletes rather than splits
on; a text containing one is split on BERT's whitespace by a regex instead.
"""

from __future__ import annotations

import multiprocessing
import re
import threading
from collections.abc import Sequence
from itertools import chain, repeat

import numpy as np
from tokenizers import Tokenizer as BackendTokenizer

MAX_CACHED_CHUNKS = 1 << 20  # ~1M chunks, ~150 MB; the cache starts afresh when full
CHUNKS_PER_MISS_SEQUENCE = 256  # unseen chunks go to the backend this many per sequence
TEXTS_PER_WORKER_TASK = 5000  # lines sent to a worker process at a time
TEXT_SEPARATOR = "\x00"  # a chunk put between texts to split them in one go; BERT deletes NUL
SEPARATOR_ROW = 0

# Token ids of many texts, flat, with the number of ids of each text:
# ids: (total pieces,) int32, lengths: (texts,) int64.
IdArrays = tuple[np.ndarray, np.ndarray]


class ChunkCache:
    """Encode texts (no special tokens) as the exact backend does, caching each chunk's ids.

    Example:
        >>> cache = ChunkCache(tokenizer.backend, split_differs="\\x0b\\x0c", whitespace=" \\t\\n")
        >>> cache.encode(["unaffable unaffable!"])  # "unaffable" is encoded once
        [[un, ##aff, ##able, un, ##aff, ##able, !]]   (as ids)

    Chunk `row` has the ids `self._ids[self._bounds[row] : self._bounds[row + 1]]`.

    The cache is a memo of a pure function: it never changes what `encode` returns. A lock makes
    `encode` safe to call from several threads. The cache is not shared between processes (each
    worker of `encode_parallel` fills its own) and is left out when the object is pickled.
    """

    def __init__(
        self,
        backend: BackendTokenizer,
        split_differs: str,
        whitespace: str,
        max_entries: int = MAX_CACHED_CHUNKS,
    ) -> None:
        """Args:
        backend: the exact pipeline (normalizer, pre-tokenizer, WordPiece, special tokens).
        split_differs: characters on which `str.split()` and BERT's whitespace rule disagree.
        whitespace: BERT's whitespace characters, where its basic tokenizer splits.
        max_entries: the cache is emptied when it reaches this many chunks.
        """
        self._backend = backend
        self._split_differs = split_differs
        self._whitespace = whitespace
        self._bert_chunks = re.compile(f"[^{re.escape(whitespace)}]+").findall
        self._max_entries = max_entries
        self._lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        # Row 0 is the separator `_split` puts between texts: it has no ids.
        self._rows: dict[str, int] = {TEXT_SEPARATOR: SEPARATOR_ROW}
        self._ids = np.zeros(0, dtype=np.int32)  # (cached pieces,)
        self._bounds = np.zeros(2, dtype=np.int64)  # (rows + 1,)

    def __getstate__(self) -> dict:
        return {
            "backend": self._backend,
            "split_differs": self._split_differs,
            "whitespace": self._whitespace,
            "max_entries": self._max_entries,
        }

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def __len__(self) -> int:
        return len(self._rows) - 1  # chunks cached, not counting the separator

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of each text, no [CLS]/[SEP]; equal to `backend.encode_batch_fast(texts)`."""
        return ids_to_lists(*self.encode_arrays(texts))

    def encode_arrays(self, texts: Sequence[str]) -> IdArrays:
        """`encode(texts)` as flat arrays: ids (pieces,) int32 and lengths (texts,) int64."""
        if not texts:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)
        chunks = self._split(texts)
        with self._lock:
            rows = self._rows_of(chunks)  # (chunks,)
            starts = self._bounds[rows]  # (chunks,)
            counts = self._bounds[rows + 1] - starts  # (chunks,)
            ids = self._ids[_concatenated_ranges(starts, counts)]  # (pieces,)
        # Text i ends at separator i (the last text at the end of the chunks).
        text_ends = np.append(np.flatnonzero(rows == SEPARATOR_ROW), len(chunks))  # (texts,)
        piece_ends = np.concatenate([[0], np.cumsum(counts)])[text_ends]  # (texts,)
        return ids, np.diff(piece_ends, prepend=0)

    def _split(self, texts: Sequence[str]) -> list[str]:
        """The chunks of all texts in order, with `TEXT_SEPARATOR` between two texts.

        Splitting one long string is much faster than splitting each text (one list, not one
        per text). Texts holding the separator or a `split_differs` character (both rare) are
        split one by one, on BERT's whitespace.
        """
        joined = "".join(texts)
        if not any(char in joined for char in TEXT_SEPARATOR + self._split_differs):
            return f" {TEXT_SEPARATOR} ".join(texts).split()
        chunks: list[str] = []
        for text in texts:
            # A chunk of just NUL has no ids (BERT deletes NUL): dropping it changes nothing.
            chunks += [chunk for chunk in self._bert_chunks(text) if chunk != TEXT_SEPARATOR]
            chunks.append(TEXT_SEPARATOR)
        return chunks[:-1]

    def _rows_of(self, chunks: list[str]) -> np.ndarray:
        """Cache rows of `chunks`, (chunks,) int64, encoding the chunks not seen before."""
        rows = np.fromiter(map(self._rows.get, chunks, repeat(-1)), np.int64, len(chunks))
        missed = np.flatnonzero(rows < 0)  # (misses,)
        if not len(missed):
            return rows
        missing = [chunks[index] for index in missed.tolist()]
        new = list(dict.fromkeys(missing))
        if len(self._rows) + len(new) > self._max_entries:
            self._clear()
            missed, missing = slice(None), chunks
            new = [chunk for chunk in dict.fromkeys(chunks) if chunk not in self._rows]
        ids, counts = self._encode_chunks(new)
        self._rows.update(zip(new, range(len(self._rows), len(self._rows) + len(new)), strict=True))
        self._ids = np.concatenate([self._ids, ids])
        self._bounds = np.concatenate([self._bounds, self._bounds[-1] + np.cumsum(counts)])
        rows[missed] = np.fromiter(map(self._rows.__getitem__, missing), np.int64, len(missing))
        return rows

    def _encode_chunks(self, chunks: list[str]) -> IdArrays:
        """Ids of `chunks` by the exact backend, each chunk one word of a pre-split input."""
        groups = [
            chunks[start : start + CHUNKS_PER_MISS_SEQUENCE]
            for start in range(0, len(chunks), CHUNKS_PER_MISS_SEQUENCE)
        ]
        encodings = self._backend.encode_batch(
            groups, is_pretokenized=True, add_special_tokens=False
        )
        ids = np.fromiter(chain.from_iterable(e.ids for e in encodings), np.int32)
        # word_ids: the index, within its group, of the chunk each token came from.
        counts = [
            np.bincount(encoding.word_ids, minlength=len(group))
            for group, encoding in zip(groups, encodings, strict=True)
        ]
        return ids, np.concatenate(counts)


def _concatenated_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """`concatenate([arange(s, s + c) for s, c in zip(starts, counts)])`, vectorized.

    `_concatenated_ranges([10, 3], [2, 3]) -> [10, 11, 3, 4, 5]`.
    """
    offsets = np.cumsum(counts) - counts  # (ranges,) where each range starts in the output
    return np.repeat(starts - offsets, counts) + np.arange(counts.sum())


def ids_to_lists(ids: np.ndarray, lengths: np.ndarray) -> list[list[int]]:
    """One list of int per text from flat ids: `([5, 6, 7], [2, 0, 1]) -> [[5, 6], [], [7]]`."""
    flat = ids.tolist()
    ends = np.cumsum(lengths).tolist()
    return [flat[start:end] for start, end in zip([0, *ends], ends, strict=False)]


# A worker process's own cache, set once by `_start_worker` (the standard `multiprocessing`
# initializer pattern): passing it with every task would copy it each time.
_worker_cache: ChunkCache | None = None


def _start_worker(cache: ChunkCache) -> None:
    global _worker_cache
    _worker_cache = cache


def _encode_in_worker(texts: list[str]) -> IdArrays:
    assert _worker_cache is not None, "worker started without a cache"
    return _worker_cache.encode_arrays(texts)  # arrays pickle as bytes, far faster than lists


def encode_parallel(cache: ChunkCache, texts: Sequence[str], num_workers: int) -> list[list[int]]:
    """`cache.encode(texts)` spread over `num_workers` forked processes, in order.

    Python's dict lookups hold the GIL, so threads do not help; processes do. Without `fork`
    (Windows, and macOS by choice) this runs in the calling process.
    """
    if num_workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return cache.encode(texts)
    tasks = [
        list(texts[start : start + TEXTS_PER_WORKER_TASK])
        for start in range(0, len(texts), TEXTS_PER_WORKER_TASK)
    ]
    context = multiprocessing.get_context("fork")
    with context.Pool(num_workers, initializer=_start_worker, initargs=(cache,)) as pool:
        parts = pool.imap(_encode_in_worker, tasks)
        return list(chain.from_iterable(ids_to_lists(*part) for part in parts))
