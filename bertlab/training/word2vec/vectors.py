"""Static word vectors (word2vec) over a tokenized corpus, and a model warm-started from them.

The pre-2018 recipe for transfer: train skip-gram (or CBOW) vectors on unlabeled text (Mikolov
et al. 2013, with gensim), then start a task model's embedding matrix from them and train the
rest from scratch. Here the "words" are the WordPiece pieces of the model's own vocabulary, read
from the same tokenized corpus that pre-training reads, so a piece's row of the embedding matrix
is that piece's vector.

Words, not pieces, for looking at the vectors themselves (`bertlab neighbours word2vec`, the
`most_similar` of the lectures: 青蛙 -> 老鼠, 乌龟): `write_word_corpus` splits plain text into
words once (English with BERT's basic tokenizer, lower-cased; Chinese with jieba) and
`train_word_level_vectors` trains on that file, one word per vector whatever its pieces.

Scale: a vector's coordinates are in gensim's units (a standard deviation of about 0.1 to 0.5),
the rest of a BERT starts at `initializer_range` (0.02). `embedding_rows` multiplies every vector
by one factor, `initializer_range / std(all vectors)`, so the warm-started rows have the
standard deviation of BERT's random rows and keep their directions and relative lengths; pieces
without a vector (the special tokens, pieces the corpus never uses) keep their random rows.
"""

# Shapes: V vocab, H hidden_size.

from __future__ import annotations

import codecs
import gzip
import logging
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from bertlab.core.atomic import atomic_file
from bertlab.core.optional import require
from bertlab.corpus.format import TokenizedCorpus
from bertlab.corpus.sources import CorpusReading, corpus_lines, open_corpus
from bertlab.corpus.text_units import jieba_segmenter
from bertlab.tokenizer.basic import build_normalizer, build_pre_tokenizer
from bertlab.training.word2vec.options import METHODS, WORD_LANGS

if TYPE_CHECKING:  # gensim is imported where it is used: pre-training and fine-tuning run without
    from gensim.models import Word2Vec
    from gensim.models.keyedvectors import KeyedVectors

logger = logging.getLogger(__name__)

VECTORS_FILE = "word_vectors.bin"  # word2vec's binary format: no pickle
_HAS_WORD_CHARACTER = re.compile(r"\w")  # a word, not a punctuation mark
VECTOR_ENCODING = "utf-8-sig"  # vector files' words: UTF-8, a byte order mark skipped
MAX_WORDS_SHOWN = 5  # words named in a warning, at most


@dataclass(frozen=True)
class WordVectorConfig:
    """How the vectors are trained. Defaults are word2vec's (Mikolov et al. 2013; the C tool's
    skip-gram settings, which gensim also uses), except `min_count`: every piece of the
    vocabulary that occurs gets a vector."""

    vector_size: int = 128  # the model's hidden_size, so a vector is an embedding row
    method: str = "skip-gram"  # or "cbow"
    window: int = 5  # word2vec: context words on each side
    negative: int = 5  # word2vec: negative samples per positive pair
    sample: float = 1e-3  # word2vec: down-sampling threshold of frequent words
    epochs: int = 5  # word2vec: passes over the corpus
    min_count: int = 1  # keep every piece that occurs
    seed: int = 0
    workers: int = 0  # threads; 0: one per available core (gensim is only repeatable with 1)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; choose one of {list(METHODS)}")
        for name in ("vector_size", "window", "epochs", "min_count"):
            if getattr(self, name) < 1:
                raise ValueError(f"WordVectorConfig.{name} must be positive")
        if self.negative < 0 or self.workers < 0 or not 0 <= self.sample < 1:
            raise ValueError("need negative >= 0, workers >= 0 and sample in [0, 1)")


