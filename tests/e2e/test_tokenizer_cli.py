"""`bertlab tokenizer train|encode` end to end, including the bad inputs users will try."""

from __future__ import annotations

import gzip
import io
import subprocess
import sys
from pathlib import Path

import pytest

from bertlab.cli import main
from bertlab.tokenizer.wordpiece import Tokenizer

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
EXIT_USER_ERROR = 1
MAX_UNK_RATE = 0.001  # the target: [UNK] on held-out lines below 0.1%
LINES = [
    "BERT reads text as word pieces.",
    "Unaffable tokenizers are still useful, aren't they?",
    "北京是中国的首都。",
] * 30


def write_corpus(path: Path, lines: list[str]) -> Path:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as file:
        file.write("\n".join(lines) + "\n")
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["tokenizer", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_train_then_encode(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus.txt.gz", LINES)
    out = tmp_path / "tok"
    code, stdout, _ = run_cli(
        capsys, "train", corpus, "--vocab-size", 200, "--out", out, "--no-progress"
    )
    assert code == 0
    assert "vocabulary size:" in stdout and "[UNK] rate" in stdout and "pieces per word" in stdout
    assert {path.name for path in out.iterdir()} == {
        "vocab.txt",
        "tokenizer.json",
        "tokenizer_config.json",
    }
    code, stdout, _ = run_cli(capsys, "encode", "--tokenizer", out, "BERT reads.", "北京")
    assert code == 0
    assert "[CLS]" in stdout and "北" in stdout
    assert "token_type_ids: [0, 0, 0, 0, 0, 1, 1, 1]" in stdout


def test_cased_training_keeps_case(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus.txt", LINES)
    out = tmp_path / "tok"
    code, _, _ = run_cli(
        capsys, "train", corpus, "--vocab-size", 200, "--cased", "--out", out, "--no-progress"
    )
    assert code == 0
    tokenizer = Tokenizer.from_pretrained(out)
    assert tokenizer.options.lowercase is False
    assert tokenizer.tokenize("BERT")[0] != tokenizer.tokenize("bert")[0]


def test_non_utf8_lines_are_skipped_and_counted(tmp_path, capsys):
    corpus = tmp_path / "mixed.txt"
    corpus.write_bytes("\n".join(LINES).encode("utf-8") + b"\n\xff\xfe\xfd latin-1 junk\n")
    code, stdout, _ = run_cli(
        capsys, "train", corpus, "--vocab-size", 200, "--out", tmp_path / "t", "--no-progress"
    )
    assert code == 0
    assert "skipped 1 lines that are not valid UTF-8" in stdout


def assert_one_line_error(code: int, stderr: str, fragment: str) -> None:
    assert code == EXIT_USER_ERROR
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bertlab: error:"), stderr
    assert fragment in lines[0]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        (None, "vocabulary file not found"),
        ("", "is empty"),
        ("[PAD]\n[UNK]\nhello\n", "lacks the special tokens [CLS], [SEP], [MASK]"),
    ],
)
def test_encode_with_a_bad_vocabulary_fails_with_one_line(tmp_path, capsys, content, fragment):
    vocab = tmp_path / "vocab.txt"
    if content is not None:
        vocab.write_text(content, encoding="utf-8")
    code, _, stderr = run_cli(capsys, "encode", "--tokenizer", vocab, "hello")
    assert_one_line_error(code, stderr, fragment)


@pytest.mark.parametrize(
    ("content", "vocab_size", "fragment"),
    [
        (b"", 100, "corpus is empty"),
        (b"\n\n", 100, "corpus is empty"),
        (b"\xff\xfe\n", 100, "mostly not UTF-8"),
        (b"\x00\x01binary\n", 100, "looks binary"),
        (b"a fine line\n", 4_294_967_296, "is over 1,000,000"),  # aborted the process before
    ],
)
def test_bad_corpus_or_size_fails_and_writes_nothing(
    tmp_path, capsys, content, vocab_size, fragment
):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    out = tmp_path / "tok"
    code, _, stderr = run_cli(
        capsys, "train", corpus, "--vocab-size", vocab_size, "--out", out, "--no-progress"
    )
    assert_one_line_error(code, stderr, fragment)
    assert not out.exists()


def test_missing_corpus_fails_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "tok"
    code, _, stderr = run_cli(
        capsys, "train", tmp_path / "nope.txt", "--vocab-size", 100, "--out", out
    )
    assert_one_line_error(code, stderr, "corpus file not found")
    assert not out.exists()


@pytest.mark.slow
def test_chinese_vocabulary_has_low_unk_rate_and_loads_in_transformers(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    corpus = sorted((SHARED_DATA / "corpus_zh").glob("*.txt"))
    if not corpus:
        pytest.skip(f"no Chinese corpus under {SHARED_DATA}")
    out = tmp_path / "zh"
    code, stdout, _ = run_cli(
        capsys, "train", *corpus, "--vocab-size", 21128, "--out", out, "--no-progress"
    )
    assert code == 0
    rate_line = next(line for line in stdout.splitlines() if "[UNK] rate" in line)
    assert float(rate_line.split(": ")[1].split("%")[0]) / 100 < MAX_UNK_RATE, rate_line
    ours = Tokenizer.from_pretrained(out)
    text = "北京是中国的首都, Beijing is the capital."
    for cls in (transformers.BertTokenizer, transformers.BertTokenizerFast):
        assert cls.from_pretrained(str(out))(text)["input_ids"] == ours(text)["input_ids"]


def test_encode_reads_the_text_from_stdin_with_a_dash(tmp_path, capsys, monkeypatch):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nbert\nreads\n##s\n", encoding="utf-8")
    assert main(["tokenizer", "encode", "--tokenizer", str(vocab), "bert reads"]) == 0
    from_argument = capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", io.StringIO("bert reads\n"))
    assert main(["tokenizer", "encode", "--tokenizer", str(vocab), "-"]) == 0
    assert capsys.readouterr().out == from_argument


def test_a_reader_that_stops_early_ends_the_command_quietly(tmp_path):
    """`bertlab ... | head -1`: the pipe closes before the command is done printing. It stops
    with the shell's code for SIGPIPE and says nothing, like any Unix tool; no error line, no
    "Exception ignored" from the interpreter's last flush."""
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nbert\nreads\n##s\n", encoding="utf-8")
    command = [sys.executable, "-m", "bertlab", "tokenizer", "encode", "--tokenizer", str(vocab)]
    process = subprocess.Popen(
        [*command, "bert reads " * 200], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    process.stdout.close()  # the reader is gone before the first row is printed
    _, stderr = process.communicate(timeout=120)
    assert stderr.decode() == ""
    assert process.returncode == 141


def test_a_second_training_into_one_out_is_refused_with_the_holders_pid(
    tmp_path, capsys, another_writer
):
    """Two trainings into one --out could finish together and mix their vocab.txt and
    tokenizer.json (each file is replaced whole, not the set)."""
    corpus = write_corpus(tmp_path / "corpus.txt", LINES)
    out = tmp_path / "tokenizer"
    with another_writer(out) as pid:
        code = main(["tokenizer", "train", str(corpus), "--vocab-size", "120", "--out", str(out)])
    assert code == EXIT_USER_ERROR
    assert f"pid {pid}" in capsys.readouterr().err
    assert [path.name for path in out.iterdir()] == [".bertlab.lock"]


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"])  # a UTF-8 locale, the C one
def test_encode_of_stdin_or_an_argument_that_is_not_utf8_is_one_line(
    tmp_path, capsys, monkeypatch, errors
):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nbert\n", encoding="utf-8")
    binary = io.BytesIO(b"bert\x89PNG\r\n\x1a\n\x00\x00\xff")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(binary, "utf-8", errors=errors))
    code, out, err = run_cli(capsys, "encode", "--tokenizer", vocab, "-")
    assert_one_line_error(code, err, "<stdin>")
    assert "not UTF-8" in err and out == ""
    code, out, err = run_cli(capsys, "encode", "--tokenizer", vocab, "bert", "\udce8t")
    assert_one_line_error(code, err, "the text '\\xe8t' is not UTF-8")
