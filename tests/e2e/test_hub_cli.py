"""Every command that takes a model (`--model`, `--init-from`, `--tokenizer`) accepts a Hugging
Face Hub id, read here offline (HF_HUB_OFFLINE) from a local cache built by the test; an id the
cache lacks ends in one line and exit code 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bertlab.cli import main

TASK_DATA = Path(__file__).resolve().parents[1] / "data" / "tasks"
REVIEWS = TASK_DATA / "reviews.csv"
REVIEW_COLUMNS = ("--text-column", "review", "--label-column", "sentiment", "--id-column", "id")
EXIT_USER_ERROR = 1


pytestmark = pytest.mark.usefixtures("one_thread")


def run_cli(capsys, *argv: object) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code: int, stderr: str, *fragments: str) -> None:
    assert code == EXIT_USER_ERROR
    errors = [line for line in stderr.splitlines() if line.startswith("bertlab: error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def finetune_reviews(capsys, model: str, out: Path) -> tuple[int, str, str]:
    return run_cli(
        capsys,
        "finetune", "--task", "classification", "--train", REVIEWS, "--dev", REVIEWS,
        *REVIEW_COLUMNS, "--model", model, "--out", out, "--epochs", 1, "--batch-size", 4,
        "--no-progress",
    )  # fmt: skip


def test_finetune_evaluate_and_predict_take_hub_ids(tmp_path, capsys, add_to_hub_cache):
    out = tmp_path / "run"
    code, _, stderr = finetune_reviews(capsys, "bert-base-uncased", out)
    assert code == 0, stderr
    add_to_hub_cache("someone/tiny-reviews", out / "best")
    results = {}
    for model in ("someone/tiny-reviews", out / "best"):
        code, stdout, stderr = run_cli(
            capsys, "evaluate", "--task", "classification", "--model", model, "--data", REVIEWS,
            *REVIEW_COLUMNS,
        )  # fmt: skip
        assert code == 0, stderr
        results[str(model)] = json.loads(stdout.strip().splitlines()[-1])
        predictions = tmp_path / f"predictions-{len(results)}.jsonl"
        code, _, stderr = run_cli(
            capsys, "predict", "--task", "classification", "--model", model, "--data", REVIEWS,
            "--output", predictions, *REVIEW_COLUMNS,
        )  # fmt: skip
        assert code == 0, stderr
    assert results["someone/tiny-reviews"] == results[str(out / "best")]
    assert (tmp_path / "predictions-1.jsonl").read_text() == (
        tmp_path / "predictions-2.jsonl"
    ).read_text()


def test_fill_mask_and_attention_take_a_hub_id(tmp_path, capsys, hub_cache, hub_model_folder):
    by_id = run_cli(capsys, "fill-mask", "--model", "bert-base-uncased", "the cat [MASK] .")
    by_folder = run_cli(capsys, "fill-mask", "--model", hub_model_folder, "the cat [MASK] .")
    assert by_id[0] == 0 and by_id == by_folder
    png = tmp_path / "attention.png"
    code, stdout, stderr = run_cli(
        capsys, "attention", "--model", "google-bert/bert-base-uncased", "--text", "a good film",
        "--out", png,
    )  # fmt: skip
    assert code == 0, stderr
    assert png.stat().st_size > 0


def test_pretrain_continues_from_a_hub_id(tmp_path, capsys, hub_cache):
    corpus = tmp_path / "corpus.txt"
    sentences = ["the cat sat on the mat .", "the dog was very good .", "paris is a city ."]
    documents = ["\n".join(sentences[i:] + sentences[:i]) for i in range(3)] * 4
    corpus.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    code, _, stderr = run_cli(
        capsys, "pretrain", "--corpus", corpus, "--init-from", "bert-base-uncased",
        "--max-steps", 2, "--max-seq-length", 16, "--batch-size", 4, "--eval-examples", 0,
        "--no-progress", "--out", out,
    )  # fmt: skip
    assert code == 0, stderr
    card = (out / "final" / "README.md").read_text(encoding="utf-8")
    assert "base_model: bert-base-uncased" in card and "continued from `bert-base-uncased`" in card


def test_the_tokenizer_flag_takes_a_hub_id(capsys, hub_cache):
    code, stdout, stderr = run_cli(
        capsys, "tokenizer", "encode", "--tokenizer", "bert-base-uncased", "The Film"
    )
    assert code == 0, stderr
    assert "the" in stdout and "film" in stdout


MISSING = "someone/not-in-the-cache"


@pytest.mark.parametrize(
    "argv",
    [
        ("finetune", "--task", "sst2", "--train", TASK_DATA / "cola_style.tsv", "--model", MISSING,
         "--out", "{tmp}/run"),
        ("evaluate", "--task", "sst2", "--model", MISSING, "--data", TASK_DATA / "cola_style.tsv"),
        ("predict", "--task", "sst2", "--model", MISSING, "--data", TASK_DATA / "cola_style.tsv",
         "--output", "{tmp}/predictions.jsonl"),
        ("fill-mask", "--model", MISSING, "a [MASK] ."),
        ("attention", "--model", MISSING, "--text", "a film", "--out", "{tmp}/a.png"),
        ("pretrain", "--corpus", TASK_DATA / "reviews.csv", "--text-column", "review",
         "--init-from", MISSING, "--max-steps", "1", "--out", "{tmp}/pretrain"),
        ("tokenizer", "encode", "--tokenizer", MISSING, "text"),
    ],
    ids=lambda argv: argv[0] if argv[0] != "tokenizer" else "tokenizer-encode",
)  # fmt: skip
def test_an_id_missing_from_the_cache_is_one_line_and_exit_1(tmp_path, capsys, hub_cache, argv):
    argv = [str(arg).replace("{tmp}", str(tmp_path)) for arg in argv]
    code, _, stderr = run_cli(capsys, *argv)
    assert_one_line_error(code, stderr, MISSING, "HF_HUB_OFFLINE", "pass a local model folder")


def _env(cache: Path) -> dict[str, str]:
    return os.environ | {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}


def test_the_environment_variables_work_in_a_real_process(hub_cache):
    """HF_HUB_OFFLINE and HF_HUB_CACHE as a user sets them, read by huggingface_hub itself."""
    command = [sys.executable, "-m", "bertlab", "fill-mask", "--model", "bert-base-uncased"]
    found = subprocess.run(
        [*command, "the [MASK] sat ."], env=_env(hub_cache), capture_output=True, text=True
    )
    assert found.returncode == 0, found.stderr
    assert "[MASK] 1:" in found.stdout
    command[-1] = MISSING
    missing = subprocess.run(
        [*command, "the [MASK] sat ."], env=_env(hub_cache), capture_output=True, text=True
    )
    assert missing.returncode == EXIT_USER_ERROR
    assert missing.stderr.strip().splitlines() == [
        f"bertlab: error: {MISSING} is not a local folder, and HF_HUB_OFFLINE is set and it is "
        "not in the Hugging Face cache; pass a local model folder instead"
    ]
