"""The on-disk pre-training corpus: round trip, boundaries, cache, bad input, pre-flight report."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from bertlab.data import corpus_encode
from bertlab.data.corpus import (
    META_FILE,
    TokenizedCorpus,
    build_corpus,
    check_objective,
    preflight_report,
)
from bertlab.data.pretraining import (
    chinese_word_starts,
    create_instances_from_document,
    split_sentences,
)
from bertlab.tokenization import SPECIAL_TOKENS, Tokenizer

SHARED_VOCAB = Path(__file__).resolve().parents[2].parent / "shared/data/vocab"

ENGLISH = (
    "First Title\n"
    "Mr. Smith went home. He slept well!\n"
    "A second paragraph here.\n"
    "\n"
    "\n"
    "Second Title\n"
    "Only one sentence.\n"
)
CHINESE = "标题\n他说：「你好。」我们走吧！\n\n第二篇。真的？\n"
TINY_PIECES = [
    *"abcdefghijklmnopqrstuvwxyz.!?",
    "the",
    "##s",
    "##ing",
    "cat",
    "sat",
    "dog",
    "run",
    *"他说你好我们走吧第二篇真的标题。！？：「」",
]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    """Google's uncased vocabulary when the shared data is there, else a tiny one."""
    vocab_file = SHARED_VOCAB / "bert-base-uncased-vocab.txt"
    if vocab_file.is_file():
        return Tokenizer.from_pretrained(vocab_file)
    pieces = [*SPECIAL_TOKENS, *TINY_PIECES]
    return Tokenizer({piece: index for index, piece in enumerate(pieces)})


def write(path: Path, text: str | bytes) -> Path:
    data = text.encode("utf-8") if isinstance(text, str) else text
    if path.suffix == ".gz":
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def expected_documents(tokenizer: Tokenizer, text: str, lang: str) -> list[list[list[int]]]:
    """Tokenize `text` directly, document by document, as the corpus should hold it."""
    documents = []
    for block in text.split("\n\n"):
        sentences = [
            tokenizer.tokenize(sentence)
            for line in block.splitlines()
            if line.strip()
            for sentence in split_sentences(line.strip(), lang)
        ]
        ids = [tokenizer.convert_tokens_to_ids(tokens) for tokens in sentences if tokens]
        if ids:
            documents.append(ids)
    return documents


def as_lists(corpus: TokenizedCorpus) -> list[list[list[int]]]:
    return [[s.tolist() for s in corpus.document(d)] for d in range(corpus.num_documents)]


@pytest.fixture
def corpus_files(tmp_path: Path) -> list[Path]:
    return [write(tmp_path / "en.txt", ENGLISH), write(tmp_path / "zh.txt.gz", CHINESE)]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_round_trip_equals_direct_tokenization(tokenizer, corpus_files, tmp_path, num_workers):
    corpus = build_corpus(
        corpus_files, tokenizer, tmp_path / "out", show_progress=False, num_workers=num_workers
    )
    expected = expected_documents(tokenizer, ENGLISH, "en") + expected_documents(
        tokenizer, CHINESE, "zh"
    )
    assert corpus.meta["langs"] == ["en", "zh"]
    assert as_lists(corpus) == expected
    assert corpus.num_documents == 4
    assert corpus.num_sentences == sum(len(document) for document in expected)
    assert corpus.num_tokens == sum(len(s) for document in expected for s in document)
    assert corpus.token_ids.dtype == np.uint16


def test_boundaries_and_arrays_on_disk(tokenizer, corpus_files, tmp_path):
    corpus = build_corpus(corpus_files, tokenizer, tmp_path / "out", show_progress=False)
    sentences = [tokenizer.decode(s.tolist()) for s in corpus.document(0)]
    assert sentences == [
        "first title",
        "mr. smith went home.",
        "he slept well!",
        "a second paragraph here.",
    ]
    assert len(corpus.document(1)) == 2  # two blank lines are one document break
    assert len(corpus.document(2)) == 3  # a new file starts a new document
    offsets = np.load(tmp_path / "out" / "sentence_offsets.npy")
    documents = np.load(tmp_path / "out" / "document_offsets.npy")
    assert offsets[0] == 0 and offsets[-1] == corpus.num_tokens and np.all(np.diff(offsets) > 0)
    assert documents.tolist() == [0, 4, 6, 9, corpus.num_sentences]
    assert len(corpus.documents) == corpus.num_documents
    assert corpus.documents[-1][0].tolist() == corpus.document(3)[0].tolist()
    with pytest.raises(IndexError):
        corpus.document(4)


