"""Pre-training data: sentence splitting, NSP instances, dynamic and whole-word masking."""

from __future__ import annotations

import collections
import dataclasses
import doctest
import random
from collections.abc import Sequence

import numpy as np
import pytest

from bertlab.core.config import PretrainDataConfig
from bertlab.corpus import text_units
from bertlab.corpus.text_units import chinese_word_starts, english_word_starts, split_sentences
from bertlab.data import masking, pretraining
from bertlab.data.masking import (
    IS_NEXT_LABEL,
    NOT_NEXT_LABEL,
    example_rng,
    make_example,
    mask_tokens,
    pack_instance,
)
from bertlab.data.pretraining import (
    Instance,
    SpecialIds,
    create_instances_from_document,
    truncate_seq_pair,
)

SPECIAL = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)
FIRST_TEXT_ID = 5
VOCAB_SIZE = 1000


def unique_id_corpus(seed: int, num_documents: int = 200) -> list[list[list[int]]]:
    """Documents of 5-40 sentences of 5-30 tokens; every token id is unique, in reading order,
    so that an id tells which document and position it came from."""
    rng = random.Random(seed)
    documents, next_id = [], FIRST_TEXT_ID
    for _ in range(num_documents):
        document = []
        for _ in range(rng.randint(5, 40)):
            length = rng.randint(5, 30)
            document.append(list(range(next_id, next_id + length)))
            next_id += length
        documents.append(document)
    return documents


@pytest.fixture(scope="module")
def corpus() -> list[list[list[int]]]:
    return unique_id_corpus(0)


@pytest.fixture(scope="module")
def document_of(corpus) -> np.ndarray:
    owner = np.full(FIRST_TEXT_ID + sum(len(s) for d in corpus for s in d), -1)
    for doc_index, document in enumerate(corpus):
        for sentence in document:
            owner[sentence] = doc_index
    return owner


@pytest.fixture(scope="module")
def nsp_instances(corpus) -> list[tuple[int, Instance]]:
    """Four passes over the corpus (Google's dupe_factor), max_seq_length 64."""
    instances = []
    for epoch in range(4):
        rng = random.Random(epoch)
        for doc_index in range(len(corpus)):
            for instance in create_instances_from_document(corpus, doc_index, 64, 0.1, rng):
                instances.append((doc_index, instance))
    return instances


@pytest.fixture(scope="module")
def vocab_instances() -> list[Instance]:
    """Instances over ids drawn from a 1000-token vocabulary, max_seq_length 128."""
    rng = random.Random(1)
    corpus = [
        [
            [rng.randrange(FIRST_TEXT_ID, VOCAB_SIZE) for _ in range(rng.randint(5, 30))]
            for _ in range(rng.randint(5, 40))
        ]
        for _ in range(60)
    ]
    return [
        instance
        for doc_index in range(len(corpus))
        for instance in create_instances_from_document(corpus, doc_index, 128, 0.1, rng)
    ]


@pytest.mark.parametrize("module", [pretraining, masking, text_units])
def test_docstring_examples_hold(module) -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0


# --- sentence splitting ----------------------------------------------------------------------


def test_english_splitter_handles_abbreviations_numbers_and_quotes() -> None:
    paragraph = (
        "Mr. Smith met Dr. Jones at 3.30 p.m. on Main St. in the U.S. capital. "
        'She said, "It costs $3.5 million, i.e. too much." Then she left!  '
        "Was it J. R. R. Tolkien? Nobody knows... The end"
    )
    assert split_sentences(paragraph, "en") == [
        "Mr. Smith met Dr. Jones at 3.30 p.m. on Main St. in the U.S. capital.",
        'She said, "It costs $3.5 million, i.e. too much."',
        "Then she left!",
        "Was it J. R. R. Tolkien?",
        "Nobody knows...",
        "The end",
    ]


