"""Task examples -> model inputs: first-piece labels, word mapping, truncation, QA, collate."""

from __future__ import annotations

import logging
import random

import numpy as np
import pytest
import torch

from bertlab.data.collate import (
    collate_task_batch,
    feature_lengths,
    length_grouped_batches,
    sorted_length_batches,
)
from bertlab.data.tasks.classification import Example
from bertlab.data.tasks.encoding import (
    encode_classification,
    encode_multiple_choice,
    encode_tagging,
    first_piece_labels,
    word_labels,
)
from bertlab.data.tasks.multiple_choice import MultipleChoiceExample
from bertlab.data.tasks.ner import TaggedSentence
from bertlab.data.tasks.squad import Answer, SquadExample
from bertlab.data.tasks.squad_encoding import (
    context_windows,
    decode_squad,
    encode_squad,
    is_max_context,
)
from bertlab.network.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS, Tokenizer

WORDS = (
    "the cat sat on mat johan ##son lives in paris who ? . , she opens door walks flies "
    "gold golden ##en ten ##fold ada love ##lace wrote cafe is a b c d e f g h 中 国 人"
).split()
PAD, UNK, CLS, SEP = 0, 1, 2, 3
TAGS = ("O", "B-PER", "I-PER", "B-LOC")
LABEL2ID = {tag: index for index, tag in enumerate(TAGS)}


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer({token: index for index, token in enumerate([*SPECIAL_TOKENS, *WORDS])})


def ids(tokenizer: Tokenizer, text: str) -> list[int]:
    return tokenizer.convert_tokens_to_ids(text.split())


# --- classification ---------------------------------------------------------------------------


def test_classification_encodes_pairs_with_class_ids(tokenizer):
    examples = [Example("the cat", "sat", label="1"), Example("on mat", label="0")]
    features = encode_classification(examples, tokenizer, 16, {"0": 0, "1": 1})
    assert features[0] == {
        "input_ids": [CLS, *ids(tokenizer, "the cat"), SEP, *ids(tokenizer, "sat"), SEP],
        "token_type_ids": [0, 0, 0, 0, 1, 1],
        "labels": 1,
    }
    assert features[1]["input_ids"] == [CLS, *ids(tokenizer, "on mat"), SEP]
    assert features[1]["labels"] == 0


def test_classification_regression_and_unlabeled(tokenizer):
    examples = [Example("the cat", "sat", label=3.5), Example("a b", "c")]
    features = encode_classification(examples, tokenizer, 16, None)
    assert features[0]["labels"] == 3.5
    assert "labels" not in features[1]


def test_classification_rejects_an_unknown_label(tokenizer):
    with pytest.raises(ValueError, match="'2' is not one of the labels"):
        encode_classification([Example("the", label="2")], tokenizer, 16, {"0": 0, "1": 1})


def test_classification_truncation_is_counted_in_one_warning(tokenizer, caplog):
    examples = [
        Example("a b c d e f g h"),  # 10 tokens with specials
        Example("a b c d e f", "g h"),  # 11 tokens: the longer side loses pieces first
        Example("a b"),
    ]
    with caplog.at_level(logging.WARNING):
        features = encode_classification(examples, tokenizer, 7, None)
    assert [len(feature["input_ids"]) for feature in features] == [7, 7, 4]
    a_side, b_side = ids(tokenizer, "a b"), ids(tokenizer, "g h")
    assert features[1]["input_ids"] == [CLS, *a_side, SEP, *b_side, SEP]
    warnings = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1 and "2 of 3 examples" in warnings[0].getMessage()


# --- tagging ----------------------------------------------------------------------------------


def test_tagging_labels_the_first_piece_of_each_word(tokenizer):
    sentence = TaggedSentence(("Johanson", "lives", "in", "Paris"), ("B-PER", "O", "O", "B-LOC"))
    (feature,) = encode_tagging([sentence], tokenizer, 16, LABEL2ID)
    assert feature["input_ids"] == [CLS, *ids(tokenizer, "johan ##son lives in paris"), SEP]
    assert feature["labels"] == [-100, 1, -100, 0, 0, 3, -100]
    assert feature["word_ids"] == [None, 0, 0, 1, 2, 3, None]
    assert feature["num_words"] == 4


def test_first_piece_labels_rejects_an_unknown_tag():
    with pytest.raises(ValueError, match="B-ORG"):
        first_piece_labels([None, 0, None], ("B-ORG",), LABEL2ID)