class _Sentences:
    """The corpus's sentences as lists of piece ids (strings), re-iterable for every epoch."""

    def __init__(self, corpus: TokenizedCorpus, documents: tuple[int, int]) -> None:
        first, last = documents
        start = int(corpus.document_offsets[first])
        end = int(corpus.document_offsets[last])
        self.token_ids = corpus.token_ids
        self.bounds = np.asarray(corpus.sentence_offsets[start : end + 1], dtype=np.int64)

    def __iter__(self) -> Iterator[list[str]]:
        for begin, end in zip(self.bounds[:-1], self.bounds[1:], strict=True):
            if end > begin:
                yield [str(piece) for piece in self.token_ids[begin:end].tolist()]


def untrained_word2vec(config: WordVectorConfig, **settings: Any):
    """gensim's `Word2Vec` with `config`'s method, sizes, sampling, seed and workers (and
    `settings`, e.g. its epochs), before its vocabulary is built.

    Raises:
        MissingPackageError: gensim is not installed.
    """
    models = require("gensim.models", "training word vectors")
    return models.Word2Vec(
        vector_size=config.vector_size,
        sg=METHODS[config.method],
        window=config.window,
        negative=config.negative,
        sample=config.sample,
        min_count=config.min_count,
        seed=config.seed,
        workers=config.workers or len(os.sched_getaffinity(0)),
        **settings,
    )


def train_word_vectors(
    corpus: TokenizedCorpus, config: WordVectorConfig, documents: tuple[int, int] | None = None
) -> KeyedVectors:
    """Train piece vectors on the corpus's sentences; keys are piece ids as strings.

    Args:
        corpus: a tokenized corpus (`bertlab.corpus.build.build_corpus`).
        config: the word2vec settings.
        documents: (first, end) documents to read; all when None (pre-training holds out the
            corpus's last documents: pass its training range to leave them unseen).

    Raises:
        ValueError: the documents hold no sentence.
    """
    sentences = _Sentences(corpus, documents or (0, corpus.num_documents))
    if len(sentences.bounds) < 2:
        raise ValueError("no sentences to train word vectors on")
    model = _word2vec(config, corpus_iterable=sentences)
    logger.info(
        "word vectors: %d pieces x %d, %d epochs over %d sentences",
        len(model.wv),
        config.vector_size,
        config.epochs,
        len(sentences.bounds) - 1,
    )
    return model.wv


def save_vectors(vectors: KeyedVectors, path: str | os.PathLike) -> None:
    """Write the vectors in word2vec's binary format, atomically (never a pickle)."""
    with atomic_file(path) as temporary:
        vectors.save_word2vec_format(str(temporary), binary=True)


def load_vectors(path: str | os.PathLike) -> KeyedVectors:
    """Word vectors from a file in one of the formats word2vec tools write: word2vec's binary
    format (`save_vectors`, the C tool's `-binary 1`), its text format (a "COUNT SIZE" header,
    then one word and its numbers per line: `-binary 0`, gensim's `binary=False`) or GloVe's
    text format (the same lines without the header). gzip-compressed files (`.gz`) too, and a
    UTF-8 byte order mark at the start (as some Windows tools write it). A word given several
    vectors keeps its first, with a warning (gensim's own reading left empty rows behind).

    Raises:
        MissingPackageError: gensim is not installed.
        ValueError: the file is in none of these formats, is broken, or has a header whose
            numbers the file does not have (named, in one line, with the number that is wrong).
    """
    keyed_vectors = require("gensim.models.keyedvectors", "reading word vectors")
    binary, header = vector_file_format(path)
    if header and not binary:
        _check_vector_count(path)
    duplicates = _DuplicateWords()
    gensim_logger = logging.getLogger(keyed_vectors.__name__)
    gensim_logger.addFilter(duplicates)
    try:
        vectors = keyed_vectors.KeyedVectors.load_word2vec_format(
            str(path), binary=binary, no_header=not header, encoding=VECTOR_ENCODING
        )
    except EOFError as error:  # a binary file shorter than its header says
        count, size = _header_numbers(path)
        raise ValueError(
            f"{path}: the file ends before the {count:,} vectors of {size} numbers that its "
            f"header '{count} {size}' announces: one of the two numbers is wrong, or the file "
            "is cut"
        ) from error
    except ValueError as error:  # UnicodeDecodeError is a ValueError
        kind = "binary" if binary else "text"
        raise ValueError(f"{path} is not a readable word2vec {kind} file ({error})") from error
    finally:
        gensim_logger.removeFilter(duplicates)
    if duplicates.words:
        vectors = _first_vector_of_each(vectors, keyed_vectors.KeyedVectors)
        shown = ", ".join(repr(word) for word in duplicates.words[:MAX_WORDS_SHOWN])
        more = ", ..." if len(duplicates.words) > MAX_WORDS_SHOWN else ""
        logger.warning(
            "%s: %d word(s) with more than one vector (%s%s); the first of each is kept",
            path,
            len(duplicates.words),
            shown,
            more,
        )
    return vectors


