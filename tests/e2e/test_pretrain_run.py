"""Pre-training as a library call: `run_pretraining(PretrainRun(...))` is what the CLI runs."""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file
from torch.optim.optimizer import register_optimizer_step_pre_hook

from bertlab import PretrainRun, run_pretraining
from bertlab.cli import build_parser, main
from bertlab.core.config import (
    PRETRAIN_SCHEDULES,
    BertConfig,
    PretrainConfig,
    PretrainDataConfig,
)


def _pretrain_parser() -> argparse.ArgumentParser:
    subparsers = next(
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    return subparsers.choices["pretrain"]


def test_every_pretrain_flag_is_a_field_of_the_run_and_back() -> None:
    # --threads is the process's (set once by cli.main for every command), not the run's.
    process_flags = {"help", "no_progress", "threads"}
    flags = {action.dest for action in _pretrain_parser()._actions} - process_flags
    fields = {field.name for field in dataclasses.fields(PretrainRun)}
    assert flags == fields


def test_the_schedule_flag_offers_the_tables_schedules(tmp_path, capsys) -> None:
    """`--schedule` takes the names of `PRETRAIN_SCHEDULES` and its help says what each does;
    a name outside the table is refused by the parser, and by `PretrainRun` from Python."""
    parser = _pretrain_parser()
    base = ["--corpus", "c.txt", "--out", str(tmp_path), "--max-steps", "3"]
    for name in PRETRAIN_SCHEDULES:
        assert parser.parse_args([*base, "--schedule", name]).schedule == name
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--schedule", "cosine"])
    assert "invalid choice: 'cosine'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    usage = " ".join(capsys.readouterr().out.split())
    for name, shape in PRETRAIN_SCHEDULES.items():
        assert f"{name}: {shape}" in usage
    with pytest.raises(ValueError, match="unknown schedule 'cosine'"):
        PretrainRun(
            corpus=["c.txt"], out=tmp_path, max_steps=3, tokenizer="v.txt", schedule="cosine"
        )


def test_the_recipe_line_says_masking_only_for_the_masked_objectives(tmp_path) -> None:
    def line(objective: str) -> str:
        run = PretrainRun(corpus=["c.txt"], out=tmp_path, budget=600, objective=objective)
        return run.resolved.description

    assert "mlm at 40% masking" in line("mlm")
    assert "clm (next-token prediction, no masking)" in line("clm")
    assert "masking" not in line("clm").replace("no masking", "")


def test_the_command_and_the_library_train_the_same_model(pretrain_files, tmp_path) -> None:
    vocab, corpus = pretrain_files
    settings = {"max_steps": 3, "model_size": "tiny", "max_seq_length": 32, "eval_examples": 8}
    argv = ["pretrain", "--corpus", str(corpus), "--tokenizer", str(vocab), "--no-progress"]
    argv += ["--max-steps", "3", "--model-size", "tiny", "--max-seq-length", "32"]
    assert main([*argv, "--eval-examples", "8", "--out", str(tmp_path / "cli")]) == 0
    lines: list[str] = []
    run = PretrainRun(corpus=[corpus], out=tmp_path / "api", tokenizer=vocab, **settings)
    result = run_pretraining(run, show_progress=False, say=lines.append)
    assert result.final_dir == tmp_path / "api" / "final"
    assert result.progress.step == 3
    assert any(line.startswith("model: ") for line in lines)
    by_cli = load_file(tmp_path / "cli" / "final" / "model.safetensors")
    by_api = load_file(result.final_dir / "model.safetensors")
    assert by_cli.keys() == by_api.keys()
    assert all(torch.equal(by_cli[key], by_api[key]) for key in by_cli)


@pytest.mark.parametrize(
    "how",
    [("--max-steps", "3", "--model-size", "tiny"), ("--budget", "2s")],
    ids=["steps", "budget"],
)
def test_the_run_is_resolved_once_from_the_command_to_the_first_step(
    pretrain_files, tmp_path, monkeypatch, how
) -> None:
    """`bertlab pretrain` builds the run's data and loop configs once on its way to the first
    step, and a resume once more (its own command): a budget's plan on the CPU is the recipe
    already resolved."""
    built = {PretrainDataConfig: 0, PretrainConfig: 0}
    at_first_step: list[dict] = []
    for config in built:
        checks = config.__post_init__

        def counted(self, checks=checks) -> None:
            built[type(self)] += 1
            checks(self)

        monkeypatch.setattr(config, "__post_init__", counted)

    def first_step(optimizer, args, kwargs) -> None:
        if not at_first_step:
            at_first_step.append(dict(built))

    vocab, corpus = pretrain_files
    argv = ["pretrain", "--corpus", str(corpus), "--tokenizer", str(vocab), "--no-progress"]
    argv += [*how, "--max-seq-length", "32", "--eval-examples", "8", "--checkpoint-every", "1"]
    argv += ["--out", str(tmp_path)]
    hook = register_optimizer_step_pre_hook(first_step)
    try:
        assert main(argv) == 0
        assert at_first_step == [{PretrainDataConfig: 1, PretrainConfig: 1}]
        assert built == {PretrainDataConfig: 1, PretrainConfig: 1}  # nor after it
        # the run as if killed before its last step: its last checkpoint and final/ gone
        shutil.rmtree(sorted((tmp_path / "checkpoints").glob("step-*"))[-1])
        shutil.rmtree(tmp_path / "final")
        at_first_step.clear()
        assert main([*argv, "--resume"]) == 0  # a budget's plan read from OUT
    finally:
        hook.remove()
    assert built == {PretrainDataConfig: 2, PretrainConfig: 2}
    if how[0] == "--max-steps":
        assert at_first_step == [{PretrainDataConfig: 2, PretrainConfig: 2}]


def test_a_model_config_object_and_the_dropout_handed_to_fine_tuning(pretrain_files, tmp_path):
    vocab, corpus = pretrain_files
    config = BertConfig.from_preset("tiny", vocab_size=126, pad_token_id=0).replace(
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, max_position_embeddings=64
    )
    run = PretrainRun(
        corpus=[corpus],
        out=tmp_path / "run",
        tokenizer=vocab,
        model_config=config,
        finetune_dropout=0.1,
        max_steps=2,
        max_seq_length=32,
        eval_examples=8,
    )
    result = run_pretraining(run, show_progress=False, say=lambda line: None)
    final = BertConfig.from_json_file(result.final_dir / "config.json")
    assert final.max_position_embeddings == 64  # the architecture as given
    assert final.hidden_dropout_prob == final.attention_probs_dropout_prob == 0.1


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"corpus": []}, "at least one corpus file"),
        ({"max_steps": 5}, "exactly one of budget, max_steps and max_time"),
        ({"budget": None}, "exactly one of budget, max_steps and max_time"),
        ({"budget": None, "max_steps": 5, "tokenizer": None}, "give a tokenizer"),
        ({"mlm_probability": 1.5}, "mlm_probability must be in (0, 1)"),
        ({"objective": "skip-gram"}, "unknown objective 'skip-gram'"),
        ({"model_size": "huge"}, "unknown model size 'huge'"),
        ({"learning_rate": 0.0}, "learning_rate > 0"),
        ({"objective": "mlm+nsp", "pack_sequences": True}, "pack_sequences needs objective"),
        ({"lang": "fr"}, "unknown lang 'fr'"),
        ({"dropout": 1.0}, "dropout must be in [0, 1)"),
        ({"batch_size": 30, "gradient_accumulation_steps": 4}, "not divisible"),
        ({"budget": 3.6e12}, "the budget must be at most a year (8,760 h), got 1e+09 h"),
        ({"budget": math.inf}, "the budget must be at most a year (8,760 h), got inf h"),
        ({"budget": None, "max_time": 366 * 86400.0}, "max_time must be at most a year"),
    ],
)
def test_bad_settings_are_refused_before_anything_is_written(tmp_path, settings, message) -> None:
    values = {"corpus": ["corpus.txt"], "out": tmp_path / "run", "budget": 60.0}
    values["tokenizer"] = "vocab.txt"
    with pytest.raises(ValueError, match=re.escape(message)):
        PretrainRun(**(values | settings))
    assert not (tmp_path / "run").exists()


