"""Task examples -> model inputs: sentence (pair) classification, token tagging, multiple choice.

Each function turns the examples of a reader in this package into one dict per example, holding
lists (no padding, no tensors) under the names of the heads' `forward` arguments: `input_ids`,
`token_type_ids` and, when the examples are labelled, `labels`. `collate.collate_task_batch`
pads a batch of them into tensors. Extractive QA, which cuts contexts into windows, is in
`squad_encoding`.

Sequences longer than `max_seq_length` are cut (for pairs, the longer side first, as
`transformers` does) and the number of examples that were cut is logged in one warning.

Token tagging labels the first piece of each word and ignores the rest (BERT Sec. 4.3): "Johanson
lives" -> `[CLS] johan ##son lives [SEP]` -> labels `[-100, B-PER, -100, O, -100]`. Each feature
keeps the word of every token (`word_ids`), so that `word_labels` maps predictions back to
exactly one tag per input word.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from bertlab.core.metrics import OUTSIDE_TAG
from bertlab.data.collate import IGNORE_INDEX
from bertlab.data.tasks.classification import Example
from bertlab.data.tasks.multiple_choice import MultipleChoiceExample
from bertlab.data.tasks.ner import TaggedSentence
from bertlab.tokenizer.wordpiece import NUM_SPECIAL_TOKENS_SINGLE, Tokenizer

logger = logging.getLogger(__name__)

Feature = dict  # input_ids, token_type_ids[, labels][, word_ids, num_words]: lists and ints
TextInput = str | tuple[str, str]


# --- classification -------------------------------------------------------------------------------


def encode_classification(
    examples: Sequence[Example],
    tokenizer: Tokenizer,
    max_seq_length: int,
    label2id: Mapping[str, int] | None,
) -> list[Feature]:
    """Encode texts or text pairs as `[CLS] A [SEP] (B [SEP])` with a class id or a target.

    Example: `Example("it works", label="1")` with `label2id={"0": 0, "1": 1}` ->
    `{"input_ids": [cls, id("it"), id("works"), sep], "token_type_ids": [0, 0, 0, 0],
    "labels": 1}`.

    Args:
        examples: from a classification reader.
        tokenizer: the model's tokenizer.
        max_seq_length: the longest sequence, special tokens included.
        label2id: label string -> class id; None for regression (the label is a float target).

    Returns:
        One dict per example: `input_ids`, `token_type_ids` (lists of int) and, for labelled
        examples, `labels` (int class id, or float for regression).

    Raises:
        ValueError: a label outside `label2id`.
    """
    inputs = [ex.text_a if ex.text_b is None else (ex.text_a, ex.text_b) for ex in examples]
    encoded, cut = encode_texts(inputs, tokenizer, max_seq_length)
    _warn_cut(len(cut), len(examples), "examples", max_seq_length)
    features = []
    for example, (input_ids, token_type_ids) in zip(examples, encoded, strict=True):
        feature: Feature = {"input_ids": input_ids, "token_type_ids": token_type_ids}
        if example.label is not None:
            feature["labels"] = _class_label(example.label, label2id)
        features.append(feature)
    return features


def encode_texts(
    inputs: Sequence[TextInput], tokenizer: Tokenizer, max_seq_length: int
) -> tuple[list[tuple[list[int], list[int]]], list[int]]:
    """(input_ids, token_type_ids) per text or pair, cut to `max_seq_length`; the cut indices.

    Example: `encode_texts(["a b c d", "a"], tokenizer, 4)` ->
    `([([cls, a, b, sep], [0, 0, 0, 0]), ([cls, a, sep], [0, 0, 0])], [0])`.
    """
    if not inputs:
        return [], []
    full = tokenizer(list(inputs), truncation=False)
    rows = list(zip(full["input_ids"], full["token_type_ids"], strict=True))
    too_long = [index for index, (ids, _) in enumerate(rows) if len(ids) > max_seq_length]
    # Singles and pairs are cut in separate calls: a batch with any pair reserves room for three
    # special tokens in every row.
    for is_pair in (False, True):
        indices = [index for index in too_long if isinstance(inputs[index], tuple) == is_pair]
        if indices:
            cut = tokenizer([inputs[index] for index in indices], max_length=max_seq_length)
            for index, ids, types in zip(
                indices, cut["input_ids"], cut["token_type_ids"], strict=True
            ):
                rows[index] = (ids, types)
    return rows, too_long


def _class_label(label: str | float, label2id: Mapping[str, int] | None) -> int | float:
    if label2id is None:
        return float(label)
    if label not in label2id:
        raise ValueError(f"label {label!r} is not one of the labels {list(label2id)}")
    return label2id[label]


def _warn_cut(num_cut: int, total: int, what: str, max_seq_length: int) -> None:
    if num_cut:
        logger.warning(
            "%d of %d %s were longer than max_seq_length %d and were cut",
            num_cut,
            total,
            what,
            max_seq_length,
        )


# --- token tagging --------------------------------------------------------------------------------


def encode_tagging(
    sentences: Sequence[TaggedSentence],
    tokenizer: Tokenizer,
    max_seq_length: int,
    label2id: Mapping[str, int] | None,
) -> list[Feature]:
    """Tokenize pre-split words and label the first piece of each word (BERT Sec. 4.3).

    Every word is tokenized on its own (for character-level Chinese NER every character is a
    word). Later pieces of a word, [CLS] and [SEP] get the label -100, which the loss skips.
    Pieces past `max_seq_length` are cut: a word whose first piece is cut is lost, and it gets
    the default tag when mapped back (`word_labels`); the sentences that lose words are counted
    in one warning. A word that yields no piece at all (a control or zero-width character, which
    BERT's rules delete) has no token either and also gets the default tag.

    Example: words ("Johanson", "lives") tagged ("B-PER", "O") ->
    `input_ids [cls, johan, ##son, lives, sep]`, `labels [-100, B-PER, -100, O, -100]` (as ids),
    `word_ids [None, 0, 0, 1, None]`, `num_words 2`.

    Args:
        sentences: words and their tags, from a tagging reader.
        tokenizer: the model's tokenizer.
        max_seq_length: the longest sequence, special tokens included.
        label2id: tag -> class id; None to encode without labels (input for prediction).

    Returns:
        One dict per sentence: `input_ids`, `token_type_ids`, `labels` (with `label2id`) lists of
        int, `word_ids` (the word index of each token, None for [CLS]/[SEP]) and `num_words`.

    Raises:
        ValueError: a tag outside `label2id`, or `max_seq_length` below 3.
    """
    budget = max_seq_length - NUM_SPECIAL_TOKENS_SINGLE
    if budget < 1:
        raise ValueError(f"max_seq_length {max_seq_length} leaves no room for a word piece")
    # `encode_batch_fast` would leave `word_ids` empty.
    encodings = tokenizer.backend.encode_batch(
        [list(sentence.tokens) for sentence in sentences],
        is_pretokenized=True,
        add_special_tokens=False,
    )
    features = []
    num_cut_sentences = num_lost_words = num_empty_words = 0
    for sentence, encoding in zip(sentences, encodings, strict=True):
        word_ids = [None, *encoding.word_ids[:budget], None]
        feature: Feature = {
            "input_ids": [tokenizer.cls_token_id, *encoding.ids[:budget], tokenizer.sep_token_id],
            "token_type_ids": [0] * len(word_ids),
            "word_ids": word_ids,
            "num_words": len(sentence.tokens),
        }
        if label2id is not None:
            feature["labels"] = first_piece_labels(word_ids, sentence.tags, label2id)
        features.append(feature)
        num_with_pieces = len(set(encoding.word_ids))
        num_kept = len(set(word_ids) - {None})
        num_empty_words += len(sentence.tokens) - num_with_pieces
        num_lost_words += num_with_pieces - num_kept
        num_cut_sentences += num_kept < num_with_pieces
    if num_cut_sentences:
        logger.warning(
            "%d of %d sentences were longer than max_seq_length %d and were cut; their %d lost "
            "words get the tag %r when predictions are mapped back",
            num_cut_sentences,
            len(sentences),
            max_seq_length,
            num_lost_words,
            OUTSIDE_TAG,
        )
    if num_empty_words:
        logger.info(
            "%d words yield no word piece (deleted characters); they get the tag %r",
            num_empty_words,
            OUTSIDE_TAG,
        )
    return features


def split_words(text: str, tokenizer: Tokenizer) -> list[tuple[int, int]]:
    """The words of a raw text as BERT's basic tokenizer splits them, as character spans.

    A word is what the tokenizer's pre-tokenizer yields: whitespace-separated, with every
    punctuation mark and (for Chinese) every CJK ideograph a word of its own, as in the
    character-level Chinese NER files. Words that yield no piece (control characters only) are
    left out. `TaggedSentence(tuple(text[s:e] for s, e in spans), ...)` then tags the text as
    `encode_tagging` tags a file's sentence.

    Example: `"Ekeus went to Baghdad."` -> `[(0, 5), (6, 10), (11, 13), (14, 21), (21, 22)]`;
    `"北京人"` -> `[(0, 1), (1, 2), (2, 3)]`.

    Returns:
        (start, end) characters of each word in `text`, end exclusive, in order.
    """
    encoding = tokenizer.backend.encode(text, add_special_tokens=False)
    spans: dict[int, tuple[int, int]] = {}
    for word, (start, end) in zip(encoding.word_ids, encoding.offsets, strict=True):
        if word is not None:
            first = spans.get(word, (start, end))[0]
            spans[word] = (first, end)
    return [spans[word] for word in sorted(spans)]


def first_piece_labels(
    word_ids: Sequence[int | None], tags: Sequence[str], label2id: Mapping[str, int]
) -> list[int]:
    """The tag id on the first piece of each word, -100 elsewhere.

    Example: word_ids `[None, 0, 0, 1, None]`, tags ("B-PER", "O"), label2id {"O": 0, "B-PER": 1}
    -> `[-100, 1, -100, 0, -100]`.

    Raises:
        ValueError: a tag outside `label2id`.
    """
    labels = []
    previous = None
    for word in word_ids:
        if word is None or word == previous:
            labels.append(IGNORE_INDEX)
        elif tags[word] not in label2id:
            raise ValueError(f"tag {tags[word]!r} is not one of the labels {list(label2id)}")
        else:
            labels.append(label2id[tags[word]])
        previous = word
    return labels


def word_labels(
    features: Sequence[Feature],
    predictions: Sequence[Sequence[int]],
    id2label: Mapping[int, str] | Sequence[str],
    default_label: str = OUTSIDE_TAG,
) -> list[list[str]]:
    """Map token predictions back to one tag per input word: each word takes its first piece's.

    Words without a token (cut off by `max_seq_length`, or with no piece) get `default_label`,
    so every sentence gets exactly as many tags as it has words.

    Example: word_ids `[None, 0, 0, 2, None]` (word 1 has no piece), num_words 3, predicted ids
    `[0, 1, 0, 0, 0]`, id2label ["O", "B-PER"] -> `[["B-PER", "O", "O"]]`.

    Args:
        features: from `encode_tagging`.
        predictions: (B, L) int label ids per token, e.g. `logits.argmax(-1)`; a row may be
            longer than its feature (batch padding).
        id2label: class id -> tag.
        default_label: the tag of words that have no token.

    Returns:
        Per feature, `num_words` tags.

    Raises:
        ValueError: not one prediction row per feature, or a row shorter than its feature.
    """
    if len(predictions) != len(features):
        raise ValueError(f"{len(features)} features but {len(predictions)} prediction rows")
    tags_per_sentence = []
    for feature, predicted in zip(features, predictions, strict=True):
        word_ids = feature["word_ids"]
        if len(predicted) < len(word_ids):
            raise ValueError(
                f"a prediction row of length {len(predicted)} is shorter than its feature's "
                f"{len(word_ids)} tokens"
            )
        tags = [default_label] * feature["num_words"]
        previous = None
        for position, word in enumerate(word_ids):
            if word is not None and word != previous:
                tags[word] = id2label[int(predicted[position])]
            previous = word
        tags_per_sentence.append(tags)
    return tags_per_sentence


# --- multiple choice ------------------------------------------------------------------------------


def encode_multiple_choice(
    examples: Sequence[MultipleChoiceExample], tokenizer: Tokenizer, max_seq_length: int
) -> list[Feature]:
    """Encode each choice as the pair (context, start + ending), as in BERT's SWAG setup (Sec. 4.4).

    Example: context "She opens the door.", start "She", endings ("walks in.", "flies.") ->
    `input_ids` [[cls, she opens the door . sep she walks in . sep], [... she flies . sep]].

    Args:
        examples: from a multiple-choice reader; all with the same number K of endings.
        tokenizer: the model's tokenizer.
        max_seq_length: the longest sequence of one choice, special tokens included.

    Returns:
        One dict per example: `input_ids` and `token_type_ids` (K lists of int each) and, for
        labelled examples, `labels` (the index of the right choice).

    Raises:
        ValueError: examples with different numbers of endings.
    """
    num_choices = len(examples[0].endings) if examples else 0
    if any(len(example.endings) != num_choices for example in examples):
        counts = sorted({len(example.endings) for example in examples})
        raise ValueError(f"examples have different numbers of endings: {counts}")
    pairs = [
        (example.context, " ".join(part for part in (example.start, ending) if part))
        for example in examples
        for ending in example.endings
    ]
    encoded, cut = encode_texts(pairs, tokenizer, max_seq_length)
    cut_examples = {index // num_choices for index in cut}
    _warn_cut(len(cut_examples), len(examples), "multiple-choice examples", max_seq_length)
    features = []
    for position, example in enumerate(examples):
        choices = encoded[position * num_choices : (position + 1) * num_choices]
        feature: Feature = {
            "input_ids": [ids for ids, _ in choices],
            "token_type_ids": [types for _, types in choices],
        }
        if example.label is not None:
            feature["labels"] = example.label
        features.append(feature)
    return features