def vector_file_format(path: str | os.PathLike) -> tuple[bool, bool]:
    """(binary, has a header) of a word-vector file, read from its first two lines.

    Both word2vec formats start with a text line "COUNT SIZE"; in the text format the next line
    is a word and SIZE numbers, in the binary one a word and SIZE raw float32s. A first line of
    a word and numbers is GloVe's text format, without a header.

    Raises:
        ValueError: the file is none of these (named, with what its first line holds), or a
            text file whose second line has another number of numbers than its header says.
    """
    first, second = _first_lines(path)
    header = first.split()
    if len(header) == 2 and all(field.isdigit() for field in header):
        if _is_text_vector_line(second, int(header[1])):
            return False, True
        if _is_text_vector_line(second):  # text, but not of the header's size
            size = len(second.split()) - 1
            raise ValueError(
                f"{path}: its header '{header[0].decode()} {header[1].decode()}' says "
                f"{header[1].decode()} numbers per word, but line 2 has a word and {size}; "
                "correct the header's second number"
            )
        return True, True
    if _is_text_vector_line(first):
        return False, False
    shown = first[:60].decode("utf-8", errors="replace").rstrip()
    raise ValueError(
        f"{path} is not a word-vector file: its first line {shown!r} is neither word2vec's "
        '"COUNT SIZE" header nor a word followed by numbers'
    )


def _open_vectors(path: str | os.PathLike):
    """The file as a binary stream (gzip-compressed when its name ends in .gz)."""
    opener = gzip.open if str(path).endswith(".gz") else open
    return opener(path, "rb")


def _first_lines(path: str | os.PathLike) -> tuple[bytes, bytes]:
    """The first two lines of a word-vector file, without a UTF-8 byte order mark."""
    try:
        with _open_vectors(path) as stream:
            first = stream.readline(1 << 16).removeprefix(codecs.BOM_UTF8)
            second = stream.readline(1 << 20)
    except (OSError, EOFError) as error:
        raise ValueError(f"cannot read word vectors from {path}: {error}") from error
    return first, second


def _header_numbers(path: str | os.PathLike) -> tuple[int, int]:
    """COUNT and SIZE of a word2vec file's header (checked by `vector_file_format`)."""
    count, size = _first_lines(path)[0].split()
    return int(count), int(size)


def _check_vector_count(path: str | os.PathLike) -> None:
    """Refuse a text file with another number of vector lines than its header's COUNT (gensim
    reads COUNT lines: more are dropped without a word, fewer end in "file otherwise damaged").

    Raises:
        ValueError: naming both numbers.
    """
    count, size = _header_numbers(path)
    try:
        with _open_vectors(path) as stream:
            stream.readline()  # the header
            lines = sum(1 for line in stream if line.strip())
    except (OSError, EOFError) as error:
        raise ValueError(f"cannot read word vectors from {path}: {error}") from error
    if lines != count:
        raise ValueError(
            f"{path}: its header '{count} {size}' says {count:,} words, but the file has "
            f"{lines:,} lines of vectors; correct the header's first number"
        )


class _DuplicateWords(logging.Filter):
    """Takes gensim's "duplicate word" warnings (one line per word) while a file is read: the
    words are said in one warning, with what is kept."""

    def __init__(self) -> None:
        super().__init__()
        self.words: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith("duplicate word"):
            self.words.append(record.args[0])
            return False
        return True