def test_timed_checkpoints_fall_right_after_each_mark_of_training_time(
    pretrain_files, tmp_path, monkeypatch
) -> None:
    # A training clock that reads 1 s later at each call: each step measures 1 s of training.
    import types

    from bertlab.training.pretraining import loop as pretrain_loop
    from bertlab.training.pretraining.checkpointing import list_checkpoints, load_state

    ticks = iter(range(10**6))
    monkeypatch.setattr(
        pretrain_loop, "time", types.SimpleNamespace(perf_counter=lambda: next(ticks))
    )
    vocab, corpus = pretrain_files
    run = PretrainRun(
        corpus=[corpus], out=tmp_path / "run", tokenizer=vocab, model_size="tiny",
        max_seq_length=32, eval_examples=8, max_steps=11, checkpoint_every_minutes=0.05,
        keep_checkpoints=0,
    )  # fmt: skip
    run_pretraining(run, show_progress=False, say=lambda _: None)
    elapsed = [load_state(c)["progress"]["elapsed"] for c in list_checkpoints(tmp_path / "run")]
    # Marks every 3 s of training: after steps 3, 6 and 9, then the final checkpoint (step 11).
    assert elapsed == [3.0, 6.0, 9.0, 11.0]
    assert pretrain_loop.passed_a_mark(2.9, 3.0, 3.0) and not pretrain_loop.passed_a_mark(
        3.0, 5.9, 3.0
    )


