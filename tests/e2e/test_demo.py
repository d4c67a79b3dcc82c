"""`bertlab demo` end to end with a tiny recipe (the real one takes minutes)."""

from __future__ import annotations

import dataclasses
import gzip
import json
import statistics
from pathlib import Path

import pytest

from bertlab.apps.demo import DATA_DIR, RECIPES, run_demo
from bertlab.apps.flows import compare, sign_test
from bertlab.cli import main

TINY = {
    "vocab_size": 2000,
    "num_hidden_layers": 1,
    "hidden_size": 32,
    "num_attention_heads": 2,
    "intermediate_size": 64,
    "max_seq_length": 64,
    "finetune_epochs": 1,
}
MODELS = ("pre-trained", "word vectors", "from scratch")


def _small_corpus(recipe, directory: Path) -> Path:
    """The recipe's first 400 reviews: enough for a tiny run, fast to tokenize."""
    with gzip.open(DATA_DIR / recipe.corpus, "rt", encoding="utf-8") as source:
        reviews = source.read().split("\n\n")[:400]
    path = directory / "reviews.txt"
    path.write_text("\n\n".join(reviews) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("lang", ["en", pytest.param("zh", marks=pytest.mark.slow)])
def test_demo_tells_the_whole_story(tmp_path, lang) -> None:
    lines: list[str] = []
    corpus = _small_corpus(RECIPES[lang], tmp_path)
    recipe = dataclasses.replace(RECIPES[lang], corpus=str(corpus), **TINY)
    tmp_path = tmp_path / "demo"
    result = run_demo(tmp_path, 0.1, lang, (1, 2), False, lines.append, recipe)
    text = "\n".join(lines)
    for step in ("== 1.", "== 2.", "== 3.", "== 4.", "== 5.", "== 6."):
        assert step in text
    assert result.pretrain["steps"] > 0 and result.pretrain["tokens"] > 0
    assert len(result.fill_mask) == len(recipe.fill_mask_sentences)
    assert set(result.scores) == set(MODELS)
    assert all(
        len(scores) == 2 and all(0 <= s <= 1 for s in scores) for scores in result.scores.values()
    )
    # The printed table and results.json agree with each run's own test.json.
    results = json.loads((tmp_path / "results.json").read_text())
    for name in MODELS:
        run_dir = tmp_path / "finetune" / name.replace(" ", "-")
        accuracies = [
            json.loads((run_dir / f"seed-{s}" / "test.json").read_text())["accuracy"]
            for s in (1, 2)
        ]
        assert results["scores"][name] == accuracies == result.scores[name]
        row = next(line for line in lines if line.startswith(f"| {name} |"))
        assert row.split("|")[2].strip() == f"{statistics.median(accuracies):.1%}"
    # Each model's verdict against scratch is computed from those scores.
    for name in ("pre-trained", "word vectors"):
        found = results["comparisons"][name]
        expected = compare(results["scores"]["from scratch"], results["scores"][name])
        assert (found["margin"], found["spread"]) == (expected.margin, expected.spread)
        wins, losses, p_value = sign_test(
            results["scores"]["from scratch"], results["scores"][name]
        )
        assert (found["paired_wins"], found["paired_losses"], found["sign_test_p"]) == (
            wins,
            losses,
            p_value,
        )
    # The pre-training figures were drawn from metrics.jsonl, which holds this run's steps.
    records = [json.loads(line) for line in (tmp_path / "pretrain" / "metrics.jsonl").open()]
    assert max(r["step"] for r in records) == results["pretrain"]["steps"]
    last_eval = [r for r in records if r["kind"] == "eval"][-1]
    assert last_eval["mlm_accuracy"] == results["pretrain"]["eval"]["mlm_accuracy"]
    assert results["word_vectors"]["pieces"] > 0
    report = (tmp_path / "report.md").read_text()
    for name in MODELS:
        assert f"| {name} |" in report
    for item in results["fill_mask"]:
        assert f"`{item['sentence']}`" in report
    for word, near in results["word_vectors"]["neighbours"].items():
        assert f"- `{word}`: `{near[0][0]}`" in report
    assert (
        report.count("beats scratch")
        + report.count("does not beat")
        + report.count("no gain is established")
        == 2
    )
    for figure in ("pretraining.png", "finetuning.png", "comparison.png", "attention.png"):
        assert (tmp_path / figure).read_bytes()[:4] == b"\x89PNG"
        assert f"({figure})" in report


def test_demo_command_rejects_bad_flags(capsys) -> None:
    assert main(["demo", "--seeds", "1,x"]) == 1
    assert main(["demo", "--minutes", "0"]) == 1
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all(e.startswith("bertlab: error:") for e in errors)
