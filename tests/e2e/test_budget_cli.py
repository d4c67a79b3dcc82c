"""`bertlab pretrain --budget`: the budget recipe fills in what the user left unset."""

from __future__ import annotations

import json

import pytest
import torch

from bertlab.cli import build_parser, main
from bertlab.cli.pretrain import pretrain_run
from bertlab.core.config import PRESETS, BertConfig, PretrainConfig, PretrainDataConfig
from bertlab.network.bert import BertEmbeddings, BertForPreTraining
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.metrics_log import read_metrics
from bertlab.training.pretraining.budget import FINETUNE_DROPOUT, BudgetRecipe, budget_recipe


def _run(*argv: str):
    args = build_parser().parse_args(["pretrain", "--corpus", "c.txt", "--out", "o", *argv])
    return pretrain_run(args)


def test_budget_fills_the_recipe_and_explicit_flags_win() -> None:
    recipe = budget_recipe(3600)
    run = _run("--budget", "1h", "--max-seq-length", "64")
    data, loop = run.resolved.data, run.resolved.loop
    assert run.resolved.recipe == recipe
    assert loop.max_time == 3600 and loop.max_steps is None
    assert data.max_seq_length == 64  # given: kept
    assert (data.objective, data.mlm_probability) == (recipe.objective, recipe.mlm_probability)
    assert data.max_predictions_per_seq == 26  # ceil(64 * 0.4)
    assert data.pack_sequences
    assert (loop.learning_rate, loop.schedule) == (recipe.learning_rate, recipe.schedule)
    assert (loop.batch_size, run.resolved.dropout) == (recipe.batch_size, recipe.dropout)
    assert run.resolved.shape == recipe.model_size == "mini"  # the recipe's own shape for an hour
    assert run.resolved.vocabulary_size == recipe.vocab_size
    assert run.resolved.position_init == recipe.position_init == "sinusoidal"
    assert _run("--budget", "1h", "--position-init", "normal").resolved.position_init == "normal"
    run = _run("--budget", "1h", "--model-size", "tiny", "--learning-rate", "2e-3")
    assert (run.resolved.shape, run.resolved.loop.learning_rate) == ("tiny", 2e-3)
    assert not _run("--budget", "1h", "--objective", "mlm+nsp").resolved.data.pack_sequences


def test_the_shape_and_its_peak_rate_follow_the_budget() -> None:
    """BERT-Tiny below half an hour, BERT-mini from there on (docs/budget.md#why-each-choice)."""
    for seconds in (60, 10 * 60, 30 * 60 - 1):
        recipe = budget_recipe(seconds)
        assert (recipe.model_size, recipe.learning_rate) == ("tiny", 2e-3)
    for seconds in (30 * 60, 60 * 60, 8 * 3600):
        recipe = budget_recipe(seconds)
        assert (recipe.model_size, recipe.learning_rate) == ("mini", 1e-3)
    # Everything else is the same recipe.
    assert budget_recipe(3600) == BudgetRecipe(model_size="mini", learning_rate=1e-3)


def test_without_budget_the_configs_defaults_apply() -> None:
    run = _run("--max-steps", "10", "--tokenizer", "vocab.txt")
    data, loop = run.resolved.data, run.resolved.loop
    assert run.resolved.recipe is None
    assert loop.learning_rate == PretrainConfig.learning_rate
    assert data.objective == PretrainDataConfig.objective
    assert data.max_seq_length == PretrainDataConfig.max_seq_length
    assert data.max_predictions_per_seq == 20  # ceil(128 * 0.15), Google's flag
    assert run.resolved.shape == "mini"
    assert run.resolved.dropout is None  # the config's own dropout
    assert run.resolved.final_dropout is None  # the config.json is left as trained
    assert run.resolved.position_init == "normal"  # BERT's initialization


