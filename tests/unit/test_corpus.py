"""The on-disk pre-training corpus: round trip, boundaries, cache, bad input, pre-flight report."""

from __future__ import annotations

import gzip
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from bertlab.corpus import encode
from bertlab.corpus.build import build_corpus
from bertlab.corpus.format import META_FILE, TokenizedCorpus
from bertlab.corpus.preflight import MAX_UNK_RATE, check_objective, preflight_report
from bertlab.corpus.text_files import read_lines
from bertlab.corpus.text_units import chinese_word_starts, split_sentences
from bertlab.data.pretraining import create_instances_from_document
from bertlab.tokenizer.training import TokenizerTrainingConfig, train_tokenizer
from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS, Tokenizer

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
    *"abcdefghijklmnopqrstuvwxyz.!?,",
    *[f"##{letter}" for letter in "abcdefghijklmnopqrstuvwxyz"],  # any lowercase word
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
    original = encode.ChunkEncoder.__call__

    def counted(self, task):
        calls.append(len(task.lines))
        return original(self, task)

    monkeypatch.setattr(encode.ChunkEncoder, "__call__", counted)
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


LATIN1 = "Caf\xe9 cr\xe8me br\xfbl\xe9e.\n".encode("latin-1") * 20


def make_empty(tmp_path: Path) -> Path:
    return write(tmp_path / "empty.txt", "")


def make_blank(tmp_path: Path) -> Path:
    return write(tmp_path / "blank.txt.gz", "\n\n  \n")


def make_tokenless(tmp_path: Path) -> Path:
    return write(tmp_path / "tokenless.txt", "\u200b\n\x07\n")  # lines, but not one token


def make_binary(tmp_path: Path) -> Path:
    return write(tmp_path / "model.bin", b"\x00\x01\x02text\x00" * 100)


def make_latin1(tmp_path: Path) -> Path:
    return write(tmp_path / "latin1.txt", b"One good line.\n" + LATIN1)


def make_cut_gzip(tmp_path: Path) -> Path:
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(gzip.compress(ENGLISH.encode() * 50)[:-30])
    return path


def make_crc_gzip(tmp_path: Path) -> Path:
    path = tmp_path / "crc.txt.gz"
    data = bytearray(gzip.compress(ENGLISH.encode() * 50))
    data[-8] ^= 0xFF  # the trailer's CRC-32 no longer matches the text
    path.write_bytes(bytes(data))
    return path


def make_not_gzip(tmp_path: Path) -> Path:
    path = tmp_path / "fake.txt.gz"
    path.write_bytes(b"\x1f\x8b" + b"not really gzip" * 10)
    return path


def make_empty_directory(tmp_path: Path) -> Path:
    path = tmp_path / "shards"
    path.mkdir()
    write(path / ".hidden.txt", ENGLISH)  # hidden files are not part of a folder's corpus
    return path


def make_missing(tmp_path: Path) -> Path:
    return tmp_path / "absent.txt"


BAD_INPUTS = [  # (make the file, exception, words of the message)
    (make_empty, ValueError, "corpus is empty"),
    (make_blank, ValueError, "corpus is empty"),
    (make_tokenless, ValueError, "corpus is empty"),
    (make_binary, ValueError, "looks binary"),
    (make_latin1, ValueError, "mostly not UTF-8"),
    (make_cut_gzip, ValueError, "not a readable gzip file"),
    (make_crc_gzip, ValueError, "not a readable gzip file"),
    (make_not_gzip, ValueError, "not a readable gzip file"),
    (make_empty_directory, ValueError, "is a folder without corpus files"),
    (make_missing, FileNotFoundError, "not found"),
]


@pytest.mark.parametrize("after_a_good_file", [False, True])
@pytest.mark.parametrize(
    ("make", "error", "words"), BAD_INPUTS, ids=[case[0].__name__ for case in BAD_INPUTS]
)
def test_bad_input_is_refused_in_one_line_naming_the_file_leaving_nothing(
    tokenizer, tmp_path, make, error, words, after_a_good_file
):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    bad = make(inputs)
    paths = [write(inputs / "good.txt", ENGLISH), bad] if after_a_good_file else [bad]
    if after_a_good_file and words == "corpus is empty":
        build_corpus(paths, tokenizer, tmp_path / "out", show_progress=False, num_workers=0)
        return  # an empty file beside a good one is no error
    with pytest.raises(error) as caught:
        build_corpus(paths, tokenizer, tmp_path / "out", show_progress=False, num_workers=0)
    message = str(caught.value)
    assert words in message and str(bad) in message and "\n" not in message
    assert [path.name for path in tmp_path.iterdir()] == ["inputs"]  # no corpus, no staging


