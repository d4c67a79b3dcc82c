"""Bulk encoding without offsets through a cache of whitespace-separated chunks. No torch import.

Google's basic tokenizer deletes control characters, maps whitespace to a space, and then treats
every whitespace-separated chunk on its own: lowercasing, accent stripping, punctuation splitting
and WordPiece never look past a space. NFC and the final-sigma rule do not either, since a space is
a starter that composes with nothing and is neither cased nor case-ignorable; special tokens such
as `[MASK]` contain no space. The ids of a text are therefore the ids of its chunks, concatenated:
`"the cat, the dog" -> ids("the") + ids("cat,") + ids("the") + ids("dog")`.

Natural text repeats chunks heavily (the 150 MB English sample has 24M chunks but only 1.1M
distinct ones), so `ChunkCache` splits a text with `str.split()` (in C), looks each chunk up in a
dict, and sends only the chunks it has not seen to the exact `tokenizers` pipeline. Outputs are
those of that pipeline by construction; the tests compare the two.

`str.split()` splits on `str.isspace()` characters. They are BERT's whitespace except for a few
control characters (U+000B, U+000C, U+001C-U+001F, U+0085) that BERT deletes rather than splits
on; a text containing one goes through the exact pipeline whole.
"""

from __future__ import annotations

import multiprocessing
import re
import threading
from collections.abc import Sequence
from itertools import accumulate, chain

import numpy as np
from tokenizers import Tokenizer as BackendTokenizer

MAX_CACHED_CHUNKS = 1 << 20  # ~1M chunks, ~200 MB; the cache starts afresh when full
CHUNKS_PER_MISS_TEXT = 128  # misses are encoded joined by spaces, this many per text (fastest)
TEXTS_PER_WORKER_TASK = 5000  # lines sent to a worker process at a time


class ChunkCache:
    """Encode texts (no special tokens) as the exact backend does, caching each chunk's ids.

    Example:
        >>> cache = ChunkCache(tokenizer.backend, split_differs="\\x0b\\x0c")
        >>> cache.encode(["unaffable unaffable!"])  # "unaffable" is encoded once
        [[un, ##aff, ##able, un, ##aff, ##able, !]]   (as ids)

    The cache is a memo of a pure function: it never changes what `encode` returns. A lock makes
    `encode` safe to call from several threads. The cache is not shared between processes (each
    worker of `encode_parallel` fills its own) and is left out when the object is pickled.
    """

    def __init__(
        self,
        backend: BackendTokenizer,
        split_differs: str,
        max_entries: int = MAX_CACHED_CHUNKS,
    ) -> None:
        """Args:
        backend: the exact pipeline (normalizer, pre-tokenizer, WordPiece, special tokens).
        split_differs: characters on which `str.split()` and BERT's whitespace rule disagree.
        max_entries: the cache is emptied when it reaches this many chunks.
        """
        self._backend = backend
        self._split_differs_chars = split_differs
        self._split_differs = re.compile(f"[{re.escape(split_differs)}]") if split_differs else None
        self._max_entries = max_entries
        self._cache: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()
        # Cached ids share one int object per id instead of one per occurrence (28 bytes each).
        self._id_objects = list(range(max(backend.get_vocab().values()) + 1))

    def __getstate__(self) -> dict:
        return {
            "backend": self._backend,
            "split_differs": self._split_differs_chars,
            "max_entries": self._max_entries,
        }

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)

    def __len__(self) -> int:
        return len(self._cache)

    def encode(self, texts: Sequence[str]) -> list[list[int]]:
        """Ids of each text, no [CLS]/[SEP]; equal to `backend.encode_batch_fast(texts)`."""
        with self._lock:
            return self._encode(texts)

    def _encode(self, texts: Sequence[str]) -> list[list[int]]:
        results: list[list[int] | None] = [None] * len(texts)
        chunked: list[tuple[int, list[str]]] = []
        exact: list[int] = []
        for index, text in enumerate(texts):
            if self._split_differs is not None and self._split_differs.search(text):
                exact.append(index)
            else:
                chunked.append((index, text.split()))
        if exact:
            encodings = self._backend.encode_batch_fast(
                [texts[index] for index in exact], add_special_tokens=False
            )
            for index, encoding in zip(exact, encodings, strict=True):
                results[index] = encoding.ids
        cache = self._cache
        missing = list(dict.fromkeys(c for _, chunks in chunked for c in chunks if c not in cache))
        if len(cache) + len(missing) > self._max_entries:
            cache.clear()
            missing = list(dict.fromkeys(c for _, chunks in chunked for c in chunks))
        cache.update(zip(missing, self._encode_chunks(missing), strict=True))
        lookup = cache.__getitem__
        for index, chunks in chunked:
            results[index] = list(chain.from_iterable(map(lookup, chunks)))
        return results  # type: ignore[return-value]  # every slot is filled above

    def _encode_chunks(self, chunks: list[str]) -> list[tuple[int, ...]]:
        """Ids of each chunk, from the exact backend run on texts of chunks joined by spaces.

        A token belongs to the chunk its first character falls in (offsets are in characters).
        """
        as_shared = self._id_objects.__getitem__
        pieces: list[tuple[int, ...]] = []
        groups = [
            chunks[start : start + CHUNKS_PER_MISS_TEXT]
            for start in range(0, len(chunks), CHUNKS_PER_MISS_TEXT)
        ]
        texts = [" ".join(group) for group in groups]
        encodings = self._backend.encode_batch(texts, add_special_tokens=False)
        for group, encoding in zip(groups, encodings, strict=True):
            ids = encoding.ids
            # ends[i]: one past chunk i and its separating space.
            ends = np.fromiter(accumulate(len(c) + 1 for c in group), np.int64, len(group))
            starts = np.array(encoding.offsets, dtype=np.int64).reshape(-1, 2)[:, 0]
            owners = np.searchsorted(ends, starts, side="right")  # (tokens,)
            bounds = np.searchsorted(owners, np.arange(len(group) + 1)).tolist()
            pieces.extend(
                tuple(map(as_shared, ids[low:high]))
                for low, high in zip(bounds, bounds[1:], strict=False)
            )
        return pieces


# A worker process's own cache, set once by `_start_worker` (the standard `multiprocessing`
# initializer pattern): passing it with every task would copy it each time.
_worker_cache: ChunkCache | None = None


def _start_worker(cache: ChunkCache) -> None:
    global _worker_cache
    _worker_cache = cache


def _encode_in_worker(texts: list[str]) -> list[list[int]]:
    assert _worker_cache is not None, "worker started without a cache"
    return _worker_cache.encode(texts)


def encode_parallel(cache: ChunkCache, texts: Sequence[str], num_workers: int) -> list[list[int]]:
    """`cache.encode(texts)` spread over `num_workers` forked processes, in order.

    Python's dict lookups and list building are the cost once the cache is warm, and they hold
    the GIL, so threads do not help; processes do. Without `fork` (Windows, and macOS by
    choice) this runs in the calling process.
    """
    if num_workers <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return cache.encode(texts)
    tasks = [
        list(texts[start : start + TEXTS_PER_WORKER_TASK])
        for start in range(0, len(texts), TEXTS_PER_WORKER_TASK)
    ]
    context = multiprocessing.get_context("fork")
    with context.Pool(num_workers, initializer=_start_worker, initargs=(cache,)) as pool:
        return [ids for part in pool.imap(_encode_in_worker, tasks) for ids in part]
