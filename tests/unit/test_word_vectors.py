"""Static word vectors over the tokenized corpus, and the warm start of an embedding matrix."""

from __future__ import annotations

import codecs
import re
import time
import warnings

import numpy as np
import pytest
import torch

from bertlab.core.config import BertConfig
from bertlab.corpus.build import build_corpus
from bertlab.network.bert import BertModel
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.word2vec.timed import train_word_vectors_for
from bertlab.training.word2vec.vectors import (
    WordVectorConfig,
    analogy,
    embedding_rows,
    load_vectors,
    nearest_words,
    save_vectors,
    train_word_level_vectors,
    train_word_vectors,
    warm_start,
)


@pytest.fixture(scope="module")
def corpus(pretrain_files, tmp_path_factory):
    vocab, text = pretrain_files
    tokenizer = Tokenizer.from_pretrained(vocab)
    directory = tmp_path_factory.mktemp("word_vectors") / "corpus"
    return tokenizer, build_corpus([text], tokenizer, directory, "en", False, num_workers=0)


def test_every_piece_of_the_corpus_gets_a_vector_keyed_by_its_id(corpus) -> None:
    tokenizer, tokenized = corpus
    vectors = train_word_vectors(tokenized, WordVectorConfig(vector_size=16, epochs=2, workers=1))
    used = {str(piece) for piece in np.unique(np.asarray(tokenized.token_ids))}
    assert set(vectors.index_to_key) == used
    assert vectors.vector_size == 16
    # Documents can be left out (pre-training holds the last ones out): fewer sentences read.
    few = train_word_vectors(tokenized, WordVectorConfig(vector_size=16, workers=1), (0, 2))
    assert len(few) < len(vectors)


def test_the_same_seed_and_one_thread_give_the_same_vectors(corpus) -> None:
    _, tokenized = corpus
    config = WordVectorConfig(vector_size=8, epochs=1, workers=1, seed=3)
    first, second = train_word_vectors(tokenized, config), train_word_vectors(tokenized, config)
    np.testing.assert_array_equal(first.vectors, second.vectors)


def test_warm_started_rows_are_the_vectors_rescaled_to_the_init_std(corpus) -> None:
    tokenizer, tokenized = corpus
    config = BertConfig.from_preset(
        "tiny", vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id
    )
    vectors = train_word_vectors(tokenized, WordVectorConfig(vector_size=128, workers=1))
    model = BertModel(config)
    before = model.embeddings.word_embeddings.weight.detach().clone()
    count = warm_start(model.embeddings.word_embeddings, vectors, config.initializer_range)
    rows = model.embeddings.word_embeddings.weight.detach()
    assert count == len(vectors)
    scale = config.initializer_range / float(np.asarray(vectors.vectors).std())
    for key in vectors.index_to_key:  # each piece's row is its vector times one scale
        expected = torch.from_numpy(vectors[key].copy()) * scale
        torch.testing.assert_close(rows[int(key)], expected, rtol=1e-6, atol=1e-7)
    warm = torch.tensor([int(key) for key in vectors.index_to_key])
    assert abs(float(rows[warm].std()) - config.initializer_range) < 1e-4
    kept = [i for i in range(config.vocab_size) if str(i) not in vectors.key_to_index]
    assert kept and torch.equal(rows[kept], before[kept])  # special tokens and unused pieces


def test_vectors_of_another_size_are_refused(corpus) -> None:
    _, tokenized = corpus
    vectors = train_word_vectors(tokenized, WordVectorConfig(vector_size=8, epochs=1, workers=1))
    with pytest.raises(ValueError, match="vectors of size 8 for embeddings of size 16"):
        embedding_rows(vectors, torch.zeros(200, 16), 0.02)


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown method 'glove'"):
        WordVectorConfig(method="glove")
    with pytest.raises(ValueError, match="epochs must be positive"):
        WordVectorConfig(epochs=0)


def small_vectors():
    keyed_vectors = pytest.importorskip("gensim.models.keyedvectors")
    vectors = keyed_vectors.KeyedVectors(vector_size=4)
    words = ["river", "bank", "loan", "青蛙"]
    rows = np.random.default_rng(0).normal(size=(len(words), 4)).astype(np.float32)
    vectors.add_vectors(words, rows)
    return keyed_vectors.KeyedVectors, vectors


