"""Model cards (README.md, the Hub's convention) in the final folders of `pretrain` and
`finetune`, with the numbers that run measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from bertlab import PretrainRun, run_pretraining
from bertlab.cli import main
from bertlab.core.config import BertConfig
from bertlab.core.model_card import format_value

TASK_DATA = Path(__file__).resolve().parents[1] / "data" / "tasks"


pytestmark = pytest.mark.usefixtures("one_thread")


def row(name: str, value) -> str:
    return f"| {name} | {format_value(value)} |"


def test_pretrain_writes_a_card_with_the_runs_numbers(pretrain_files, tmp_path):
    vocab, corpus = pretrain_files
    config = BertConfig(
        vocab_size=126, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64,
    )  # fmt: skip
    run = PretrainRun(
        corpus=[corpus], out=tmp_path / "run", max_steps=4, tokenizer=vocab, model_config=config,
        max_seq_length=32, batch_size=8, eval_every_steps=2, eval_examples=16,
        corpus_cache=tmp_path / "corpus", lang="en",
    )  # fmt: skip
    result = run_pretraining(run, show_progress=False)
    card = ModelCard.load(result.final_dir / "README.md")
    assert card.data.library_name == "bertlab" and card.data.pipeline_tag == "fill-mask"
    assert card.data.language == ["en"] and card.data.base_model is None
    text = card.text
    assert row("steps", 4) in text
    assert row("tokens trained on", result.progress.tokens) in text
    assert result.last_eval, "the run evaluated on held-out documents"
    for name, value in result.last_eval.items():
        assert row(f"held-out {name}", value) in text
    assert row("masking rate", 0.15) in text and corpus.name in text
    for section in ("## Intended use", "## Training data", "## Training procedure", "## Results"):
        assert section in text
    assert "What it can do: `bertlab fill-mask`" in text and "bertlab fill-mask --model" in text


def test_a_causal_models_card_lists_what_it_can_do_and_not_fill_mask(pretrain_files, tmp_path):
    """A left-to-right model's card advertised fill-mask, which refuses it."""
    vocab, corpus = pretrain_files
    config = BertConfig(
        vocab_size=126, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64,
    )  # fmt: skip
    run = PretrainRun(
        corpus=[corpus], out=tmp_path / "run", max_steps=2, tokenizer=vocab, model_config=config,
        max_seq_length=32, batch_size=8, eval_every_steps=2, eval_examples=16,
        corpus_cache=tmp_path / "corpus", lang="en", objective="clm",
    )  # fmt: skip
    card = ModelCard.load(run_pretraining(run, show_progress=False).final_dir / "README.md")
    assert card.data.pipeline_tag == "text-generation"
    assert "`bertlab generate`" in card.text and "not `fill-mask`" in card.text
    assert "bertlab generate --model DIR" in card.text
    assert "bertlab fill-mask --model" not in card.text


def test_finetune_writes_cards_with_dev_scores_and_the_seed_summary(tmp_path, capsys, task_vocab):
    out = tmp_path / "run"
    code = main(
        [str(arg) for arg in (
            "finetune", "--task", "rte", "--train", TASK_DATA / "rte_style.tsv",
            "--dev", TASK_DATA / "rte_style.tsv", "--from-scratch", "--model-size", "tiny",
            "--tokenizer", task_vocab, "--out", out, "--epochs", 1, "--batch-size", 4,
            "--seeds", "1,2", "--no-progress",
        )]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    summary = json.loads((out / "seeds.json").read_text())
    for seed in (1, 2):
        result = json.loads((out / f"seed-{seed}" / "result.json").read_text())
        card = ModelCard.load(out / f"seed-{seed}" / "best" / "README.md")
        assert card.data.pipeline_tag == "text-classification"
        for name, value in result["dev"].items():
            assert row(f"dev {name}", value) in card.text
        assert row("seed", seed) in card.text
    best = ModelCard.load(out / "best" / "README.md").text
    accuracy = summary["dev"]["accuracy"]
    assert f"best of seeds 1, 2: dev accuracy mean {accuracy['mean']:.4f}" in best
    assert row("seed", summary["best_seed"]) in best
    assert "random weights (BERT-tiny" in best