# Tokenizer training reads the same files the same way (`bertlab.corpus.text_files`); a file with
# lines but no token is a corpus-level notion, not the tokenizer's.
TOKENIZER_BAD_INPUTS = [case for case in BAD_INPUTS if case[0] is not make_tokenless]


@pytest.mark.parametrize(
    ("make", "error", "words"),
    TOKENIZER_BAD_INPUTS,
    ids=[case[0].__name__ for case in TOKENIZER_BAD_INPUTS],
)
def test_tokenizer_training_refuses_the_same_bad_input_in_one_line(tmp_path, make, error, words):
    bad = make(tmp_path)
    config = TokenizerTrainingConfig(vocab_size=200)
    with pytest.raises(error) as caught:
        train_tokenizer([bad], config, show_progress=False)
    message = str(caught.value)
    assert words in message and str(bad) in message and "\n" not in message


def test_bad_input_is_refused_by_the_worker_pool_too(tokenizer, tmp_path):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    paths = [write(inputs / "good.txt", ENGLISH), make_latin1(inputs)]
    with pytest.raises(ValueError, match="latin1.txt is mostly not UTF-8"):
        build_corpus(paths, tokenizer, tmp_path / "out", show_progress=False, num_workers=2)
    assert [path.name for path in tmp_path.iterdir()] == ["inputs"]


def test_no_files_are_refused(tokenizer, tmp_path):
    with pytest.raises(ValueError, match="no corpus files"):
        build_corpus([], tokenizer, tmp_path / "out", show_progress=False)
    assert list(tmp_path.iterdir()) == []


def test_failure_keeps_the_previous_corpus(tokenizer, corpus_files, tmp_path, monkeypatch):
    out = tmp_path / "out"
    before = as_lists(build_corpus(corpus_files, tokenizer, out, show_progress=False))
    write(corpus_files[0], ENGLISH + "\nNew Title\nNew text.\n")

    def fail(self):
        raise OSError("disk full")

    monkeypatch.setattr(encode.CorpusWriter, "finish", fail)
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
        f"The cat {unknown} {unknown} {unknown}.\n"  # document 2: one sentence, three [UNK]
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
    assert report.num_unk_tokens == 3
    assert report.num_tokens == corpus.num_tokens == int(corpus.sentence_offsets[-1])
    assert report.unk_rate == pytest.approx(3 / corpus.num_tokens)
    assert report.unk_rate > MAX_UNK_RATE
    warnings = " ".join(report.warnings)
    for expected in ("[UNK] rate", "duplicates", "memorize"):
        assert expected in warnings
    assert "very short" not in warnings  # 1 of 3 documents is not "most"
    summary = report.summary()
    assert summary[0] == f"corpus: 3 documents, 9 sentences, {corpus.num_tokens} tokens"
    check_objective(report, "mlm+nsp")  # three documents: fine


def varied_documents(num_documents: int, rng_seed: int = 0) -> str:
    """Distinct lines of two sentences each, from a few words."""
    import random

    rng = random.Random(rng_seed)
    words = ["the", "cat", "sat", "dog", "run", "runs", "cats", "dogs", "running", "mat"]
    seen, documents = set(), []
    while len(documents) < num_documents:
        lines = []
        while len(lines) < 4:
            first, second = (" ".join(rng.choices(words, k=10)) for _ in range(2))
            line = f"{first.capitalize()}. {second.capitalize()}."
            if line not in seen:
                seen.add(line)
                lines.append(line)
        documents.append("\n".join(lines))
    return "\n\n".join(documents) + "\n"


def test_clean_corpus_gets_no_warning(tokenizer, tmp_path):
    path = write(tmp_path / "clean.txt", varied_documents(60))
    corpus = build_corpus([path], tokenizer, tmp_path / "out", show_progress=False)
    # 8 - 3 special tokens = 5 per sequence: the ~5,000 tokens give over 1,000 sequences.
    report = preflight_report(corpus, tokenizer, "mlm+nsp", max_seq_length=8)
    assert (report.num_documents, report.num_sentences) == (60, 480)
    assert report.num_duplicate_lines == 0 and report.num_unk_tokens == 0
    assert report.num_short_documents == 0
    assert report.warnings == []
    assert not any(line.startswith("warning") for line in report.summary())


