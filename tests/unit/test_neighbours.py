"""Neighbours of a word: one static vector (word2vec, input embeddings) against one vector per use
(contextual), and the polysemy figure."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bertlab.corpus.text_files import read_lines
from bertlab.network.bert import BertModel
from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS, Tokenizer
from bertlab.training.word2vec.vectors import (
    WordVectorConfig,
    nearest_words,
    train_word_level_vectors,
    word_splitter,
    write_word_corpus,
)
from bertlab.use import inspection
from bertlab.use.inspection import cjk_fonts
from bertlab.use.neighbours import (
    Occurrence,
    contextual_neighbours,
    embedding_neighbours,
    nearest_query,
    plot_polysemy,
    reference_sentences,
    word_spans,
    word_vectors_in,
)

WORDS = "the bank river loan approved flooded of a money water 打 电 话 篮 球".split()


@pytest.fixture
def model_and_tokenizer(tiny_config):
    tokenizer = Tokenizer({token: index for index, token in enumerate([*SPECIAL_TOKENS, *WORDS])})
    torch.manual_seed(0)
    model = BertModel(tiny_config.replace(vocab_size=tokenizer.vocab_size)).eval()
    return model, tokenizer


def test_one_word_has_one_static_vector_but_a_vector_per_use(model_and_tokenizer):
    """Must-show 1: "bank" by the river and "bank" of the loan are two contextual vectors; its
    input embedding, like a word2vec vector, is one row whatever the sentence."""
    model, tokenizer = model_and_tokenizer
    sentences = ["the bank of the river flooded", "the bank approved the loan"]
    river, loan = word_vectors_in(model, tokenizer, sentences, "bank")
    assert (river.start, river.end) == (4, 8)
    assert not np.allclose(river.vector, loan.vector, atol=1e-3)
    # The static vector is the input embedding row, looked up by the word alone: one for both.
    near = embedding_neighbours(model, tokenizer, "bank", top_k=3)
    assert near == embedding_neighbours(model, tokenizer, "bank", top_k=3)
    assert len(near) == 3 and "bank" not in [piece for piece, _ in near]
    assert all(piece not in SPECIAL_TOKENS for piece, _ in near)
    chinese = word_vectors_in(model, tokenizer, ["打电话", "打篮球"], "打")
    assert len(chinese) == 2 and not np.allclose(chinese[0].vector, chinese[1].vector, atol=1e-3)


def test_contextual_neighbours_rank_reference_uses_by_cosine():
    def use(sentence: str, vector: list[float]) -> Occurrence:
        return Occurrence(sentence, 0, 4, np.asarray(vector, dtype=np.float32))

    queries = [use("river", [1.0, 0.0]), use("loan", [0.0, 1.0])]
    references = [use("a", [0.9, 0.1]), use("b", [0.1, 0.9]), use("c", [0.8, -0.1])]
    river, loan = contextual_neighbours(queries, references, top_k=2)
    assert [o.sentence for _, o in river.neighbours] == ["a", "c"]
    assert [o.sentence for _, o in loan.neighbours] == ["b", "a"]
    assert nearest_query(queries, references) == [0, 1, 0]


def test_word_spans_and_reference_sentences():
    assert word_spans("The bank, the banks and Bank.", "bank") == [(4, 8), (24, 28)]
    assert word_spans("他打电话，打球。", "打") == [(1, 2), (5, 6)]
    lines = ["The bank closed. Rivers flow. A bank of the river.", "No such word here."]
    assert reference_sentences(lines, "bank", "en") == ["The bank closed.", "A bank of the river."]
    assert reference_sentences(lines, "bank", "en", limit=1) == ["The bank closed."]


def test_the_polysemy_figure_is_written_with_a_cjk_font(model_and_tokenizer, tmp_path):
    model, tokenizer = model_and_tokenizer
    queries = word_vectors_in(model, tokenizer, ["打电话", "打篮球"], "打")
    references = word_vectors_in(model, tokenizer, ["他打电话", "打球", "电话打"], "打")
    path = plot_polysemy("打", queries, references, tmp_path / "polysemy.png", -1)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    if inspection._cjk_font() is None:
        pytest.skip("no CJK font here and noto-cjk-sans-otc (a dependency) is not installed")
    families, note = cjk_fonts(["打"])
    assert note == "" and families[0] != "DejaVu Sans"  # the packaged Noto Sans CJK at least
    assert cjk_fonts(["bank"]) == (["DejaVu Sans"], "")


def test_a_missing_cjk_font_is_said_not_drawn_as_boxes(monkeypatch):
    monkeypatch.setattr(inspection, "_cjk_font", lambda: None)
    families, note = inspection.cjk_fonts(["打"])
    assert families == ["DejaVu Sans"] and "no CJK font found" in note


def test_word_level_vectors_answer_most_similar(tmp_path):
    corpus = tmp_path / "corpus.txt"
    lines = []
    for index in range(300):
        animal = ["cat", "dog", "mouse"][index % 3]
        fruit = ["apple", "pear", "plum"][index % 3]
        lines.append(f"The {animal} chased the {animal}. I ate an {fruit}, a sweet {fruit}!")
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert list(read_lines([corpus]))[0].startswith("The cat")
    assert word_splitter("en")("The Café's dog!") == ["the", "cafe", "s", "dog"]
    words_file = tmp_path / "words.txt"
    assert write_word_corpus([corpus], "en", words_file, max_words=50) == 50
    count = write_word_corpus([corpus], "en", words_file)
    assert count == 300 * 12  # the, cat, chased, the, cat, i, ate, an, apple, a, sweet, apple
    config = WordVectorConfig(vector_size=16, epochs=20, workers=1, min_count=5, window=2)
    vectors = train_word_level_vectors(words_file, config)
    assert vectors.vector_size == 16 and "chased" in vectors.key_to_index
    near = nearest_words(vectors, "cat", top_k=3)
    assert len(near) == 3 and all(-1.0 <= score <= 1.0 for _, score in near)
    with pytest.raises(ValueError, match="has no vector"):
        nearest_words(vectors, "zebra")


def test_a_word_of_unknown_pieces_only_is_refused(model_and_tokenizer):
    """Its vector would be the [UNK] row's, the same for every unknown word."""
    model, tokenizer = model_and_tokenizer
    for word in ("zebra", "斑马", "zebra-crossing"):
        with pytest.raises(ValueError, match=f"'{word}' is not in the vocabulary"):
            embedding_neighbours(model, tokenizer, word)
        with pytest.raises(ValueError, match="its pieces: \\[UNK\\]"):
            word_vectors_in(model, tokenizer, [f"the {word} of the river"], word)
    assert embedding_neighbours(model, tokenizer, "bank-zebra", top_k=2)  # one known piece