def test_chinese_splitter_keeps_closing_quotes_with_the_sentence() -> None:
    paragraph = "今天天气很好。他说：“我们去公园吧！”她问：「真的吗？」好的\n"
    assert split_sentences(paragraph, "zh") == [
        "今天天气很好。",
        "他说：“我们去公园吧！”",
        "她问：「真的吗？」",
        "好的",
    ]


def test_unknown_language_is_rejected() -> None:
    with pytest.raises(ValueError, match="no sentence splitter"):
        split_sentences("Hallo.", "de")


# --- instances -------------------------------------------------------------------------------


def test_nsp_is_next_half_of_the_time(nsp_instances) -> None:
    is_next = [not instance.is_random_next for _, instance in nsp_instances]
    assert len(is_next) > 5000
    assert abs(np.mean(is_next) - 0.5) <= 0.02  # measured 0.4991 over 6602 instances


def test_random_next_comes_from_another_document(nsp_instances, document_of) -> None:
    for doc_index, instance in nsp_instances:
        assert set(document_of[instance.tokens_a]) == {doc_index}
        b_documents = set(document_of[instance.tokens_b])
        assert len(b_documents) == 1
        if instance.is_random_next:
            assert b_documents != {doc_index}
        else:
            # IsNext: B is the text right after A (ids are in reading order).
            assert b_documents == {doc_index}
            assert instance.tokens_a[-1] < instance.tokens_b[0]


def test_pairs_fit_max_seq_length_and_keep_both_sides(nsp_instances) -> None:
    for _, instance in nsp_instances:
        input_ids, token_type_ids = pack_instance(instance, SPECIAL)
        assert len(input_ids) <= 64
        assert instance.tokens_a and instance.tokens_b
        assert token_type_ids.tolist() == sorted(token_type_ids.tolist())
        # Truncation removes tokens only at the ends: each side stays contiguous text.
        for side in (instance.tokens_a, instance.tokens_b):
            assert side == list(range(side[0], side[0] + len(side)))


def test_every_document_token_is_used_at_most_once_per_pass(corpus) -> None:
    rng = random.Random(5)
    for doc_index in range(len(corpus)):
        used = []
        for instance in create_instances_from_document(corpus, doc_index, 64, 0.1, rng):
            used += instance.tokens_a
            if not instance.is_random_next:
                used += instance.tokens_b
        assert len(used) == len(set(used))
        assert set(used) <= {token for sentence in corpus[doc_index] for token in sentence}


def test_short_targets_appear_with_short_seq_prob(corpus) -> None:
    rng = random.Random(6)
    lengths = [
        len(instance.tokens_a) + len(instance.tokens_b)
        for doc_index in range(len(corpus))
        for instance in create_instances_from_document(corpus, doc_index, 128, 1.0, rng)
    ]
    assert min(lengths) < 20 and max(lengths) <= 125


@pytest.mark.parametrize("objective", ["mlm", "clm"])
def test_single_segment_objectives_cover_the_document_once(corpus, objective) -> None:
    rng = random.Random(7)
    for doc_index in range(20):
        instances = create_instances_from_document(corpus, doc_index, 64, 0.0, rng, objective)
        document_tokens = [token for sentence in corpus[doc_index] for token in sentence]
        assert [t for instance in instances for t in instance.tokens_a] == document_tokens
        first_tokens = {sentence[0]: len(sentence) for sentence in corpus[doc_index]}
        for instance, following in zip(instances, instances[1:] + [None], strict=True):
            assert instance.tokens_b == [] and instance.is_random_next is None
            assert 1 <= len(instance.tokens_a) <= 62
            assert instance.tokens_a[0] in first_tokens  # segments start at sentence starts
            if following is not None:  # full-length: the next sentence would not have fit
                next_length = first_tokens[following.tokens_a[0]]
                assert len(instance.tokens_a) + next_length > 62