def _first_vector_of_each(vectors: KeyedVectors, keyed_vectors_class: type) -> KeyedVectors:
    """`vectors` without the empty rows that gensim leaves for a word's repeats (their key None,
    their norm 0: NaN similarities): each word's first vector, in the file's order."""
    count = len(vectors.key_to_index)  # the distinct words, rows 0..count-1
    clean = keyed_vectors_class(vectors.vector_size, dtype=vectors.vectors.dtype)
    clean.add_vectors(vectors.index_to_key[:count], vectors.vectors[:count])
    return clean


def _is_text_vector_line(line: bytes, size: int | None = None) -> bool:
    """Whether `line` reads as a word and `size` (any number of, when None) decimal numbers."""
    try:
        fields = line.decode("utf-8", errors="replace").split()  # a word's bytes may be latin-1
        numbers = [float(field) for field in fields[1:]]
    except ValueError:
        return False
    return bool(numbers) and (size is None or len(numbers) == size)


def embedding_rows(
    vectors: KeyedVectors, embeddings: torch.Tensor, std: float
) -> tuple[torch.Tensor, int]:
    """The embedding matrix with every piece that has a vector replaced by it, rescaled.

    Args:
        vectors: from `train_word_vectors` (keys: piece ids as strings).
        embeddings: (V, H) the model's current (random) rows, kept for pieces without a vector.
        std: the standard deviation the vectors are rescaled to (`initializer_range`).

    Returns:
        ((V, H) float32 rows, number of pieces that took a vector).

    Raises:
        ValueError: the vectors' size is not the embeddings' H, or a key is not a piece id.
    """
    num_pieces, hidden = embeddings.shape
    if vectors.vector_size != hidden:
        raise ValueError(f"vectors of size {vectors.vector_size} for embeddings of size {hidden}")
    ids = [int(key) for key in vectors.index_to_key]
    if any(not 0 <= index < num_pieces for index in ids):
        raise ValueError(f"a vector's piece id lies outside the vocabulary of {num_pieces}")
    values = np.asarray(vectors.vectors, dtype=np.float32)  # (pieces, H)
    scale = std / float(values.std())  # over every coordinate of every vector
    matrix = torch.from_numpy(values.copy())
    rows = embeddings.detach().clone().float()  # (V, H)
    rows[torch.tensor(ids, dtype=torch.int64)] = matrix * scale
    return rows, len(ids)


def warm_start(embeddings: torch.nn.Embedding, vectors: KeyedVectors, std: float) -> int:
    """Copy `embedding_rows` into a model's word embeddings; return the pieces warm-started."""
    rows, count = embedding_rows(vectors, embeddings.weight, std)
    with torch.no_grad():
        embeddings.weight.copy_(rows)
    return count


# --- words instead of pieces ----------------------------------------------------------------------


def word_splitter(lang: str) -> Callable[[str], list[str]]:
    """text -> its words, punctuation left out.

    English: BERT's basic tokenizer (uncased: lower-cased, accents stripped; split on whitespace
    and punctuation), "Don't panic!" -> ["don", "t", "panic"]. Chinese: jieba's words,
    "我喜欢自然语言处理" -> ["我", "喜欢", "自然语言", "处理"].

    Raises:
        ValueError: a language other than WORD_LANGS.
    """
    if lang not in WORD_LANGS:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(WORD_LANGS)}")
    if lang == "zh":
        segment = jieba_segmenter()

        def chinese(text: str) -> list[str]:
            return [w for w in segment(text) if w.strip() and _HAS_WORD_CHARACTER.search(w)]

        return chinese
    normalizer = build_normalizer(lowercase=True, strip_accents=True)
    pre_tokenizer = build_pre_tokenizer(handle_chinese_chars=True)

    def english(text: str) -> list[str]:
        words = pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))
        return [word for word, _ in words if _HAS_WORD_CHARACTER.search(word)]

    return english