def test_corpus_feeds_create_instances(tokenizer, corpus_files, tmp_path):
    import random

    corpus = build_corpus(corpus_files, tokenizer, tmp_path / "out", show_progress=False)
    instances = create_instances_from_document(corpus.documents, 0, 32, 0.0, random.Random(0))
    assert instances and all(instance.tokens_a for instance in instances)


def test_whole_word_starts(tokenizer, tmp_path):
    path = write(tmp_path / "en.txt", "The unaffable cats.\nRunning dogs sat.\n")
    corpus = build_corpus([path], tokenizer, tmp_path / "out", show_progress=False, whole_word=True)
    for d in range(corpus.num_documents):
        for ids, starts in zip(corpus.document(d), corpus.document_word_starts(d), strict=True):
            tokens = tokenizer.convert_ids_to_tokens(ids.tolist())
            assert starts.tolist() == [not token.startswith("##") for token in tokens]
    assert corpus.word_starts is not None
    plain = build_corpus([path], tokenizer, tmp_path / "plain", show_progress=False)
    assert plain.word_starts is None
    with pytest.raises(ValueError, match="whole_word"):
        plain.document_word_starts(0)


def test_chinese_whole_word_starts_follow_the_segmenter(tokenizer, tmp_path):
    pytest.importorskip("jieba")
    chinese_vocab = SHARED_VOCAB / "bert-base-chinese-vocab.txt"
    if chinese_vocab.is_file():
        tokenizer = Tokenizer.from_pretrained(chinese_vocab)
    path = write(tmp_path / "zh.txt", "我们走吧！\n")
    corpus = build_corpus(
        [path], tokenizer, tmp_path / "out", show_progress=False, whole_word=True, num_workers=0
    )
    tokens = tokenizer.convert_ids_to_tokens(corpus.document(0)[0].tolist())
    if tokens[:4] != list("我们走吧"):
        pytest.skip("vocabulary lacks these characters")
    starts = corpus.document_word_starts(0)[0].tolist()
    assert starts == chinese_word_starts(tokens)  # jieba: 我们 / 走 / 吧
    assert starts[:2] == [True, False]


# --- cache -----------------------------------------------------------------------------------


def count_encoding(monkeypatch) -> list[int]:
    calls = []
    original = corpus_encode.ChunkEncoder.__call__

    def counted(self, task):
        calls.append(len(task.lines))
        return original(self, task)

    monkeypatch.setattr(corpus_encode.ChunkEncoder, "__call__", counted)
    return calls


def test_cache_hit_does_not_tokenize_again(tokenizer, corpus_files, tmp_path, monkeypatch):
    out = tmp_path / "out"
    calls = count_encoding(monkeypatch)
    first = build_corpus(corpus_files, tokenizer, out, show_progress=False, num_workers=0)
    assert calls
    calls.clear()
    meta_mtime = (out / META_FILE).stat().st_mtime_ns
    second = build_corpus(corpus_files, tokenizer, out, show_progress=False, num_workers=0)
    assert calls == []
    assert (out / META_FILE).stat().st_mtime_ns == meta_mtime
    assert as_lists(second) == as_lists(first)


def test_cache_miss_when_corpus_or_tokenizer_changes(
    tokenizer, corpus_files, tmp_path, monkeypatch
):
    out = tmp_path / "out"
    calls = count_encoding(monkeypatch)
    build_corpus(corpus_files, tokenizer, out, show_progress=False, num_workers=0)
    write(corpus_files[0], ENGLISH + "\nThird Title\nMore text.\n")
    calls.clear()
    changed = build_corpus(corpus_files, tokenizer, out, show_progress=False, num_workers=0)
    assert calls and changed.num_documents == 5
    cased = Tokenizer(tokenizer.get_vocab(), tokenizer.options.__class__(lowercase=False))
    calls.clear()
    build_corpus(corpus_files, cased, out, show_progress=False, num_workers=0)
    assert calls
    assert sorted(path.name for path in tmp_path.iterdir()) == ["en.txt", "out", "zh.txt.gz"]


