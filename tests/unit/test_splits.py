"""The experiment's sentence-level split of phrase files such as SST-2's training file."""

from __future__ import annotations

import pytest

from bertlab.data.tasks.classification import Example
from bertlab.data.tasks.splits import phrase_roots, sentence_split

SENTENCES = [
    "the film is a good one",
    "it is bad fun and a mess",
    "goodness knows why",
    "a quiet , careful and very long look at grief",
]


def _phrases() -> list[str]:
    """Every sentence and all its word spans, as SST's phrase-level training file holds them."""
    texts = []
    for sentence in SENTENCES:
        words = sentence.split()
        for length in range(len(words), 0, -1):
            for start in range(len(words) - length + 1):
                texts.append(" ".join(words[start : start + length]))
    return texts


def test_phrase_roots_find_the_sentence_of_every_phrase() -> None:
    texts = ["a good", "the film is a good one", "goodness", "goodness knows why", "good"]
    roots = phrase_roots(texts)
    assert roots == [1, 1, 3, 3, 1]  # "good" is a word of sentence 1, not a piece of "goodness"


def test_phrase_roots_of_long_phrases_check_the_whole_phrase() -> None:
    # Same first three words, different continuations: the longer text does not contain it.
    texts = ["it is bad fun and a mess", "it is bad luck"]
    assert phrase_roots(texts) == [0, 1]


def test_sentence_split_holds_out_whole_sentences_and_none_of_their_phrases() -> None:
    texts = _phrases()
    roots = phrase_roots(texts)
    train, held_out = sentence_split([Example(text, label="1") for text in texts], 0.25)
    assert len(held_out) == 1 and held_out[0].text_a in SENTENCES  # one whole sentence of four
    sentence = held_out[0].text_a
    own = {texts[i] for i, root in enumerate(roots) if texts[root] == sentence}
    assert sentence in own and len(own) > 1
    train_texts = [e.text_a for e in train]
    assert not own & set(train_texts)
    # Everything else stays: every phrase of the other three sentences is on the training side.
    assert len(train_texts) == sum(1 for root in roots if texts[root] != sentence)
    assert {s for s in SENTENCES if s != sentence} <= set(train_texts)


def test_sentence_split_refuses_to_hold_out_everything() -> None:
    with pytest.raises(ValueError, match="too few sentences"):
        sentence_split([Example("one sentence", label="1")], 0.5)