def _eval_records(out) -> list[dict]:
    from bertlab.training.metrics_log import read_metrics

    return [record for record in read_metrics(out / "metrics.jsonl") if record["kind"] == "eval"]


NO_HELD_OUT = (
    "the corpus has 4 documents, fewer than the 6 needed to hold some out for evaluation: "
    "--eval-every evaluates nothing and the unigram plateau goes unchecked; give at least 6 "
    "documents (a blank line between two)"
)


def test_a_corpus_too_small_to_hold_documents_out_says_there_is_no_evaluation(
    pretrain_files, tmp_path, capsys, caplog
) -> None:
    """Fewer than 6 documents: no held-out split, so --eval-every evaluated nothing and the
    plateau guard never ran, without a word."""
    vocab, corpus = pretrain_files
    small = tmp_path / "small.txt"
    documents = corpus.read_text(encoding="utf-8").split("\n\n")
    small.write_text("\n\n".join(documents[:4]), encoding="utf-8")
    argv = ["pretrain", "--corpus", str(small), "--tokenizer", str(vocab), "--no-progress"]
    argv += ["--max-steps", "2", "--model-size", "tiny", "--max-seq-length", "32"]
    argv += ["--objective", "mlm", "--eval-every", "1", "--num-workers", "0"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line for line in printed if line.startswith("warning: the corpus")] == [
        f"warning: {NO_HELD_OUT}"
    ]
    assert _eval_records(tmp_path / "run") == []
    assert main([*argv, "--eval-examples", "0", "--out", str(tmp_path / "none-asked")]) == 0
    assert "warning: the corpus" not in capsys.readouterr().out
    run = PretrainRun(
        corpus=[small], out=tmp_path / "api", tokenizer=vocab, model_size="tiny", max_steps=1,
        max_seq_length=32, objective="mlm", num_workers=0,
    )  # fmt: skip
    run_pretraining(run, show_progress=False)  # the default `say`: a logged warning
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [NO_HELD_OUT]


