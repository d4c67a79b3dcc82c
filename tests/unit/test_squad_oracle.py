"""QA mapping oracle: gold spans survive tokenization, windowing and decoding (EM 100).

For every question of the shared SQuAD file, a high start and end score is put on the labelled
answer tokens of every window that holds the whole answer (0 elsewhere); decoding must give back
a gold answer text under the official normalization. About 5 s for the 5,397 questions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bertlab.core.metrics import squad_em_f1, squad_exact_match
from bertlab.data.tasks.squad import gold_answers, read_squad
from bertlab.data.tasks.squad_encoding import MAX_ANSWER_LENGTH, decode_squad, encode_squad
from bertlab.tokenizer.wordpiece import Tokenizer

ORACLE_SCORE = 10.0
# As tests/conftest.py's `shared_data`, which is function-scoped; encoding once per module saves
# a few seconds.
SHARED_DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture(scope="module")
def oracle():
    shared_data = SHARED_DATA
    squad_path = shared_data / "squad_v1.1" / "train-part.json"
    vocab_path = shared_data / "vocab" / "bert-base-uncased-vocab.txt"
    if not squad_path.is_file() or not vocab_path.is_file():
        pytest.skip("shared SQuAD file or uncased vocabulary missing")
    examples = read_squad(squad_path)
    features = encode_squad(examples, Tokenizer.from_pretrained(vocab_path))  # run_squad defaults
    start_logits, end_logits = [], []
    for feature in features:
        starts, ends = np.zeros(len(feature.input_ids)), np.zeros(len(feature.input_ids))
        if feature.start_positions:  # 0: the answer is not fully inside this window
            starts[feature.start_positions] = ORACLE_SCORE
            ends[feature.end_positions] = ORACLE_SCORE
        start_logits.append(starts)
        end_logits.append(ends)
    return examples, features, start_logits, end_logits


def labelled_lengths(features) -> dict[int, int]:
    """Example index -> pieces in its labelled answer span."""
    return {
        f.example_index: f.end_positions - f.start_positions + 1
        for f in features
        if f.start_positions
    }


def test_every_question_is_answerable_in_some_window(oracle):
    examples, features, _, _ = oracle
    assert len(examples) == 5397
    assert set(labelled_lengths(features)) == set(range(len(examples)))


def test_decoding_the_gold_spans_gives_exact_match_100(oracle):
    examples, features, start_logits, end_logits = oracle
    longest = max(labelled_lengths(features).values())
    answers = decode_squad(features, start_logits, end_logits, examples, max_answer_length=longest)
    assert squad_em_f1(answers, gold_answers(examples))["exact_match"] == 100.0


def test_at_max_answer_length_30_only_longer_answers_are_missed(oracle):
    examples, features, start_logits, end_logits = oracle
    answers = decode_squad(features, start_logits, end_logits, examples)
    missed = {
        index
        for index, example in enumerate(examples)
        if not any(squad_exact_match(answers[example.id], a.text) for a in example.answers)
    }
    too_long = {
        index for index, length in labelled_lengths(features).items() if length > MAX_ANSWER_LENGTH
    }
    assert missed == too_long
    assert len(too_long) == 3