def test_overlong_sentences_are_cut_for_single_segments() -> None:
    documents = [[list(range(10, 30)), [40, 41]]]
    instances = create_instances_from_document(documents, 0, 10, 0.0, random.Random(0), "mlm")
    assert [instance.tokens_a for instance in instances] == [
        list(range(10, 18)),
        list(range(18, 26)),
        [26, 27, 28, 29, 40, 41],
    ]


def test_numpy_sentences_give_python_int_lists() -> None:
    documents = [[np.arange(5, 12, dtype=np.uint16), np.arange(12, 20, dtype=np.uint16)]] * 2
    instance = create_instances_from_document(documents, 0, 32, 0.0, random.Random(0))[0]
    assert all(type(token) is int for token in instance.tokens_a + instance.tokens_b)


def test_nsp_rejects_a_single_document_and_empty_sentences() -> None:
    with pytest.raises(ValueError, match="at least 2 documents"):
        create_instances_from_document([[[5, 6]]], 0, 16, 0.0, random.Random(0))
    with pytest.raises(ValueError, match="empty sentence"):
        create_instances_from_document([[[5], []], [[6]]], 0, 16, 0.0, random.Random(0))
    with pytest.raises(ValueError, match="unknown objective"):
        create_instances_from_document([[[5]]], 0, 16, 0.0, random.Random(0), "nsp")


def test_truncation_takes_from_the_longer_side_at_both_ends() -> None:
    rng = random.Random(0)
    fronts = backs = 0
    for _ in range(200):
        tokens_a, tokens_b = truncate_seq_pair(list(range(10)), [20, 21, 22], 8, rng)
        assert tokens_b == [20, 21, 22] and len(tokens_a) == 5
        fronts += tokens_a[0] > 0
        backs += tokens_a[-1] < 9
    assert fronts > 150 and backs > 150


def test_instances_are_deterministic_for_a_seed(corpus) -> None:
    def build(seed: int) -> list[Instance]:
        return create_instances_from_document(corpus, 3, 64, 0.1, random.Random(seed))

    assert build(11) == build(11)
    assert build(11) != build(12)


# --- masking ---------------------------------------------------------------------------------


def _mask_all(instances, config, rng, special=SPECIAL) -> list:
    return [
        (
            pack_instance(instance, special)[0],
            make_example(instance, config, special, VOCAB_SIZE, rng),
        )
        for instance in instances
    ]


def test_masking_statistics(vocab_instances) -> None:
    pairs = _mask_all(vocab_instances, PretrainDataConfig(), random.Random(2))
    num_tokens = sum(len(original) for original, _ in pairs)
    assert num_tokens > 20000
    num_masked = sum(len(example.masked_positions) for _, example in pairs)
    assert abs(num_masked / num_tokens - 0.15) <= 0.01  # measured 0.1488 of 36.0k tokens
    outcomes = []
    for original, example in pairs:
        at = example.masked_positions
        assert np.array_equal(example.masked_labels, original[at])
        assert not set(original[at].tolist()) & SPECIAL.all  # no special token masked
        unmasked = np.setdiff1d(np.arange(len(original)), at)
        assert np.array_equal(example.input_ids[unmasked], original[unmasked])
        replaced = example.input_ids[at]
        assert len(at) <= 20
        for new, old in zip(replaced.tolist(), original[at].tolist(), strict=True):
            outcomes.append("mask" if new == SPECIAL.mask else "keep" if new == old else "random")
            assert new == SPECIAL.mask or new not in SPECIAL.all  # random ids are not special
    shares = {kind: outcomes.count(kind) / len(outcomes) for kind in ("mask", "random", "keep")}
    assert abs(shares["mask"] - 0.8) <= 0.02  # measured 0.797 / 0.103 / 0.100 of 5360
    assert abs(shares["random"] - 0.1) <= 0.02
    assert abs(shares["keep"] - 0.1) <= 0.02