@pytest.mark.parametrize("name", ["vectors.txt", "vectors.txt.gz"])
def test_text_format_vectors_read_as_gensims_text_reader_reads_them(tmp_path, name) -> None:
    """A text-format file was read as binary: wrong vectors (0.58 for a cosine of 0.24)."""
    reader, vectors = small_vectors()
    path = tmp_path / name
    vectors.save_word2vec_format(str(path), binary=False)
    expected = reader.load_word2vec_format(str(path), binary=False)
    loaded = load_vectors(path)
    assert loaded.index_to_key == expected.index_to_key == vectors.index_to_key
    np.testing.assert_array_equal(loaded.vectors, expected.vectors)
    assert loaded.similarity("bank", "loan") == pytest.approx(vectors.similarity("bank", "loan"))


def test_glove_text_without_a_header_and_binary_files_read(tmp_path) -> None:
    reader, vectors = small_vectors()
    glove = tmp_path / "glove.txt"
    vectors.save_word2vec_format(str(glove), binary=False, write_header=False)
    binary = tmp_path / "vectors.bin"
    save_vectors(vectors, binary)
    for path in (glove, binary):
        loaded = load_vectors(path)
        assert loaded.index_to_key == vectors.index_to_key
        np.testing.assert_allclose(loaded.vectors, vectors.vectors, rtol=1e-6)


def test_a_file_that_is_no_vector_file_is_refused_in_one_line(tmp_path) -> None:
    pytest.importorskip("gensim")
    prose = tmp_path / "notes.txt"
    prose.write_text("these are notes\nnot vectors\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{prose} is not a word-vector file: its first line"):
        load_vectors(prose)


def test_a_broken_vector_file_is_named(tmp_path) -> None:
    """gensim's own words ("'utf-8' codec can't decode byte 0xe9") do not say which file."""
    pytest.importorskip("gensim")
    latin1 = tmp_path / "vectors.txt"
    latin1.write_bytes(b"2 3\ncaf\xe9 0.1 0.2 0.3\nab 0.1 0.2 0.3\n")
    with pytest.raises(ValueError, match=f"^{latin1} is not a readable word2vec text file"):
        load_vectors(latin1)
    short = tmp_path / "short.bin"
    short.write_bytes(b"3 4\nab " + bytes(8))
    with pytest.raises(
        ValueError,
        match=f"^{short}: the file ends before the 3 vectors of 4 numbers that its header '3 4' "
        "announces: one of the two numbers is wrong, or the file is cut$",
    ):
        load_vectors(short)


LINES = ["cat 1.0 0.0", "dog 0.9 0.1", "car 0.0 1.0"]


@pytest.mark.parametrize("header", ["3 2\n", ""], ids=["word2vec", "glove"])
def test_a_byte_order_mark_is_skipped(tmp_path, header) -> None:
    """A UTF-8 BOM (as Windows tools write it) made the first word unknown ('\\ufeffcat'), or
    the word2vec header unreadable."""
    pytest.importorskip("gensim")
    path = tmp_path / "vectors.txt"
    path.write_bytes(codecs.BOM_UTF8 + (header + "\n".join(LINES) + "\n").encode())
    vectors = load_vectors(path)
    assert vectors.index_to_key == ["cat", "dog", "car"]
    assert nearest_words(vectors, "cat", 1) == [("dog", pytest.approx(0.99388, abs=1e-4))]


