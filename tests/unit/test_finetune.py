"""The fine-tuning loop: freezing, accumulation, best checkpoint, early stopping, seeds, splits."""

from __future__ import annotations

import json
import random

import pytest
import torch

from bertlab.core.finetune_config import FinetuneConfig, TaskDataConfig
from bertlab.data.tasks.classification import ColumnSpec, Example
from bertlab.data.tasks.splits import holdout_split
from bertlab.data.tasks.squad import Answer, SquadExample
from bertlab.network.heads import BertForSequenceClassification
from bertlab.task_families import make_task
from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS, Tokenizer
from bertlab.training.finetuning.finetune import (
    ModelSource,
    TaskData,
    finetune_task,
    read_task_data,
    summarize_seeds,
)
from bertlab.training.finetuning.loop import (
    FinetuneLoop,
    FinetuneResult,
    apply_freezing,
    train_task_model,
)
from bertlab.training.metrics_log import MetricsLog, read_metrics

WORDS = "good great fine bad awful poor movie film the a was is".split()


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture
def model(tiny_config):
    return BertForSequenceClassification(tiny_config, id2label={0: "neg", 1: "pos"})


def toy_features(num: int, seed: int = 0) -> list[dict]:
    """[CLS] word word [SEP]: label 1 when the first word id is even (a learnable rule)."""
    rng = random.Random(seed)
    features = []
    for _ in range(num):
        first = rng.randrange(10, 60)
        ids = [2, first, *(rng.randrange(10, 60) for _ in range(rng.randrange(1, 6))), 3]
        features.append({"input_ids": ids, "token_type_ids": [0] * len(ids), "labels": first % 2})
    return features


def test_freeze_encoder_leaves_only_the_classifier(model):
    trainable = apply_freezing(model, FinetuneConfig(do_freeze_encoder=True))
    names = [name for name, param in model.named_parameters() if param.requires_grad]
    assert names == ["classifier.weight", "classifier.bias"]
    assert trainable == model.classifier.weight.numel() + model.classifier.bias.numel()


def test_freeze_layers_freezes_embeddings_and_the_first_k_layers(model):
    apply_freezing(model, FinetuneConfig(freeze_layers=1))
    frozen = {name.split(".")[1:4] and ".".join(name.split(".")[:4]) for name, param in
              model.named_parameters() if not param.requires_grad}  # fmt: skip
    assert all(name.startswith(("bert.embeddings", "bert.encoder.layer.0")) for name in frozen)
    assert any(name.startswith("bert.encoder.layer.0") for name in frozen)
    assert all(param.requires_grad for param in model.bert.encoder.layer[1].parameters())
    with pytest.raises(ValueError, match="exceeds the model's 2 layers"):
        apply_freezing(model, FinetuneConfig(freeze_layers=3))


def test_frozen_parameters_do_not_change_in_training(model, tmp_path):
    config = FinetuneConfig(freeze_layers=1, batch_size=4, num_train_epochs=1, learning_rate=1e-2)
    apply_freezing(model, config)
    before = {name: param.clone() for name, param in model.named_parameters()}
    FinetuneLoop(model, toy_features(8), config, MetricsLog(tmp_path / "m.jsonl"), False).run_epoch(
        1
    )
    for name, param in model.named_parameters():
        changed = not torch.equal(before[name], param)
        assert changed == param.requires_grad, name


def test_gradient_accumulation_equals_one_large_batch(tiny_config, tmp_path):
    config = tiny_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    features = [dict(f, input_ids=f["input_ids"][:3] + [3]) for f in toy_features(4)]
    features = [dict(f, token_type_ids=[0] * 4) for f in features]  # equal lengths
    weights = []
    for accumulation in (1, 2):
        torch.manual_seed(0)
        model = BertForSequenceClassification(config, num_labels=2)
        run = FinetuneConfig(
            batch_size=4,
            gradient_accumulation_steps=accumulation,
            num_train_epochs=1,
            warmup_proportion=0.0,
            learning_rate=1e-3,
        )
        loop = FinetuneLoop(
            model, features, run, MetricsLog(tmp_path / f"{accumulation}.jsonl"), False
        )
        loop.run_epoch(1)
        assert loop.step == 1
        weights.append(model.classifier.weight.detach().clone())
    torch.testing.assert_close(weights[0], weights[1], rtol=0, atol=1e-6)