def test_number_of_predictions_follows_google() -> None:
    ids = [SPECIAL.cls, *range(10, 136), SPECIAL.sep]  # 128 tokens: round(19.2) = 19
    assert len(mask_tokens(ids, SPECIAL, 200, 0.15, 20, random.Random(0)).masked_positions) == 19
    assert len(mask_tokens(ids, SPECIAL, 200, 0.15, 10, random.Random(0)).masked_positions) == 10
    short = [SPECIAL.cls, 10, SPECIAL.sep]  # at least one prediction
    assert mask_tokens(
        short, SPECIAL, 200, 0.15, 20, random.Random(0)
    ).masked_positions.tolist() == [1]


def test_masks_are_fresh_per_epoch_and_repeatable(vocab_instances) -> None:
    config = PretrainDataConfig()
    instance = vocab_instances[0]

    def positions(seed: int, epoch: int) -> list[int]:
        rng = example_rng(seed, epoch, 0)
        return make_example(instance, config, SPECIAL, VOCAB_SIZE, rng).masked_positions.tolist()

    assert positions(0, 0) == positions(0, 0)
    assert positions(0, 0) != positions(0, 1)
    assert positions(0, 0) != positions(1, 0)


def test_example_labels_and_objectives() -> None:
    pair = Instance([7, 8, 9], [10, 11], True)
    example = make_example(pair, PretrainDataConfig(), SPECIAL, VOCAB_SIZE, random.Random(0))
    assert example.next_sentence_label == NOT_NEXT_LABEL
    assert example.token_type_ids.tolist() == [0, 0, 0, 0, 0, 1, 1, 1]
    is_next = dataclasses.replace(pair, is_random_next=False)
    config = PretrainDataConfig()
    assert make_example(is_next, config, SPECIAL, 50, random.Random(0)).next_sentence_label == (
        IS_NEXT_LABEL
    )
    single = Instance([7, 8, 9], [], None)
    clm = make_example(single, PretrainDataConfig(objective="clm"), SPECIAL, 50, random.Random(0))
    assert clm.input_ids.tolist() == [2, 7, 8, 9, 3] and clm.masked_positions is None
    assert clm.next_sentence_label is None


# --- whole-word masking ----------------------------------------------------------------------


def _words(is_word_start: list[bool], special_positions: set[int]) -> list[list[int]]:
    words: list[list[int]] = []
    for index, start in enumerate(is_word_start):
        if index in special_positions:
            continue
        if start or not words or words[-1][-1] != index - 1:
            words.append([index])
        else:
            words[-1].append(index)
    return words


def test_english_whole_words_are_masked_together_with_one_decision() -> None:
    # A vocabulary where ids 500 and up are "##" continuations; its start table maps any ids.
    vocab = [f"w{i}" if i < 500 else f"##w{i}" for i in range(VOCAB_SIZE)]
    starts_table = np.array(english_word_starts(vocab))
    rng = random.Random(3)
    documents = [
        [
            [rng.randrange(FIRST_TEXT_ID, VOCAB_SIZE) for _ in range(rng.randint(5, 30))]
            for _ in range(20)
        ]
        for _ in range(50)
    ]
    word_starts = [[starts_table[sentence].tolist() for sentence in doc] for doc in documents]
    config = PretrainDataConfig(do_whole_word_mask=True)
    outcomes, num_tokens, num_masked = [], 0, 0
    for doc_index in range(len(documents)):
        for instance in create_instances_from_document(
            documents, doc_index, 128, 0.1, rng, word_starts=word_starts
        ):
            original, _ = pack_instance(instance, SPECIAL)
            example = make_example(instance, config, SPECIAL, VOCAB_SIZE, rng)
            masked = set(example.masked_positions.tolist())
            special_positions = {i for i, t in enumerate(original.tolist()) if t in SPECIAL.all}
            starts = [True, *instance.is_word_start_a, True, *instance.is_word_start_b, True]
            num_tokens += len(original)
            num_masked += len(masked)
            assert len(masked) <= min(20, max(1, round(len(original) * 0.15)))
            for word in _words(starts, special_positions):
                chosen = [index in masked for index in word]
                assert all(chosen) or not any(chosen), "a word was masked in part"
                if all(chosen):
                    new = example.input_ids[word]
                    kinds = {
                        "mask" if n == SPECIAL.mask else "keep" if n == o else "random"
                        for n, o in zip(new.tolist(), original[word].tolist(), strict=True)
                    }
                    assert len(kinds) == 1, "one 80/10/10 decision per word"
                    outcomes.append(kinds.pop())
    assert num_tokens > 20000
    assert abs(num_masked / num_tokens - 0.15) <= 0.01  # measured 0.1488 of 23.5k tokens
    shares = {kind: outcomes.count(kind) / len(outcomes) for kind in ("mask", "random", "keep")}
    assert abs(shares["mask"] - 0.8) <= 0.02  # measured over 1957 words: 0.807 / 0.100 / 0.093
    assert abs(shares["random"] - 0.1) <= 0.02
    assert abs(shares["keep"] - 0.1) <= 0.02