def test_blank_line_after_every_line_is_warned(tokenizer, tmp_path):
    # One sentence per line and a blank line after each: 160 documents of 11 tokens.
    text = varied_documents(20).replace(". ", ".\n").replace("\n", "\n\n")
    path = write(tmp_path / "spaced.txt", text + "\x07\n")  # and a line with no token
    corpus = build_corpus([path], tokenizer, tmp_path / "out", show_progress=False)
    nsp = preflight_report(corpus, tokenizer, "mlm+nsp")
    assert nsp.num_documents == nsp.num_sentences == 160
    assert nsp.num_short_documents == nsp.num_single_sentence_documents == 160
    assert nsp.num_tokenless_lines == 1
    assert "dropped 1 lines without a single token" in nsp.summary()
    assert any("very short" in warning for warning in nsp.warnings)
    mlm = preflight_report(corpus, tokenizer, "mlm")
    assert any("very short" in warning for warning in mlm.warnings)


def test_one_sentence_documents_are_warned_for_nsp_only(tokenizer, tmp_path):
    lines = varied_documents(30).replace("\n\n", "\n").splitlines()
    text = "\n\n".join(line.replace(". ", ", ") for line in lines)  # one long sentence each
    path = write(tmp_path / "single.txt", text + "\n")
    corpus = build_corpus([path], tokenizer, tmp_path / "out", show_progress=False)
    nsp = preflight_report(corpus, tokenizer, "mlm+nsp", max_seq_length=8)
    assert nsp.num_single_sentence_documents == nsp.num_documents == 120
    assert any("one sentence long" in warning for warning in nsp.warnings)
    mlm = preflight_report(corpus, tokenizer, "mlm", max_seq_length=8)
    assert not any("one sentence long" in warning for warning in mlm.warnings)


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


def test_a_line_that_is_not_utf8_is_named_by_file_and_line(tmp_path, caplog):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"the bank\n\ncaf\xe9 of the river\nthe loan\n")
    assert list(read_lines([corpus])) == ["the bank", "the loan"]  # skipped, and said where
    assert f"the first at {corpus}:3" in caplog.text
    with pytest.raises(ValueError, match=f"^{corpus}:3: not UTF-8 \\(byte 0xe9 at byte 4 of"):
        list(read_lines([corpus], do_skip_not_utf8=False))


def _refuse_task_3(task: int) -> int:
    if task == 3:
        raise ValueError("task 3 is bad")
    return task * 10


def _die_at_task_3(task: int) -> int:
    if task == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # as the system's out-of-memory killer does
    return task


@pytest.mark.parametrize(
    ("encoder", "error", "message"),
    [
        (_refuse_task_3, ValueError, "task 3 is bad"),
        (_die_at_task_3, ChildProcessError, "ended before its chunk was done (exit code -9"),
    ],
)
def test_encoding_workers_give_chunks_in_order_and_their_end_in_one_line(encoder, error, message):
    """Chunks come back in order; a worker's error is raised in the command's process, and a
    worker that dies says so; no worker is left behind either way."""
    assert list(encode.encoded_chunks(iter(range(3)), encoder, 2)) == [
        encoder(task) for task in range(3)
    ]
    with pytest.raises(error, match=re.escape(message)):
        list(encode.encoded_chunks(iter(range(20)), encoder, 2))
    assert not multiprocessing.active_children()


def test_encoding_workers_end_quietly_with_a_killed_command(cli_env):
    """`kill -9` of a command that encoded a corpus left its workers running, waiting forever."""
    script = textwrap.dedent(
        """
        import multiprocessing, os, time
        from bertlab.corpus.encode import encoded_chunks

        def slow(task):
            time.sleep(0.05)
            return task

        for index, _ in enumerate(encoded_chunks(iter(range(10**6)), slow, 2)):
            if index == 3:
                print(*(child.pid for child in multiprocessing.active_children()), flush=True)
                os.kill(os.getpid(), 9)
        """
    )
    command = [sys.executable, "-c", script]
    killed = subprocess.run(command, capture_output=True, text=True, env=cli_env, timeout=60)
    workers = [int(pid) for pid in killed.stdout.split()]
    assert killed.returncode == -signal.SIGKILL and len(workers) == 2, killed.stderr
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
    assert killed.stderr == ""