def write_word_corpus(
    paths: Sequence[str | os.PathLike],
    lang: str,
    out_path: str | os.PathLike,
    max_words: int | None = None,
    reading: CorpusReading | None = None,
) -> int:
    """Split every line of the corpus's text into words (`word_splitter`) and write them, one
    line per input line, space-separated: the `corpus_file` word2vec reads. Returns the words
    written.

    Args:
        paths: files, folders or patterns in any corpus format (`bertlab.corpus.sources`).
        lang: how words are split, one of WORD_LANGS.
        out_path: the file to write.
        max_words: stop after this many words.
        reading: the format and the text's column; None: each file by its suffix, "text".

    Raises:
        ValueError: no word at all, an unknown language, a file that does not fit its format.
    """
    split = word_splitter(lang)
    sources = open_corpus(paths, reading)
    count = 0
    with atomic_file(out_path) as temporary, open(temporary, "w", encoding="utf-8") as out:
        for line in corpus_lines(sources):
            words = split(line)
            if max_words is not None:
                words = words[: max_words - count]
            if words:
                out.write(" ".join(words) + "\n")
                count += len(words)
            if max_words is not None and count >= max_words:
                break
    if not count:
        raise ValueError(f"no words in {', '.join(map(str, paths))}")
    return count


def train_word_level_vectors(
    corpus_file: str | os.PathLike, config: WordVectorConfig
) -> KeyedVectors:
    """word2vec over a file of `write_word_corpus`: keys are the words themselves.

    Raises:
        ValueError: no word occurs `config.min_count` times.
    """
    model = _word2vec(config, corpus_file=str(corpus_file))
    logger.info("word vectors: %d words x %d", len(model.wv), config.vector_size)
    return model.wv


def nearest_words(vectors: KeyedVectors, word: str, top_k: int = 10) -> list[tuple[str, float]]:
    """gensim's `most_similar`: the `top_k` words of highest cosine similarity to `word`.

    Raises:
        ValueError: the word has no vector (unseen, or rarer than the training's min_count).
    """
    if word not in vectors.key_to_index:
        raise ValueError(
            f"{word!r} has no vector: it was not in the corpus, or fewer times than min_count"
        )
    return [(other, float(score)) for other, score in vectors.most_similar(word, topn=top_k)]


def analogy(
    vectors: KeyedVectors, a: str, b: str, c: str, top_k: int = 10
) -> list[tuple[str, float]]:
    """ "a is to b as c is to ?" (Mikolov et al. 2013): the words nearest a - b + c by cosine,
    a, b and c left out, as gensim's `most_similar(positive=[a, c], negative=[b])` finds them
    ("king man woman": king - man + woman, queen in the paper's example).

    Raises:
        ValueError: a word without a vector, named.
    """
    missing = [word for word in (a, b, c) if word not in vectors.key_to_index]
    if missing:
        raise ValueError(
            f"{', '.join(map(repr, missing))} {'has' if len(missing) == 1 else 'have'} no "
            "vector: not in the corpus, or fewer times than min_count"
        )
    near = vectors.most_similar(positive=[a, c], negative=[b], topn=top_k)
    return [(other, float(score)) for other, score in near]


def _word2vec(config: WordVectorConfig, **source: Any) -> Word2Vec:
    """gensim's Word2Vec trained as `config` says, on `corpus_iterable=` or `corpus_file=`.

    The vocabulary is built first, as gensim's constructor does, so that an empty one is
    refused in our words (gensim's own: "you must first build vocabulary before training").

    Raises:
        MissingPackageError: gensim is not installed.
        ValueError: no word occurs `config.min_count` times.
    """
    model = untrained_word2vec(config, epochs=config.epochs)
    model.build_vocab(**source)
    if not len(model.wv):
        raise ValueError(
            f"no word occurs at least {config.min_count} times (min_count) in the corpus of "
            f"{model.corpus_total_words:,} words; lower min_count or give a larger corpus"
        )
    model.train(
        **source,
        total_examples=model.corpus_count,
        total_words=model.corpus_total_words,
        epochs=model.epochs,
    )
    return model