def test_whole_word_masking_needs_word_starts() -> None:
    config = PretrainDataConfig(do_whole_word_mask=True)
    with pytest.raises(ValueError, match="word_starts"):
        make_example(Instance([7, 8], [], None), config, SPECIAL, 50, random.Random(0))


CHINESE_PARAGRAPH = (
    "自然语言处理是人工智能的一个重要方向。北京大学的学生正在研究机器学习！"
    "他们说：“深度学习模型需要大量数据。”这个项目什么时候完成？"
)


def test_chinese_whole_words_are_masked_together() -> None:
    sentences = [list(sentence) for sentence in split_sentences(CHINESE_PARAGRAPH, "zh")]
    assert len(sentences) == 4
    starts = [chinese_word_starts(characters) for characters in sentences]
    # jieba groups 自然语言 / 处理 / 人工智能 ...: the first sentence has multi-character words.
    assert starts[0][:6] == [True, False, False, False, True, False]
    vocab = {char: index for index, char in enumerate(sorted(set(CHINESE_PARAGRAPH)), 5)}
    document = [[vocab[char] for char in characters] for characters in sentences]
    documents, word_starts = [document, document], [starts, starts]
    config = PretrainDataConfig(do_whole_word_mask=True, mlm_probability=0.3)
    for seed in range(50):
        rng = random.Random(seed)
        for instance in create_instances_from_document(
            documents, 0, 64, 0.0, rng, word_starts=word_starts
        ):
            original, _ = pack_instance(instance, SPECIAL)
            example = make_example(instance, config, SPECIAL, 200, rng)
            masked = set(example.masked_positions.tolist())
            special_positions = {i for i, t in enumerate(original.tolist()) if t in SPECIAL.all}
            packed = [True, *instance.is_word_start_a, True, *instance.is_word_start_b, True]
            for word in _words(packed, special_positions):
                chosen = [index in masked for index in word]
                assert all(chosen) or not any(chosen)


def test_chinese_word_starts_leave_other_tokens_to_the_wordpiece_rule() -> None:
    def halves(text: str) -> list[str]:
        return [text[:2], text[2:]] if len(text) > 2 else [text]

    tokens = ["中", "文", "分", "词", "，", "bert", "##s", "好"]
    assert chinese_word_starts(tokens, segment=halves) == [
        True, False, True, False, True, True, False, True,
    ]  # fmt: skip
    with pytest.raises(ValueError, match="does not join"):
        chinese_word_starts(["中", "文"], segment=lambda text: ["中"])


# --- options ---------------------------------------------------------------------------------


