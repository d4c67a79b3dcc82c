"""A corpus in each format through the commands that read one, as a user runs them: `bertlab
pretrain`, `bertlab tokenizer train`, `bertlab neighbours word2vec`; the misreads users make
(JSON Lines named .txt, a CSV's wrong column, a TSV named .csv) and a folder that links back to
itself, each refused in one line, writing nothing; and a dump of megabytes in one line, trained
on (`-m slow`: 50 MB of it, in under 1 GB of memory)."""

from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from bertlab.cli import main
from bertlab.core.config import BertConfig

PACKAGE = Path(__file__).resolve().parents[2] / "bertlab"
REVIEWS_SLICE = PACKAGE / "demo_data" / "imdb_reviews_slice.txt.gz"
NUM_REVIEWS = 200


@pytest.fixture(scope="module")
def reviews() -> list[str]:
    with gzip.open(REVIEWS_SLICE, "rt", encoding="utf-8") as file:
        return [line.strip() for line in file if line.strip()][:NUM_REVIEWS]


@pytest.fixture
def reviews_jsonl_as_txt(tmp_path, reviews) -> Path:
    """The issue's file: `{"id": 1, "text": "Bromwell High is a cartoon comedy. ..."}` a line."""
    path = tmp_path / "reviews.txt"
    records = (json.dumps({"id": i + 1, "text": text}) for i, text in enumerate(reviews))
    path.write_text("\n".join(records) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def reviews_csv(tmp_path, reviews) -> Path:
    path = tmp_path / "reviews.csv"
    with open(path, "w", encoding="utf-8", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["id", "review", "sentiment"])
        writer.writerows((i, text, "positive") for i, text in enumerate(reviews))
    return path


def refused(capsys, argv: list[str], *words: str) -> str:
    assert main([str(arg) for arg in argv]) == 1
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and "Traceback" not in error, error
    assert all(word in error for word in words), error
    return error


def test_pretrain_refuses_json_lines_named_txt_and_a_wrong_column_writing_nothing(
    reviews_jsonl_as_txt, reviews_csv, tmp_path, capsys
):
    out = tmp_path / "run"
    common = ["--vocab-size", "2000", "--objective", "mlm", "--max-steps", "1", "--out", out]
    error = refused(
        capsys,
        ["pretrain", "--corpus", reviews_jsonl_as_txt, *common],
        f"{reviews_jsonl_as_txt}:1:",
    )
    assert error.startswith("bertlab: error: ") and "--corpus-format 'jsonl'" in error
    error = refused(
        capsys,
        ["pretrain", "--corpus", reviews_csv, "--text-column", "text", *common],
        f"{reviews_csv}:1: no column 'text' (--text-column)",
        "give --text-column 'review'",
    )
    assert not out.exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["reviews.csv", "reviews.txt"]


def test_tokenizer_train_reads_the_text_of_a_csv_and_refuses_json_named_txt(
    reviews_jsonl_as_txt, reviews_csv, tmp_path, capsys
):
    out = tmp_path / "tokenizer"
    refused(capsys, ["tokenizer", "train", reviews_jsonl_as_txt, "--vocab-size", "300", "--out",
                     out], "a JSON object where plain text was expected")  # fmt: skip
    assert not out.exists()
    argv = ["tokenizer", "train", reviews_csv, "--text-column", "review", "--vocab-size", "300"]
    assert main([str(arg) for arg in [*argv, "--out", out, "--no-progress"]]) == 0
    vocab = (out / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert "sentiment" not in vocab and "positive" not in vocab  # the other columns: not read


def test_word2vec_reads_json_lines_by_their_field(reviews_jsonl_as_txt, tmp_path, capsys):
    path = reviews_jsonl_as_txt.rename(tmp_path / "reviews.jsonl")
    argv = ["neighbours", "word2vec", "movie", "--corpus", path, "--epochs", "1", "--min-count",
            "2", "--vector-size", "16"]  # fmt: skip
    assert main([str(arg) for arg in argv]) == 0
    out = capsys.readouterr().out
    assert "movie: " in out and "has no vector" not in out
    refused(capsys, [*argv, "--text-field", "body"], f"{path}:1: no field 'body' (--text-field)")


def test_pretrain_trains_on_a_folder_of_json_lines(reviews, tmp_path, capsys):
    folder = tmp_path / "shards"
    folder.mkdir()
    for index in range(2):
        part = reviews[index::2]
        lines = "".join(json.dumps({"body": text}) + "\n" for text in part)
        (folder / f"part-{index}.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
    config = tmp_path / "config.json"
    BertConfig(
        vocab_size=400, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64,
    ).to_json_file(config)  # fmt: skip
    argv = ["pretrain", "--corpus", folder, "--text-field", "body", "--vocab-size", "400",
            "--config", config, "--max-seq-length", "64", "--batch-size", "4", "--max-steps", "2",
            "--eval-examples", "4", "--objective", "mlm", "--num-workers", "0", "--no-progress",
            "--out", tmp_path / "run"]  # fmt: skip
    assert main([str(arg) for arg in argv]) == 0
    out = capsys.readouterr().out
    parts = f"{folder / 'part-0.jsonl.gz'}, {folder / 'part-1.jsonl.gz'}"
    line = f"read as JSON Lines, field 'body': {parts}, {NUM_REVIEWS} records, {NUM_REVIEWS}"
    assert line in out, out
    assert (tmp_path / "run" / "final" / "model.safetensors").is_file()


# --- inputs as users have them: a dump in one line, a TSV named .csv, a folder with a loop -----

WIKI_SLICE = PACKAGE / "demo_data" / "enwiki_slice.txt.gz"
LONG_LINE_BYTES = 4_000_000


def one_line_of_wikipedia(num_bytes: int) -> str:
    """`num_bytes` of the demo's Wikipedia slice in one line, repeated as needed: a dump
    without line breaks."""
    with gzip.open(WIKI_SLICE, "rt", encoding="utf-8") as file:
        text = " ".join(line.strip() for line in file if line.strip())
    return (text + " ") * (num_bytes // len(text)) + text[: num_bytes % len(text)]


@pytest.fixture(scope="module")
def long_line_files(tmp_path_factory) -> tuple[Path, Path]:
    """(plain text, JSON Lines): LONG_LINE_BYTES of text in one line without a newline, and
    the same text as the one record of a JSON Lines file."""
    directory = tmp_path_factory.mktemp("long_line")
    text = one_line_of_wikipedia(LONG_LINE_BYTES)
    plain, records = directory / "dump.txt", directory / "dump.jsonl"
    plain.write_text(text, encoding="utf-8")
    records.write_text(json.dumps({"id": 1, "text": text}), encoding="utf-8")
    return plain, records


def test_a_line_of_megabytes_is_trained_on_by_the_tokenizer_and_word2vec(
    long_line_files, tmp_path, capsys
):
    """A dump in one line ended in a Rust panic ("Onig: Regex search error: retry-limit-in-match
    over") and a traceback: it is read in pieces of MAX_LINE_BYTES, cut at a space."""
    plain, records = long_line_files
    out = tmp_path / "tokenizer"
    argv = ["tokenizer", "train", plain, "--vocab-size", "2000", "--no-progress", "--out", out]
    assert main([str(arg) for arg in argv]) == 0
    vocab = (out / "vocab.txt").read_text(encoding="utf-8").split("\n")
    assert "the" in vocab and "of" in vocab
    argv = ["neighbours", "word2vec", "the", "--corpus", records, "--epochs", "1",
            "--vector-size", "16", "--max-words", "200000"]  # fmt: skip
    assert main([str(arg) for arg in argv]) == 0
    captured = capsys.readouterr()
    assert "the: " in captured.out and "Traceback" not in captured.err


def test_a_tsv_named_csv_is_said_to_look_tab_separated(reviews, tmp_path, capsys):
    """The advice was "give --text-column 'id\\ttext'", which led to a second error."""
    path = tmp_path / "reviews.csv"
    path.write_text(
        "id\ttext\n" + "".join(f"{i}\t{text}\n" for i, text in enumerate(reviews)), "utf-8"
    )
    error = refused(capsys, ["tokenizer", "train", path, "--vocab-size", "300", "--out",
                             tmp_path / "tokenizer"])  # fmt: skip
    assert error == (
        f"bertlab: error: {path}:1: the header row 'id\\ttext' is cut by tabs: the file looks "
        "tab-separated; name it .tsv or give --corpus-format 'tsv'"
    )
    tsv = path.rename(tmp_path / "reviews.tsv")
    argv = ["tokenizer", "train", tsv, "--vocab-size", "300", "--no-progress", "--out",
            tmp_path / "tokenizer"]  # fmt: skip
    assert main([str(arg) for arg in argv]) == 0  # read as the message says


def test_a_corpus_folder_with_a_link_to_itself_is_refused_naming_the_loop(
    reviews, tmp_path, capsys
):
    """It was read down 41 levels (corpus/all/all/...) until "corpus file not found"."""
    folder = tmp_path / "corpus"
    (folder / "all").mkdir(parents=True)
    (folder / "all" / "reviews.txt").write_text("\n\n".join(reviews) + "\n", encoding="utf-8")
    (folder / "all" / "all").symlink_to("../all")
    link = folder / "all" / "all"
    error = refused(capsys, ["tokenizer", "train", folder, "--vocab-size", "300", "--out",
                             tmp_path / "tokenizer"])  # fmt: skip
    assert error == (
        f"bertlab: error: {link} is a symbolic link to {folder / 'all'}, a folder that holds "
        "it: reading it would go round in a loop; remove the link, or give the folders to read"
    )
    link.unlink()
    argv = ["tokenizer", "train", folder, "--vocab-size", "300", "--no-progress", "--out",
            tmp_path / "tokenizer"]  # fmt: skip
    assert main([str(arg) for arg in argv]) == 0


# Runs a command as its only child and prints the command's peak resident memory (KiB).
PEAK_MEMORY = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(done.returncode)
"""
MAX_PEAK_KIB = 1 << 20  # 1 GiB


@pytest.mark.slow
def test_a_50_mb_line_is_trained_on_in_under_1_gb(tmp_path, cli_env):
    """The issue's dump: 50 MB without a newline peaked at 2.4 GB before the Rust panic."""
    text = one_line_of_wikipedia(50_000_000)
    plain, records = tmp_path / "dump.txt", tmp_path / "dump.jsonl"
    plain.write_text(text, encoding="utf-8")
    records.write_text(json.dumps({"text": text}), encoding="utf-8")
    del text
    for argv in (
        ["tokenizer", "train", plain, "--vocab-size", "30000", "--no-progress", "--out",
         tmp_path / "tokenizer"],
        ["neighbours", "word2vec", "the", "--corpus", records, "--epochs", "1", "--vector-size",
         "16"],
    ):  # fmt: skip
        command = [sys.executable, "-c", PEAK_MEMORY, sys.executable, "-m", "bertlab"]
        done = subprocess.run(
            [*command, *map(str, argv)], env=cli_env, capture_output=True, text=True, timeout=1800
        )
        assert done.returncode == 0, done.stderr[-3000:]
        peak = int(done.stdout.splitlines()[-1])
        print(f"{argv[0]} {argv[1]}: peak {peak / 1024:.0f} MiB")  # seen with -s
        assert peak < MAX_PEAK_KIB, f"{argv[0]} {argv[1]}: {peak / 1024:.0f} MiB"