def test_a_new_model_starts_from_sinusoidal_positions_when_asked(pretrain_files, tmp_path):
    vocab, corpus = pretrain_files
    out = tmp_path / "run"
    code = main(
        ["pretrain", "--corpus", str(corpus), "--tokenizer", str(vocab), "--out", str(out),
         "--model-size", "tiny", "--max-steps", "1", "--learning-rate", "1e-12",
         "--max-seq-length", "32", "--position-init", "sinusoidal", "--eval-examples", "8",
         "--no-progress"]
    )  # fmt: skip
    assert code == 0
    trained = BertForPreTraining.from_pretrained(out / "final").bert.embeddings
    config = BertConfig.from_json_file(out / "final" / "config.json")
    expected = BertEmbeddings(config)
    expected.init_sinusoidal_positions(config.initializer_range)
    torch.testing.assert_close(
        trained.position_embeddings.weight, expected.position_embeddings.weight, rtol=0, atol=1e-6
    )


def test_position_init_is_refused_with_init_from() -> None:
    with pytest.raises(ValueError, match="init_from keeps"):
        _run("--max-steps", "1", "--init-from", "m", "--position-init", "sinusoidal")
    # the recipe's own choice is no request: --budget with --init-from still runs
    run = _run("--budget", "1h", "--init-from", "m")
    assert run.resolved.shape is None and run.resolved.dropout is None  # the model's own


def test_a_shape_is_given_once() -> None:
    with pytest.raises(ValueError, match="one of model_size, model_config and init_from"):
        _run("--max-steps", "1", "--tokenizer", "v", "--model-size", "tiny", "--config", "c")


def test_budget_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        budget_recipe(0)


def test_budget_alone_trains_a_vocabulary_and_a_small_model(pretrain_files, tmp_path, capsys):
    _, corpus = pretrain_files
    out = tmp_path / "run"
    code = main(
        ["pretrain", "--corpus", str(corpus), "--out", str(out), "--budget", "3s",
         "--max-seq-length", "32", "--eval-examples", "8", "--no-progress"]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "budget recipe for 0.05 min" in printed
    tokenizer = Tokenizer.from_pretrained(out / "tokenizer")
    config = json.loads((out / "final" / "config.json").read_text())
    recipe = budget_recipe(3)
    assert config["vocab_size"] == tokenizer.vocab_size
    layers, hidden, _ = PRESETS[recipe.model_size]
    assert (config["num_hidden_layers"], config["hidden_size"]) == (layers, hidden) == (2, 128)
    # Pre-trained without dropout, handed over for fine-tuning with BERT's.
    assert config["hidden_dropout_prob"] == FINETUNE_DROPOUT
    assert config["attention_probs_dropout_prob"] == FINETUNE_DROPOUT
    records = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"]
    assert records and all("nsp_loss" not in r for r in records)  # MLM only
    assert records[-1]["learning_rate"] < recipe.learning_rate / 2  # one-cycle ran down


def test_explicit_dropout_is_left_as_given(pretrain_files, tmp_path) -> None:
    vocab, corpus = pretrain_files
    out = tmp_path / "run"
    code = main(
        ["pretrain", "--corpus", str(corpus), "--tokenizer", str(vocab), "--out", str(out),
         "--budget", "2s", "--max-seq-length", "32", "--dropout", "0.05",
         "--objective", "mlm+nsp", "--eval-examples", "8", "--no-progress"]
    )  # fmt: skip
    assert code == 0
    config = json.loads((out / "final" / "config.json").read_text())
    assert config["hidden_dropout_prob"] == 0.05
    assert not (out / "tokenizer").exists()  # the given tokenizer is used
    records = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"]
    assert "nsp_loss" in records[-1]


def test_budget_excludes_other_budgets_and_a_tokenizer_is_needed_without_it(
    pretrain_files, tmp_path, capsys
) -> None:
    _, corpus = pretrain_files
    with pytest.raises(SystemExit):
        build_parser().parse_args(
            [
                "pretrain",
                "--corpus",
                str(corpus),
                "--out",
                "o",
                "--budget",
                "1m",
                "--max-time",
                "1m",
            ]
        )
    out = tmp_path / "run"
    code = main(["pretrain", "--corpus", str(corpus), "--out", str(out), "--max-steps", "1"])
    assert code == 1
    assert "give a tokenizer" in capsys.readouterr().err
    assert not (out / "final").exists()
