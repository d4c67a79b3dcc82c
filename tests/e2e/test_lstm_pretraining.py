"""`bertlab pretrain --architecture nnlm|elmo|awd-lstm`: the LSTM era's networks pre-trained
through the same run and loop as BERT (`training.pretraining.networks`, `lm_objectives`): their
own objective, the held-out perplexity every left-to-right model reports on the same text, the
budget recipe, the model card, the dropouts written for fine-tuning, and one-line refusals.
Checkpoints, kills and resumes under torchrun: tests/e2e/test_distributed_pretraining.py."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
import torch

from bertlab.cli import main
from bertlab.core.lstm_config import lm_preset
from bertlab.network.lm_architectures import lm_architecture
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.metrics_log import read_metrics
from bertlab.training.pretraining.run import PretrainRun
from bertlab.training.pretraining.runner import run_pretraining

pytestmark = pytest.mark.usefixtures("one_thread")

ARCHITECTURES = ("nnlm", "elmo", "awd-lstm")
ZH_MODEL = Path(__file__).resolve().parents[2] / "bertlab" / "models" / "mini-reviews-zh"
ZH_CORPUS = ZH_MODEL.parents[1] / "demo_data" / "chnsenticorp_unlabeled.txt.gz"


def _run(pretrain_files, out: Path, **settings) -> PretrainRun:
    vocab, corpus = pretrain_files
    values = {
        "corpus": (corpus,),
        "out": out,
        "tokenizer": vocab,
        "model_size": "tiny",
        "max_seq_length": 32,
        "batch_size": 4,
        "eval_examples": 16,
        "log_every_steps": 1,
        "max_steps": 4,
    }
    return PretrainRun(**(values | settings))


def _last_eval(out: Path) -> dict:
    return [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "eval"][-1]


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_each_network_pretrains_through_the_loop_into_a_model_it_loads(
    architecture, pretrain_files, tmp_path
):
    out = tmp_path / architecture
    result = run_pretraining(_run(pretrain_files, out, architecture=architecture), say=print)
    assert result.progress.step == 4
    config_class, model_class = lm_architecture(architecture)
    model = model_class.from_pretrained(result.final_dir)
    assert isinstance(model.config, config_class)
    assert model.config.vocab_size == Tokenizer.from_pretrained(result.final_dir).vocab_size
    evaluation = _last_eval(out)
    assert evaluation["lm_perplexity"] == pytest.approx(math.exp(evaluation["lm_loss"]))
    assert 0.0 <= evaluation["lm_accuracy"] <= 1.0
    train = [r for r in read_metrics(out / "metrics.jsonl") if r["kind"] == "train"]
    assert train[-1]["lm_loss"] < train[0]["lm_loss"]  # it learns something in 4 steps
    card = (result.final_dir / "README.md").read_text(encoding="utf-8")
    assert f"| architecture | {architecture} |" in card
    assert "held-out lm_perplexity" in card


def test_elmo_logs_its_backward_language_model_beside_the_forward_one(pretrain_files, tmp_path):
    out = tmp_path / "elmo"
    run_pretraining(_run(pretrain_files, out, architecture="elmo"), say=print)
    evaluation = _last_eval(out)
    both = evaluation["lm_loss"] + evaluation["backward_lm_loss"]
    assert evaluation["loss"] == pytest.approx(both)  # the biLM's joint objective, Sec. 3.1
    assert 0.0 <= evaluation["backward_lm_accuracy"] <= 1.0


def test_left_to_right_models_are_scored_on_the_same_held_out_text(pretrain_files, tmp_path):
    """An LSTM-era network and a left-to-right BERT on one corpus: the same held-out targets
    (the same unigram level, which is measured on them), so their perplexities compare."""
    levels = {}
    for name, settings in (
        ("bert-clm", {"objective": "clm", "pack_sequences": True}),
        ("nnlm", {"architecture": "nnlm", "pack_sequences": True}),
        ("awd-lstm", {"architecture": "awd-lstm", "pack_sequences": True}),
    ):
        out = tmp_path / name
        run_pretraining(_run(pretrain_files, out, **settings), say=print)
        levels[name] = _last_eval(out)["lm_unigram_accuracy"]
    assert len(set(levels.values())) == 1, levels


def test_a_budget_trains_without_dropout_and_writes_the_papers_dropouts_for_fine_tuning(
    pretrain_files, tmp_path
):
    run = _run(pretrain_files, tmp_path / "awd", architecture="awd-lstm", max_steps=None, budget=2)
    assert run.resolved.dropout == 0.0  # the budget recipe pre-trains without dropout
    assert run.resolved.description.startswith("AWD-LSTM (tiny), ")
    said: list[str] = []
    result = run_pretraining(run, say=said.append)
    written = json.loads((result.final_dir / "config.json").read_text())
    preset = lm_preset("awd-lstm", "tiny").to_dict()
    for name in ("output_dropout_prob", "weight_dropout_prob", "embedding_dropout_prob"):
        assert written[name] == preset[name] > 0
    (restored,) = [line for line in said if "for fine-tuning" in line]
    for name in ("output_dropout_prob", "weight_dropout_prob", "embedding_dropout_prob"):
        assert f"{name} {preset[name]:g}" in restored
    assert result.progress.elapsed >= 2.0
    nnlm = _run(pretrain_files, tmp_path / "nnlm", architecture="nnlm", max_steps=None, budget=1)
    said = []
    run_pretraining(nnlm, say=said.append)
    assert not any("for fine-tuning" in line for line in said)  # NNLM has no dropout


def test_elmo_with_its_character_cnn_trains_on_chinese_pieces(tmp_path):
    corpus = tmp_path / "zh.txt"
    with gzip.open(ZH_CORPUS, "rt", encoding="utf-8") as reader:
        corpus.write_text("".join(next(reader) for _ in range(400)), encoding="utf-8")
    out = tmp_path / "elmo-zh"
    run = PretrainRun(
        corpus=(corpus,),
        out=out,
        tokenizer=ZH_MODEL,
        architecture="elmo",
        model_size="tiny",
        use_char_cnn=True,
        lang="zh",
        max_seq_length=32,
        batch_size=4,
        eval_examples=8,
        max_steps=2,
    )
    result = run_pretraining(run, say=print)
    model = lm_architecture("elmo")[1].from_pretrained(result.final_dir)
    assert model.config.use_char_cnn
    assert "好" in model.config.characters  # a character of the vocabulary, not a byte id
    ids = torch.tensor([[5, 6, 7]])
    assert model(ids, labels=ids).loss.isfinite()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--architecture", "elmo", "--objective", "mlm"], "--objective mlm trains a BERT"),
        (["--architecture", "elmo", "--model-size", "mini"], "unknown model size 'mini' for"),
        (["--architecture", "awd-lstm", "--char-cnn"], "use_char_cnn apply to objective elmo"),
        (["--architecture", "nnlm", "--position-init", "normal"], "nnlm has none"),
    ],
)
def test_settings_that_do_not_apply_to_a_network_are_refused_in_one_line(
    flags, message, pretrain_files, tmp_path, capsys
):
    vocab, corpus = pretrain_files
    argv = ["pretrain", "--corpus", str(corpus), "--tokenizer", str(vocab), "--max-steps", "1"]
    code = main([*argv, "--out", str(tmp_path / "out"), *flags])
    error = capsys.readouterr().err.strip()
    assert code != 0
    assert message in error and "Traceback" not in error
    assert len(error.splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_continuing_a_model_of_another_network_is_refused(pretrain_files, tmp_path):
    first = run_pretraining(_run(pretrain_files, tmp_path / "awd", architecture="awd-lstm"))
    with pytest.raises(ValueError, match="is a awd-lstm model, not elmo"):
        run_pretraining(
            _run(
                pretrain_files,
                tmp_path / "elmo",
                architecture="elmo",
                model_size=None,
                init_from=first.final_dir,
                tokenizer=None,
            )
        )