def test_words_without_pieces_still_get_a_tag(tokenizer):
    # U+200B and U+0007 are deleted by BERT's rules: those words have no token at all.
    words = ("Johanson", "\u200b", "lives", "\x07", "in")
    sentence = TaggedSentence(words, ("B-PER", "O", "O", "O", "O"))
    (feature,) = encode_tagging([sentence], tokenizer, 16, LABEL2ID)
    assert feature["word_ids"] == [None, 0, 0, 2, 4, None]
    predictions = np.zeros((1, 9), dtype=np.int64)  # batch-padded past the feature's 6 tokens
    predictions[0, 1] = LABEL2ID["B-PER"]
    predictions[0, 2] = LABEL2ID["I-PER"]  # a later piece: ignored
    tags = word_labels([feature], predictions, TAGS)
    assert tags == [["B-PER", "O", "O", "O", "O"]]
    assert len(tags[0]) == len(words)


def test_chinese_characters_are_words(tokenizer):
    sentence = TaggedSentence(("中", "国", "人"), ("B-LOC", "I-PER", "O"))
    (feature,) = encode_tagging([sentence], tokenizer, 16, LABEL2ID)
    assert feature["word_ids"] == [None, 0, 1, 2, None]
    assert feature["labels"] == [-100, 3, 2, 0, -100]


def test_tagging_truncation_counts_lost_words_and_maps_them_to_o(tokenizer, caplog):
    long = TaggedSentence(("Johanson", "lives", "in", "Paris"), ("B-PER", "O", "O", "B-LOC"))
    short = TaggedSentence(("cat",), ("O",))
    with caplog.at_level(logging.WARNING):
        features = encode_tagging([long, short], tokenizer, 5, LABEL2ID)
    # 3 pieces fit: johan ##son lives; "in" and "Paris" are lost.
    assert features[0]["word_ids"] == [None, 0, 0, 1, None]
    assert features[0]["labels"] == [-100, 1, -100, 0, -100]
    message = caplog.records[-1].getMessage()
    assert "1 of 2 sentences" in message and "2 lost words" in message
    predictions = [[3, 3, 3, 3, 3], [0, 0, 0]]
    assert word_labels(features, predictions, TAGS) == [["B-LOC", "B-LOC", "O", "O"], ["O"]]


def test_word_labels_checks_the_rows(tokenizer):
    (feature,) = encode_tagging([TaggedSentence(("cat",), ("O",))], tokenizer, 8, LABEL2ID)
    with pytest.raises(ValueError, match="shorter"):
        word_labels([feature], [[0, 0]], TAGS)
    with pytest.raises(ValueError, match="1 features but 2"):
        word_labels([feature], [[0, 0, 0], [0, 0, 0]], TAGS)


# --- multiple choice --------------------------------------------------------------------------


def test_multiple_choice_pairs_context_with_start_and_ending(tokenizer, caplog):
    examples = [
        MultipleChoiceExample("1", "she opens the door .", "she", ("walks in .", "flies ."), 0),
        MultipleChoiceExample("2", "the cat", "", ("sat on the mat .", "flies"), 1),
    ]
    with caplog.at_level(logging.WARNING):
        features = encode_multiple_choice(examples, tokenizer, 11)
    # Choice 0 has 12 tokens: the longer side, the context, loses its last piece.
    assert features[0]["input_ids"] == [
        [CLS, *ids(tokenizer, "she opens the door"), SEP, *ids(tokenizer, "she walks in ."), SEP],
        [CLS, *ids(tokenizer, "she opens the door ."), SEP, *ids(tokenizer, "she flies ."), SEP],
    ]
    assert [len(choice) for choice in features[1]["input_ids"]] == [10, 6]
    assert features[1]["token_type_ids"][1] == [0, 0, 0, 0, 1, 1]
    assert [feature["labels"] for feature in features] == [0, 1]
    assert "1 of 2 multiple-choice examples" in caplog.records[-1].getMessage()
    batch = collate_task_batch(features, PAD)
    assert batch["input_ids"].shape == (2, 2, 11)
    assert batch["attention_mask"][1, 1].tolist() == [1] * 6 + [0] * 5
    assert batch["labels"].tolist() == [0, 1]


def test_multiple_choice_rejects_uneven_choices(tokenizer):
    examples = [
        MultipleChoiceExample("1", "a", "", ("b", "c")),
        MultipleChoiceExample("2", "a", "", ("b", "c", "d")),
    ]
    with pytest.raises(ValueError, match="different numbers of endings"):
        encode_multiple_choice(examples, tokenizer, 8)


# --- collate and batching ---------------------------------------------------------------------