def test_corpus_built_with_another_tokenizer_is_refused_by_the_report(
    tokenizer, corpus_files, tmp_path
):
    corpus = build_corpus(corpus_files, tokenizer, tmp_path / "out", show_progress=False)
    other = Tokenizer(tokenizer.get_vocab(), tokenizer.options.__class__(lowercase=False))
    with pytest.raises(ValueError, match="another tokenizer"):
        preflight_report(corpus, other, "mlm")


# --- bad input -------------------------------------------------------------------------------


def assert_nothing_left(tmp_path: Path, inputs: set[str]) -> None:
    assert {path.name for path in tmp_path.iterdir()} == inputs


def test_invalid_utf8_lines_are_skipped_and_counted(tokenizer, tmp_path):
    text = b"Good Title\nA fine line.\n" + b"bad \xff\xfe line\n" + b"Another one.\n"
    path = write(tmp_path / "mixed.txt", text)
    corpus = build_corpus([path], tokenizer, tmp_path / "out", show_progress=False)
    assert corpus.meta["counts"]["skipped_lines"] == 1
    assert corpus.num_sentences == 3
    report = preflight_report(corpus, tokenizer, "mlm")
    assert report.num_skipped_lines == 1
    assert any("not valid UTF-8" in line for line in report.summary())


def test_binary_file_is_refused(tokenizer, tmp_path):
    path = write(tmp_path / "model.bin", b"\x00\x01\x02text\x00" * 100)
    with pytest.raises(ValueError, match="binary"):
        build_corpus([path], tokenizer, tmp_path / "out", show_progress=False)
    assert_nothing_left(tmp_path, {"model.bin"})


def test_mostly_non_utf8_file_is_refused(tokenizer, tmp_path):
    latin1 = "Caf\xe9 cr\xe8me br\xfbl\xe9e.\n".encode("latin-1") * 20
    path = write(tmp_path / "latin1.txt", b"One good line.\n" + latin1)
    with pytest.raises(ValueError, match="mostly not UTF-8"):
        build_corpus([path], tokenizer, tmp_path / "out", show_progress=False)
    assert_nothing_left(tmp_path, {"latin1.txt"})


def test_broken_gzip_is_refused(tokenizer, tmp_path):
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(gzip.compress(ENGLISH.encode() * 50)[:-30])
    with pytest.raises(ValueError, match="gzip"):
        build_corpus([path], tokenizer, tmp_path / "out", show_progress=False)
    assert_nothing_left(tmp_path, {"cut.txt.gz"})


@pytest.mark.parametrize("text", ["", "\n\n  \n", "\u200b\n\x07\n"])  # last: no tokens
def test_empty_corpus_is_refused(tokenizer, tmp_path, text):
    path = write(tmp_path / "empty.txt", text)
    with pytest.raises(ValueError, match="empty"):
        build_corpus([path], tokenizer, tmp_path / "out", show_progress=False)
    assert_nothing_left(tmp_path, {"empty.txt"})