def test_pretrain_data_config_defaults_and_validation() -> None:
    config = PretrainDataConfig()
    assert (config.max_seq_length, config.mlm_probability, config.objective) == (
        128,
        0.15,
        "mlm+nsp",
    )
    for bad in (
        {"objective": "nsp"},
        {"mlm_probability": 0.0},
        {"short_seq_prob": 1.5},
        {"max_seq_length": 4},
        {"max_predictions_per_seq": 0},
    ):
        with pytest.raises(ValueError):
            PretrainDataConfig(**bad)


def test_special_ids_from_vocab() -> None:
    vocab = {"[PAD]": 0, "[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[MASK]": 103, "a": 5}
    assert SpecialIds.from_vocab(vocab) == SpecialIds(pad=0, unk=100, cls=101, sep=102, mask=103)
    with pytest.raises(ValueError, match="missing"):
        SpecialIds.from_vocab({"a": 0})


def test_packed_sequences_are_full_and_keep_every_token_once() -> None:
    rng = random.Random(0)
    documents = [
        [
            [rng.randrange(10, 99) for _ in range(rng.randint(1, 30))]
            for _ in range(rng.randint(1, 6))
        ]
        for _ in range(20)
    ]
    order = list(range(20))
    rng.shuffle(order)
    instances = pretraining.pack_documents(documents, order, 34, separator=3)
    assert (
        all(len(i.tokens_a) == 32 for i in instances[:-1])
        and 1 <= len(instances[-1].tokens_a) <= 32
    )
    assert all(i.tokens_b == [] and i.is_random_next is None for i in instances)
    expected = []
    for position, doc_index in enumerate(order):
        expected += [3] * (position > 0) + [
            t for sentence in documents[doc_index] for t in sentence
        ]
    assert [t for i in instances for t in i.tokens_a] == expected


def test_packed_word_starts_run_parallel_to_the_tokens() -> None:
    documents = [[[5, 6], [7]], [[8, 9]]]
    starts = [[[True, False], [True]], [[True, False]]]
    instances = pretraining.pack_documents(documents, [0, 1], 5, 3, starts)
    assert [i.tokens_a for i in instances] == [[5, 6, 7], [3, 8, 9]]
    assert [i.is_word_start_a for i in instances] == [[True, False, True], [True, True, False]]


def test_packing_is_refused_with_nsp() -> None:
    with pytest.raises(ValueError, match="pack_sequences needs objective mlm or clm"):
        PretrainDataConfig(objective="mlm+nsp", pack_sequences=True)


class _CountingDocuments(Sequence):
    """Documents that count how often each is fetched. A corpus view (`TokenizedCorpus.documents`)
    builds a document's list of sentences on every fetch, so fetching per sentence or per
    instance costs the square of a long document's length."""

    def __init__(self, documents: list) -> None:
        self.documents, self.fetches = documents, collections.Counter()

    def __len__(self) -> int:
        return len(self.documents)

    def __getitem__(self, index: int) -> list:
        self.fetches[index] += 1
        return self.documents[index]


@pytest.mark.parametrize("objective", ["mlm+nsp", "mlm", "clm", "packed"])
def test_a_long_document_is_fetched_once_per_pass(objective) -> None:
    """A corpus without blank lines is one long document: building its instances must stay
    linear in its length, so it is fetched once (random Bs fetch the other document)."""
    long_document = [list(range(5 + i % 7, 15 + i % 7)) for i in range(3000)]
    documents = _CountingDocuments([long_document, [[5, 6, 7], [8, 9]]])
    starts = _CountingDocuments([[[True] * len(s) for s in d] for d in documents.documents])
    if objective == "packed":
        instances = pretraining.pack_documents(documents, [0], 128, SPECIAL.sep, starts)
    else:
        instances = create_instances_from_document(
            documents, 0, 128, 0.1, random.Random(0), objective, word_starts=starts
        )
    assert len(instances) > 100
    assert documents.fetches[0] == 1 and starts.fetches[0] == 1