def test_collate_pads_to_the_longest_in_the_batch():
    features = [
        {"input_ids": [2, 7, 8, 3], "token_type_ids": [0, 0, 1, 1], "labels": [-100, 1, 0, -100]},
        {"input_ids": [2, 9, 3], "token_type_ids": [0, 0, 0], "labels": [-100, 2, -100]},
    ]
    batch = collate_task_batch(features, pad_token_id=0)
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    assert batch["input_ids"].tolist() == [[2, 7, 8, 3], [2, 9, 3, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 1, 1], [0, 0, 0, 0]]
    assert batch["labels"].tolist() == [[-100, 1, 0, -100], [-100, 2, -100, -100]]
    assert all(tensor.dtype == torch.int64 for tensor in batch.values())


def test_collate_scalar_labels_and_errors():
    regression = [{"input_ids": [2, 3], "labels": 0.5}, {"input_ids": [2, 5, 3], "labels": 2.0}]
    batch = collate_task_batch(regression, pad_token_id=0)
    assert batch["labels"].dtype == torch.float32 and batch["labels"].tolist() == [0.5, 2.0]
    assert batch["token_type_ids"].tolist() == [[0, 0, 0], [0, 0, 0]]
    with pytest.raises(ValueError, match="labels is set in 1 of 2"):
        collate_task_batch([{"input_ids": [2], "labels": 1}, {"input_ids": [2]}], 0)
    with pytest.raises(ValueError, match="empty"):
        collate_task_batch([], 0)
    with pytest.raises(ValueError, match="numbers of choices"):
        collate_task_batch([{"input_ids": [[2], [2]]}, {"input_ids": [[2]]}], 0)


def test_length_grouped_batches_cover_every_index_and_group_lengths():
    rng = random.Random(1)
    lengths = [rng.randrange(1, 300) for _ in range(1000)]
    batches = length_grouped_batches(lengths, 8, random.Random(0))
    assert sorted(index for batch in batches for index in batch) == list(range(1000))
    assert sum(len(batch) < 8 for batch in batches) == 0  # 1000 = 125 * 8
    assert batches == length_grouped_batches(lengths, 8, random.Random(0))
    assert batches != length_grouped_batches(lengths, 8, random.Random(1))
    padded = sum(len(batch) * max(lengths[i] for i in batch) for batch in batches)
    assert padded < 1.05 * sum(lengths)  # sorted within megabatches: little padding


def test_sorted_length_batches_and_feature_lengths():
    assert sorted_length_batches([5, 2, 9, 3], 2) == [[2, 0], [3, 1]]
    features = [{"input_ids": [1, 2, 3]}, {"input_ids": [[1], [1, 2, 3, 4]]}]
    assert feature_lengths(features) == [3, 4]


def test_batches_run_through_the_heads(tokenizer, tiny_config):
    torch.manual_seed(0)
    sentences = [
        TaggedSentence(("Johanson", "lives", "in", "Paris"), ("B-PER", "O", "O", "B-LOC")),
        TaggedSentence(("cat",), ("O",)),
    ]
    tagging = collate_task_batch(encode_tagging(sentences, tokenizer, 16, LABEL2ID), PAD)
    loss = BertForTokenClassification(tiny_config, num_labels=len(TAGS))(**tagging).loss
    assert torch.isfinite(loss)
    pairs = [Example("the cat", "sat", label="1"), Example("on mat", label="0")]
    classes = collate_task_batch(encode_classification(pairs, tokenizer, 16, {"0": 0, "1": 1}), 0)
    assert torch.isfinite(BertForSequenceClassification(tiny_config, num_labels=2)(**classes).loss)
    choices = [MultipleChoiceExample("1", "the cat", "", ("sat", "flies"), 1)]
    batch = collate_task_batch(encode_multiple_choice(choices, tokenizer, 16), PAD)
    assert torch.isfinite(BertForMultipleChoice(tiny_config)(**batch).loss)
    qa = [SquadExample("q", "who ?", "Ada Lovelace wrote", (Answer("Ada Lovelace", 0),))]
    batch = collate_task_batch(encode_squad(qa, tokenizer, 16, 4, 4), PAD)
    assert batch["start_positions"].tolist() == [4] and batch["end_positions"].tolist() == [6]
    assert torch.isfinite(BertForQuestionAnswering(tiny_config)(**batch).loss)


# --- extractive QA ----------------------------------------------------------------------------


def test_context_windows_and_max_context_follow_run_squad():
    assert context_windows(10, 7, 3) == [(0, 7), (3, 7)]
    assert context_windows(3, 7, 3) == [(0, 3)]
    assert context_windows(0, 7, 3) == [(0, 0)]
    assert context_windows(20, 8, 16) == [(0, 8), (8, 8), (16, 4)]  # stride capped at the window
    windows = context_windows(10, 7, 3)
    assert is_max_context(windows, 0, 4) and not is_max_context(windows, 1, 4)
    assert is_max_context(windows, 1, 6) and not is_max_context(windows, 0, 6)