def test_missing_file_and_no_files_are_refused(tokenizer, tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        build_corpus([tmp_path / "absent.txt"], tokenizer, tmp_path / "out", show_progress=False)
    with pytest.raises(ValueError, match="no corpus files"):
        build_corpus([], tokenizer, tmp_path / "out", show_progress=False)
    assert_nothing_left(tmp_path, set())


def test_failure_keeps_the_previous_corpus(tokenizer, corpus_files, tmp_path, monkeypatch):
    out = tmp_path / "out"
    before = as_lists(build_corpus(corpus_files, tokenizer, out, show_progress=False))
    write(corpus_files[0], ENGLISH + "\nNew Title\nNew text.\n")

    def fail(self):
        raise OSError("disk full")

    monkeypatch.setattr(corpus_encode.CorpusWriter, "finish", fail)
    with pytest.raises(OSError, match="disk full"):
        build_corpus(corpus_files, tokenizer, out, show_progress=False, num_workers=0)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["en.txt", "out", "zh.txt.gz"]
    assert as_lists(TokenizedCorpus.open(out)) == before


def test_foreign_out_dir_is_not_replaced(tokenizer, corpus_files, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not a bertlab corpus"):
        build_corpus(corpus_files, tokenizer, out, show_progress=False)
    assert (out / "notes.txt").read_text() == "keep me"


def test_damaged_corpus_is_reported(tokenizer, corpus_files, tmp_path):
    out = tmp_path / "out"
    build_corpus(corpus_files, tokenizer, out, show_progress=False)
    with open(out / "token_ids.bin", "ab") as file:
        file.write(b"\x00\x00")
    with pytest.raises(ValueError, match="does not match"):
        TokenizedCorpus.open(out)
    rebuilt = build_corpus(corpus_files, tokenizer, out, show_progress=False)  # rebuilt, not used
    assert rebuilt.num_tokens == json.loads((out / META_FILE).read_text())["counts"]["tokens"]


# --- pre-flight report -----------------------------------------------------------------------


def test_preflight_numbers_on_a_hand_made_corpus(tokenizer, tmp_path):
    vocab = tokenizer.get_vocab()
    unknown = "\u0d9e"  # a Sinhala letter: no piece in either vocabulary
    assert unknown not in vocab
    long_line = "The cat sat on the mat. The dog sat on the cat, all day long."
    text = (
        f"{long_line}\n"  # document 1: 2 sentences
        f"{long_line}\n"  # duplicate line
        "Short.\n"
        "Short.\n"  # short lines are not checked for duplicates
        "\n"
        f"The cat {unknown}.\n"  # document 2: one sentence, one [UNK]
        "\n"
        f"{long_line}\n"  # document 3: a duplicate of line 1
    )
    path = write(tmp_path / "hand.txt", text)
    corpus = build_corpus([path], tokenizer, tmp_path / "out", show_progress=False)
    report = preflight_report(corpus, tokenizer, "mlm+nsp", max_seq_length=128)
    assert (report.num_documents, report.num_sentences) == (3, 9)
    assert (report.num_lines, report.num_checked_lines, report.num_duplicate_lines) == (6, 3, 2)
    assert report.duplicate_line_ratio == pytest.approx(2 / 3)
    assert report.num_single_sentence_documents == 1
    # Only document 2 is short (one sentence, fewer than MIN_DOCUMENT_TOKENS tokens).
    assert report.num_short_documents == 1
    assert report.num_unk_tokens == 1
    assert report.num_tokens == corpus.num_tokens == int(corpus.sentence_offsets[-1])
    assert report.unk_rate == pytest.approx(1 / corpus.num_tokens)
    warnings = " ".join(report.warnings)
    for expected in ("[UNK] rate", "duplicates", "memorize"):
        assert expected in warnings
    assert "very short" not in warnings  # 1 of 3 documents is not "most"
    summary = report.summary()
    assert summary[0] == f"corpus: 3 documents, 9 sentences, {corpus.num_tokens} tokens"
    check_objective(report, "mlm+nsp")  # three documents: fine


def test_nsp_on_one_document_is_refused(tokenizer, tmp_path):
    path = write(tmp_path / "one.txt", "Title\nOne sentence. Another one here.\n")
    corpus = build_corpus([path], tokenizer, tmp_path / "out", show_progress=False)
    report = preflight_report(corpus, tokenizer, "mlm+nsp")
    with pytest.raises(ValueError, match="NSP needs at least two documents"):
        check_objective(report, "mlm+nsp")
    check_objective(preflight_report(corpus, tokenizer, "mlm"), "mlm")


def test_unknown_lang_and_objective_are_refused(tokenizer, corpus_files, tmp_path):
    with pytest.raises(ValueError, match="lang"):
        build_corpus(corpus_files, tokenizer, tmp_path / "out", lang="fr", show_progress=False)
    corpus = build_corpus(corpus_files, tokenizer, tmp_path / "out", show_progress=False)
    with pytest.raises(ValueError, match="objective"):
        preflight_report(corpus, tokenizer, "nsp")
