"""A corpus in each format through the commands that read one, as a user runs them: `bertlab
pretrain`, `bertlab tokenizer train`, `bertlab neighbours word2vec`; and the two misreads users
make (JSON Lines named .txt, a CSV's wrong column), each refused in one line, writing nothing."""

from __future__ import annotations

import csv
import gzip
import json
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