def test_squad_windows_label_the_answer_only_where_it_fits(tokenizer):
    context = "a b c d e f g h the cat"  # 10 pieces
    example = SquadExample("q1", "Who?", context, (Answer("the cat", context.index("the")),))
    features = encode_squad([example], tokenizer, max_seq_length=12, doc_stride=3)
    assert len(features) == 2
    assert [(f.start_positions, f.end_positions) for f in features] == [(0, 0), (9, 10)]
    second = features[1]
    question, window = ids(tokenizer, "who ?"), ids(tokenizer, "d e f g h the cat")
    assert second.input_ids == (CLS, *question, SEP, *window, SEP)
    assert second.token_type_ids == (0,) * 4 + (1,) * 8
    assert second.offsets[:4] == (None,) * 4 and second.offsets[-1] is None
    assert second.offsets[9] == (16, 19)
    # Pieces 3-4 (d, e) are best in the first window; 5-9 in the second.
    assert second.token_is_max_context[4:11] == (False, False, True, True, True, True, True)


def test_squad_answer_text_comes_from_the_original_context(tokenizer):
    context = "CAFÉ is Ada  LoveLace,"
    example = SquadExample("q1", "who", context, (Answer("Ada  LoveLace", 8),))
    (feature,) = encode_squad([example], tokenizer, 32, 8, 8)
    start, end = feature.start_positions, feature.end_positions
    assert tokenizer.convert_ids_to_tokens(list(feature.input_ids[start : end + 1])) == [
        "ada",
        "love",
        "##lace",
    ]
    start_logits = np.zeros(40)  # longer than the feature: batch padding
    end_logits = np.zeros(40)
    start_logits[start], end_logits[end] = 5.0, 5.0
    assert decode_squad([feature], [start_logits], [end_logits], [example]) == {
        "q1": "Ada  LoveLace"
    }
    start_logits[3] = 9.0  # the first context piece, "cafe"
    assert decode_squad([feature], [start_logits], [end_logits], [example])["q1"] == (
        "CAFÉ is Ada  LoveLace"
    )


def test_squad_moves_an_answer_that_starts_inside_a_word(tokenizer):
    context = "the golden cat , the gold cat"
    example = SquadExample("q1", "who", context, (Answer("gold", context.index("gold")),))
    (feature,) = encode_squad([example], tokenizer, 32, 8, 8)
    assert feature.offsets[feature.start_positions] == (21, 25)
    assert feature.start_positions == feature.end_positions


def test_squad_decoding_bounds_and_picks_the_best_window(tokenizer):
    context = "a b c d e f g h the cat"
    example = SquadExample("q1", "who", context, (Answer("the cat", 16),))
    features = encode_squad([example], tokenizer, max_seq_length=10, doc_stride=2)
    assert len(features) == 3
    start_logits = [np.full(len(f.input_ids), -10.0) for f in features]
    end_logits = [np.full(len(f.input_ids), -10.0) for f in features]
    # Window 0 scores "a ... e" highest, but that is 5 pieces, above max_answer_length 4.
    start_logits[0][3], end_logits[0][7] = 9.0, 9.0
    last = features[-1]
    start_logits[-1][last.start_positions], end_logits[-1][last.end_positions] = 3.0, 3.0
    answers = decode_squad(features, start_logits, end_logits, [example], max_answer_length=4)
    assert answers == {"q1": "the cat"}
    answers = decode_squad(features, start_logits, end_logits, [example], max_answer_length=5)
    assert answers == {"q1": "a b c d e"}
    with pytest.raises(ValueError, match="3 features but 1"):
        decode_squad(features, start_logits[:1], end_logits[:1], [example])


def test_squad_question_cut_and_empty_context(tokenizer, caplog):
    examples = [
        SquadExample("q1", "a b c d e f", "the cat", (Answer("cat", 4),)),
        SquadExample("q2", "who", "", ()),
    ]
    with caplog.at_level(logging.WARNING):
        features = encode_squad(examples, tokenizer, max_seq_length=16, max_query_length=3)
    assert features[0].input_ids[:5] == (CLS, *ids(tokenizer, "a b c"), SEP)
    assert "1 of 2 questions" in caplog.records[-1].getMessage()
    assert features[1].input_ids == (CLS, *ids(tokenizer, "who"), SEP, SEP)
    answers = decode_squad(features, [np.zeros(16)] * 2, [np.zeros(16)] * 2, examples)
    assert answers["q2"] == ""
    with pytest.raises(ValueError, match="'q1': max_seq_length 8 leaves no context pieces"):
        encode_squad(examples, tokenizer, max_seq_length=8, max_query_length=5)
