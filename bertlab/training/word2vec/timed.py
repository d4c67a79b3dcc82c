"""word2vec for a time budget: skip-gram vectors of a tokenized corpus's pieces trained for a
number of seconds instead of a number of epochs, so that they compare with networks pre-trained
for the same minutes (`bertlab experiment lineage`).

The vocabulary is counted from the corpus's piece ids at once (no pass over the text); then the
sentences are read in order, from the first document to the last of the range and around again,
in chunks of CHUNK_SENTENCES, each trained in one gensim call, until the seconds are spent. The
learning rate falls linearly with the time spent, from gensim's `alpha` to its `min_alpha`
when the budget ends, as word2vec's falls over its words: each chunk starts where the clock
stands and ends where the last chunk's speed says it will.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from bertlab.corpus.format import TokenizedCorpus
from bertlab.training.word2vec.vectors import WordVectorConfig, untrained_word2vec

if TYPE_CHECKING:
    from gensim.models.keyedvectors import KeyedVectors

CHUNK_SENTENCES = 2000  # sentences per gensim call: a fraction of a second on a laptop core


@dataclass(frozen=True)
class TimedVectors:
    """What a timed run trained: words read (`raw_words`, pieces of the corpus), words trained
    after frequent-word down-sampling (`trained_words`), passes over the range (`epochs`,
    fractional) and seconds."""

    raw_words: int
    trained_words: int
    epochs: float
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "raw_words": self.raw_words,
            "trained_words": self.trained_words,
            "epochs": self.epochs,
            "seconds": self.seconds,
        }


def _sentences(corpus: TokenizedCorpus, documents: tuple[int, int]) -> np.ndarray:
    """The sentence bounds of `documents` (first, end): (S + 1,) int64 offsets into token_ids."""
    start = int(corpus.document_offsets[documents[0]])
    end = int(corpus.document_offsets[documents[1]])
    bounds = np.asarray(corpus.sentence_offsets[start : end + 1], dtype=np.int64)
    return bounds


def train_word_vectors_for(
    corpus: TokenizedCorpus,
    config: WordVectorConfig,
    seconds: float,
    documents: tuple[int, int] | None = None,
) -> tuple[KeyedVectors, TimedVectors]:
    """Train piece vectors for `seconds` of wall-clock time; keys are piece ids as strings.

    Args:
        corpus: a tokenized corpus (`bertlab.corpus.build.build_corpus`).
        config: the word2vec settings; `epochs` is ignored (the time decides).
        seconds: the budget.
        documents: (first, end) documents to read; all when None.

    Raises:
        MissingPackageError: gensim is not installed.
        ValueError: no sentence in the documents, or a budget that is not positive.
    """
    if not seconds > 0:
        raise ValueError(f"the budget must be positive, got {seconds}")
    model = untrained_word2vec(config)
    bounds = _sentences(corpus, documents or (0, corpus.num_documents))
    bounds = bounds[np.concatenate([[True], np.diff(bounds) > 0])]  # no empty sentences
    if len(bounds) < 2:
        raise ValueError("no sentences to train word vectors on")
    token_ids = np.asarray(corpus.token_ids[bounds[0] : bounds[-1]])
    counts = np.bincount(token_ids)
    frequencies = {str(piece): int(count) for piece, count in enumerate(counts) if count}
    model.build_vocab_from_freq(frequencies, corpus_count=len(bounds) - 1)
    offsets = bounds - bounds[0]
    num_sentences = len(offsets) - 1
    started = time.perf_counter()
    raw = trained = position = 0
    elapsed = 0.0
    while elapsed < seconds:
        indices = [(position + i) % num_sentences for i in range(CHUNK_SENTENCES)]
        chunk = [
            [str(piece) for piece in token_ids[offsets[i] : offsets[i + 1]].tolist()]
            for i in indices
        ]
        speed = raw / elapsed if raw and elapsed > 0 else None  # words per second so far
        words = sum(len(sentence) for sentence in chunk)
        end = (elapsed + words / speed) / seconds if speed else elapsed / seconds
        alpha = _alpha(elapsed / seconds, model)
        trained_now, raw_now = model.train(
            corpus_iterable=chunk,
            total_examples=len(chunk),
            epochs=1,
            start_alpha=alpha,
            end_alpha=_alpha(end, model),
        )
        trained += trained_now
        raw += raw_now
        position = (position + CHUNK_SENTENCES) % num_sentences
        elapsed = time.perf_counter() - started
    run = TimedVectors(raw, trained, raw / len(token_ids), elapsed)
    return model.wv, run


def _alpha(spent: float, model: Any) -> float:
    """The learning rate when `spent` (0 to 1) of the budget is spent: linear from gensim's
    alpha to its min_alpha, as word2vec's over its words."""
    spent = min(max(spent, 0.0), 1.0)
    return model.alpha - (model.alpha - model.min_alpha) * spent