def test_a_run_that_cannot_learn_ends_with_a_unigram_plateau_warning(
    pretrain_files, tmp_path, capsys
) -> None:
    vocab, corpus = pretrain_files
    out = tmp_path / "run"
    argv = ["pretrain", "--corpus", str(corpus), "--tokenizer", str(vocab), "--no-progress"]
    argv += ["--max-steps", "3", "--model-size", "tiny", "--max-seq-length", "32"]
    argv += ["--eval-examples", "16", "--eval-every", "2", "--num-workers", "0"]
    argv += ["--learning-rate", "1e-9", "--plateau-min-tokens", "0", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    summary = next(line for line in printed if line.startswith("held-out: "))
    assert "— still on the unigram plateau (accuracy " in summary
    warning = next(line for line in printed if line.startswith("warning: still on the unigram"))
    for advice in ("--learning-rate", "1e-4 to 2e-4", "more tokens", "--mlm-probability 0.4"):
        assert advice in warning
    assert "--position-init sinusoidal" in warning
    evals = _eval_records(out)
    assert [record["step"] for record in evals] == [2, 3]
    level = evals[-1]["mlm_unigram_accuracy"]
    assert all(record["mlm_unigram_accuracy"] == level for record in evals)  # measured once
    assert 0 < level < 1 and evals[-1]["mlm_accuracy"] < level
    assert evals[-1]["on_plateau"] is True
    card = (out / "final" / "README.md").read_text(encoding="utf-8")
    assert "| still on the unigram plateau | True |" in card
    assert "**Warning: this model is still on the unigram plateau**" in card
    assert "| held-out mlm_unigram_accuracy |" in card


def test_a_run_below_the_minimum_tokens_is_not_judged(pretrain_files, tmp_path) -> None:
    vocab, corpus = pretrain_files
    lines: list[str] = []
    run = PretrainRun(
        corpus=[corpus], out=tmp_path / "run", tokenizer=vocab, model_size="tiny",
        max_seq_length=32, eval_examples=16, num_workers=0, max_steps=2, learning_rate=1e-9,
    )  # fmt: skip
    result = run_pretraining(run, show_progress=False, say=lines.append)
    assert result.progress.tokens < run.resolved.loop.plateau_min_tokens  # 5M by default
    assert not any("unigram plateau" in line for line in lines)
    assert _eval_records(tmp_path / "run")[-1]["on_plateau"] is False


def test_a_run_that_leaves_the_unigram_plateau_is_not_warned(
    repetitive_pretrain_files, tmp_path
) -> None:
    from bertlab.training.pretraining.stats import PLATEAU_MARGIN

    vocab, corpus = repetitive_pretrain_files
    config = BertConfig.from_preset("tiny", vocab_size=126, pad_token_id=0).replace(
        hidden_size=32, num_attention_heads=4, intermediate_size=64, max_position_embeddings=64
    )
    lines: list[str] = []
    run = PretrainRun(
        corpus=[corpus], out=tmp_path / "run", tokenizer=vocab, model_config=config,
        objective="mlm", mlm_probability=0.4, max_seq_length=32, batch_size=16,
        learning_rate=1e-2, max_steps=60, eval_examples=64, num_workers=0, plateau_min_tokens=0,
    )  # fmt: skip
    result = run_pretraining(run, show_progress=False, say=lines.append)
    accuracy = result.last_eval["mlm_accuracy"]
    level = result.last_eval["mlm_unigram_accuracy"]
    assert accuracy > level + PLATEAU_MARGIN + 0.2  # clearly off the plateau, not by a hair
    assert not any("unigram plateau" in line for line in lines)
    assert _eval_records(tmp_path / "run")[-1]["on_plateau"] is False
    card = (result.final_dir / "README.md").read_text(encoding="utf-8")
    assert "| still on the unigram plateau | False |" in card
    assert "Warning" not in card