def test_a_word_with_two_vectors_keeps_its_first_with_one_warning(tmp_path, caplog) -> None:
    """gensim kept an empty row for the repeat: NaN neighbours named None, a numpy warning."""
    pytest.importorskip("gensim")
    path = tmp_path / "vectors.txt"
    path.write_text("4 2\n" + "\n".join([*LINES, "cat 0.0 1.0"]) + "\n", encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's "invalid value encountered in divide"
        vectors = load_vectors(path)
        assert nearest_words(vectors, "cat") == [
            ("dog", pytest.approx(0.99388, abs=1e-4)),
            ("car", pytest.approx(0.0)),
        ]
    assert vectors.index_to_key == ["cat", "dog", "car"] and vectors.vectors.shape == (3, 2)
    assert [record.getMessage() for record in caplog.records] == [
        f"{path}: 1 word(s) with more than one vector ('cat'); the first of each is kept"
    ]
    binary = tmp_path / "vectors.bin"  # the C tool's layout: word, space, floats, newline
    rows = [(b"cat", [1.0, 0.0]), (b"dog", [0.9, 0.1]), (b"cat", [0.0, 1.0])]
    body = b"".join(w + b" " + np.array(v, np.float32).tobytes() + b"\n" for w, v in rows)
    binary.write_bytes(codecs.BOM_UTF8 + b"3 2\n" + body)
    vectors = load_vectors(binary)
    assert vectors.index_to_key == ["cat", "dog"] and vectors["cat"].tolist() == [1.0, 0.0]


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("3 5", "its header '3 5' says 5 numbers per word, but line 2 has a word and 2; correct "
         "the header's second number"),
        ("5 2", "its header '5 2' says 5 words, but the file has 3 lines of vectors; correct the "
         "header's first number"),
        ("2 2", "its header '2 2' says 2 words, but the file has 3 lines of vectors; correct the "
         "header's first number"),
    ],
)  # fmt: skip
def test_a_header_that_the_lines_contradict_names_the_wrong_number(tmp_path, header, message):
    """'3 5' was read as binary and called "damaged"; '2 2' dropped the last word unsaid."""
    pytest.importorskip("gensim")
    path = tmp_path / "vectors.txt"
    path.write_text(header + "\n" + "\n".join(LINES) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{re.escape(f'{path}: {message}')}$"):
        load_vectors(path)


def test_no_word_reaching_min_count_is_refused_in_our_words(tmp_path) -> None:
    pytest.importorskip("gensim")
    words_file = tmp_path / "words.txt"
    words_file.write_text("alpha beta gamma\ndelta\n", encoding="utf-8")
    config = WordVectorConfig(vector_size=8, epochs=1, workers=1, min_count=5)
    with pytest.raises(ValueError, match="no word occurs at least 5 times .* of 4 words"):
        train_word_level_vectors(words_file, config)


def test_an_analogy_is_the_words_nearest_a_minus_b_plus_c(tmp_path) -> None:
    """king - man + woman: by hand, against gensim's own most_similar."""
    gensim = pytest.importorskip("gensim")
    words = ["king", "man", "woman", "queen", "apple"]
    rows = np.array(
        [[1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.1, 1.0], [-1.0, 0.2, 0.1]],
        dtype=np.float32,
    )
    vectors = gensim.models.KeyedVectors(3)
    vectors.add_vectors(words, rows)
    found = analogy(vectors, "king", "man", "woman", top_k=2)
    unit = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    target = unit[0] - unit[1] + unit[2]
    expected = [
        (word, float(unit[i] @ target / np.linalg.norm(target)))
        for i, word in enumerate(words)
        if word in ("queen", "apple")
    ]
    assert [word for word, _ in found] == ["queen", "apple"]
    for (word, score), (_, want) in zip(found, expected, strict=True):
        assert score == pytest.approx(want, abs=1e-5), word
    with pytest.raises(ValueError, match="'prince', 'princess' have no vector"):
        analogy(vectors, "prince", "man", "princess")


def test_word2vec_for_a_time_budget_trains_for_its_seconds(corpus) -> None:
    """`train_word_vectors_for`: round and round the corpus until the seconds are spent."""
    _, tokenized = corpus
    started = time.perf_counter()
    vectors, run = train_word_vectors_for(
        tokenized, WordVectorConfig(vector_size=8, workers=1), 1.0
    )
    assert 1.0 <= run.seconds <= time.perf_counter() - started
    assert run.epochs > 1 and run.raw_words > run.trained_words > 0  # around the corpus again
    used = {str(piece) for piece in np.unique(np.asarray(tokenized.token_ids))}
    assert set(vectors.index_to_key) == used  # every piece of the corpus, keyed by its id
    with pytest.raises(ValueError, match="positive"):
        train_word_vectors_for(tokenized, WordVectorConfig(), 0.0)