def test_toy_task_beats_chance_and_keeps_the_best_epoch(model, tmp_path):
    config = FinetuneConfig(batch_size=16, num_train_epochs=6, learning_rate=2e-3, seed=1)
    dev = toy_features(64, seed=5)

    def evaluate(model):
        model.eval()
        correct = 0
        with torch.no_grad():
            for feature in dev:
                logits = model(torch.tensor([feature["input_ids"]])).logits
                correct += int(logits.argmax(-1)) == feature["labels"]
        return {"accuracy": correct / len(dev)}

    saved = []
    result = train_task_model(
        model, toy_features(384), config, tmp_path, evaluate, "accuracy",
        lambda directory, model: saved.append(evaluate(model)["accuracy"]), show_progress=False,
    )  # fmt: skip
    assert result.best_metrics["accuracy"] > 0.8  # chance is 0.5
    assert saved[-1] == result.best_metrics["accuracy"] == max(saved)
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["epoch"] for r in records if r["kind"] == "eval"] == list(range(1, 7))
    assert (tmp_path / "curves.png").is_file()


def test_early_stopping_after_patience_epochs(model, tmp_path):
    scores = iter([0.6, 0.7, 0.65, 0.68, 0.9])
    config = FinetuneConfig(batch_size=4, num_train_epochs=5, early_stopping_patience=2)
    result = train_task_model(
        model, toy_features(8), config, tmp_path, lambda model: {"accuracy": next(scores)},
        "accuracy", lambda directory, model: None, show_progress=False,
    )  # fmt: skip
    assert (result.best_epoch, result.epochs_run, result.stopped_early) == (2, 4, True)
    assert result.best_metrics == {"accuracy": 0.7}


def test_summarize_seeds_mean_median_std():
    results = [
        FinetuneResult(seed, 1, {"accuracy": value}, 1, False, None)
        for seed, value in ((1, 0.80), (2, 0.90), (3, 0.85))
    ]
    summary = summarize_seeds(results, "accuracy")
    stats = summary["dev"]["accuracy"]
    assert stats["mean"] == pytest.approx(0.85) and stats["median"] == pytest.approx(0.85)
    assert stats["std"] == pytest.approx(0.05)
    assert summary["seeds"] == [1, 2, 3]


def test_holdout_split_keeps_a_squad_article_on_one_side():
    def question(index, title):
        return SquadExample(str(index), "q?", title + " text", (Answer("text", 0),), title=title)

    examples = [question(index, f"article{index % 5}") for index in range(40)]
    train, dev = holdout_split(examples, 0.2, make_task("squad").holdout_group)
    assert len(train) + len(dev) == 40 and len(dev) == 8
    assert not {e.title for e in train} & {e.title for e in dev}


def test_held_out_dev_labels_are_learned_from_the_whole_training_file(tmp_path):
    path = tmp_path / "train.bmes"
    sentences = ["高 B-NAME\n勇 E-NAME\n"] * 9 + ["张 S-ORG\n"]
    path.write_text("\n".join(sentences))
    data = read_task_data(make_task("tagging"), path, None, dev_fraction=0.5)
    assert "S-ORG" in data.label_names
    assert len(data.train) + len(data.dev) == 10


def test_configs_reject_bad_values():
    with pytest.raises(ValueError, match="not divisible"):
        FinetuneConfig(batch_size=32, gradient_accumulation_steps=3)
    with pytest.raises(ValueError, match="not both"):
        FinetuneConfig(do_freeze_encoder=True, freeze_layers=1)
    with pytest.raises(ValueError, match="max_seq_length"):
        TaskDataConfig(max_seq_length=2)
    assert FinetuneConfig(batch_size=32, gradient_accumulation_steps=4).micro_batch_size == 8


def test_finetune_task_from_scratch_writes_a_loadable_best_model(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join([*SPECIAL_TOKENS, *WORDS]) + "\n")
    task = make_task("classification", ColumnSpec(text_a="text", label="label"))
    train = [Example(f"the movie was {w}", label="pos" if w in WORDS[:3] else "neg")
             for w in WORDS[:6]] * 4  # fmt: skip
    data = TaskData(train, train[:6], task.label_names(train))
    config = FinetuneConfig(batch_size=8, num_train_epochs=2, learning_rate=1e-3)
    result = finetune_task(task, data, ModelSource(model_size="tiny", tokenizer=vocab), config,
                           tmp_path / "run", show_progress=False)  # fmt: skip
    best = tmp_path / "run" / "best"
    loaded = BertForSequenceClassification.from_pretrained(best)
    assert loaded.id2label == {0: "neg", 1: "pos"}
    assert Tokenizer.from_pretrained(best).vocab_size == len(SPECIAL_TOKENS) + len(WORDS)
    assert json.loads((best / "bertlab_task.json").read_text())["columns"]["text_a"] == "text"
    assert json.loads((tmp_path / "run" / "result.json").read_text())["dev"] == result.best_metrics
