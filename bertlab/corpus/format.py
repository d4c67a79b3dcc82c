"""The on-disk format of a pre-training corpus, and its memory-mapped reader `TokenizedCorpus`.

A corpus directory (written by `bertlab.corpus.build.build_corpus`) holds:

    token_ids.bin         (T,) uint16 (uint32 when an id exceeds 65535): all sentences, end to end
    sentence_offsets.npy  (S + 1,) int64: start of each sentence in token_ids, then T
    document_offsets.npy  (D + 1,) int64: index of each document's first sentence, then S
    word_starts.bin       (T,) bool: whether each token starts a word (only with `whole_word`)
    meta.json             format version, counts, dtype, fingerprints, the statistics of the read

Cache: `meta.json` records two fingerprints. The tokenizer fingerprint hashes the vocabulary, the
normalization switches, the `tokenizers` version and this format's version. The corpus fingerprint
hashes the *content* of the files, in order (BLAKE2b over the stored bytes, compressed or not),
and how each is read (its reader and text column: `CorpusSource.key`).
Content rather than path/size/mtime: a copied, moved or touched corpus is still recognised, an
edit that keeps size and mtime is not missed, and reading the bytes costs about 1% of tokenizing
them.
"""

# Shapes: T tokens in the corpus, S sentences, D documents.

from __future__ import annotations

import hashlib
import itertools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import tokenizers

from bertlab.corpus.sources import CorpusSource
from bertlab.tokenizer.wordpiece import Tokenizer

FORMAT_VERSION = 1  # bump when the layout or the splitting/tokenizing of lines changes
TOKEN_IDS_FILE = "token_ids.bin"
SENTENCE_OFFSETS_FILE = "sentence_offsets.npy"
DOCUMENT_OFFSETS_FILE = "document_offsets.npy"
WORD_STARTS_FILE = "word_starts.bin"
META_FILE = "meta.json"
# Every name in a corpus directory: anything else there is not the corpus's, and is kept.
CORPUS_FILES = (
    TOKEN_IDS_FILE,
    SENTENCE_OFFSETS_FILE,
    DOCUMENT_OFFSETS_FILE,
    WORD_STARTS_FILE,
    META_FILE,
)
MAX_UINT16_ID = np.iinfo(np.uint16).max

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


def corpus_fingerprint(sources: Sequence[CorpusSource]) -> str:
    """BLAKE2b of each source's reader and text column and of its files' bytes, in order (see
    the module docstring for why content): the same file read another way is another corpus."""
    digest = hashlib.blake2b()
    for source in sources:
        digest.update(hashlib.blake2b(source.key.encode("utf-8")).digest())
        for path in source.files():
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


def token_dtype(tokenizer: Tokenizer) -> np.dtype:
    """uint16 when every id of the vocabulary fits (BERT's 30522 and 21128 do), else uint32."""
    largest_id = max(tokenizer.get_vocab().values())
    return np.dtype(np.uint16 if largest_id <= MAX_UINT16_ID else np.uint32)
