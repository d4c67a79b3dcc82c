"""A fine-tuning that learned one class is said: the check, the warning, result.json, reports."""

from __future__ import annotations

import json
import logging

import pytest

from bertlab.apps.experiments.transfer_report import results_table
from bertlab.apps.flows import ONE_CLASS, one_class_runs, seed_dir
from bertlab.core.finetune_config import FinetuneConfig
from bertlab.data.tasks.classification import ColumnSpec, Example
from bertlab.data.tasks.ner import TaggedSentence
from bertlab.task_families import make_task
from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS
from bertlab.training.finetuning.finetune import (
    ModelSource,
    TaskData,
    finetune_task,
    summarize_seeds,
)
from bertlab.training.finetuning.loop import FinetuneResult
from bertlab.training.finetuning.one_class import OneClassCollapse, one_class_collapse

WORDS = "good great fine bad awful poor movie film the a was is".split()
WARNING = (
    "seed 42: every dev prediction is 'pos' (75.0% of the dev set): the model learned only one "
    "class; likely causes: a learning rate too high or too low (try 2e-5 .. 1e-4), a pre-trained "
    "model still on the unigram plateau (see its held-out MLM accuracy), too few steps"
)


pytestmark = pytest.mark.usefixtures("one_thread")


def test_predictions_of_one_class_are_a_collapse_with_that_class_share_of_the_dev_set():
    collapse = one_class_collapse(["pos"] * 4, ["pos", "neg", "pos", "pos"])
    assert collapse == OneClassCollapse("pos", 0.75)
    assert collapse.warning(42) == WARNING
    assert OneClassCollapse.from_json(collapse.to_json()) == collapse
    assert OneClassCollapse.from_json(None) is None


def test_mixed_predictions_or_a_dev_set_of_one_class_are_no_collapse():
    assert one_class_collapse(["pos", "neg", "pos"], ["pos", "neg", "neg"]) is None
    assert one_class_collapse(["pos", "pos"], ["pos", "pos"]) is None  # right, not collapsed


def test_classification_checks_examples_tagging_words_and_regression_nothing():
    classification = make_task("classification", ColumnSpec(text_a="text", label="label"))
    examples = [Example("a", label="pos"), Example("b", label="neg")]
    assert classification.classes(["pos", "pos"], examples) == (["pos", "pos"], ["pos", "neg"])
    sentences = [TaggedSentence(("Ann", "ran"), ("B-PER", "O")), TaggedSentence(("x",), ("O",))]
    classes = make_task("conll2003").classes([["O", "O"], ["O"]], sentences)
    assert one_class_collapse(*classes) == OneClassCollapse("O", 2 / 3)
    assert make_task("stsb").classes([0.5], [Example("a", label=0.5)]) is None


def _finetune(tmp_path, train, dev, num_train_epochs, learning_rate):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join([*SPECIAL_TOKENS, *WORDS]) + "\n")
    task = make_task("classification", ColumnSpec(text_a="text", label="label"))
    data = TaskData(train, dev, task.label_names(train))
    config = FinetuneConfig(
        batch_size=8, num_train_epochs=num_train_epochs, learning_rate=learning_rate, seed=42
    )
    source = ModelSource(model_size="tiny", tokenizer=vocab)
    return finetune_task(task, data, source, config, tmp_path / "run", show_progress=False)


def test_a_fine_tuning_that_predicts_one_class_warns_and_records_it(tmp_path, caplog):
    # Every text is the same: the model can only learn the training set's majority, "pos".
    text = "the movie was good"
    train = [Example(text, label="pos")] * 16 + [Example(text, label="neg")] * 8
    dev = [Example(text, label=label) for label in ("pos", "neg", "pos", "pos")]
    with caplog.at_level(logging.WARNING, logger="bertlab.training.finetuning.finetune"):
        result = _finetune(tmp_path, train, dev, num_train_epochs=4, learning_rate=1e-3)
    assert result.one_class == OneClassCollapse("pos", 0.75)
    assert [record.getMessage() for record in caplog.records] == [WARNING]
    recorded = json.loads((tmp_path / "run" / "result.json").read_text())
    assert recorded["one_class"] == {"label": "pos", "share": 0.75}
    assert "every dev prediction is 'pos'" in (tmp_path / "run" / "best" / "README.md").read_text()


def test_a_fine_tuning_that_learns_the_task_says_nothing(tmp_path, caplog):
    train = [
        Example(f"the movie was {word}", label="pos" if word in WORDS[:3] else "neg")
        for word in WORDS[:6]
    ] * 4
    with caplog.at_level(logging.WARNING, logger="bertlab.training.finetuning.finetune"):
        result = _finetune(tmp_path, train, train[:6], num_train_epochs=6, learning_rate=3e-3)
    assert result.best_metrics["accuracy"] == 1.0
    assert result.one_class is None and not caplog.records
    assert json.loads((tmp_path / "run" / "result.json").read_text())["one_class"] is None


def test_the_seeds_summary_names_the_seeds_that_predicted_one_class():
    results = [
        FinetuneResult(1, 1, {"accuracy": 0.564}, 1, False, None, one_class=OneClassCollapse(
            "positive", 0.564)),
        FinetuneResult(2, 1, {"accuracy": 0.8}, 1, False, None),
    ]  # fmt: skip
    summary = summarize_seeds(results, "accuracy")
    assert summary["one_class"] == [{"seed": 1, "label": "positive", "share": 0.564}]
    assert summary["runs"][1]["one_class"] is None


def test_an_experiment_report_marks_the_cell_and_names_the_seeds(tmp_path):
    root = tmp_path / "finetune"
    for seed, one_class in ((1, None), (2, {"label": "positive", "share": 0.564})):
        run = seed_dir(root / "sst2", "scratch", seed)
        run.mkdir(parents=True)
        (run / "result.json").write_text(json.dumps({"seed": seed, "one_class": one_class}))
    scores = {"sst2": {"scratch": [0.81, 0.564], "general": [0.85, 0.86]}}
    results = {
        "config": {"points": ["scratch", "general"], "point_minutes": None, "seeds": [1, 2]},
        "scores": scores,
        "metrics": {"sst2": "accuracy"},
        ONE_CLASS: one_class_runs(root, scores, [1, 2]),
    }
    assert results[ONE_CLASS]["sst2"] == {
        "scratch": [{"seed": 2, "label": "positive", "share": 0.564}],
        "general": [],
    }
    table = results_table(results)
    assert "| 0.687 (0.564–0.810), 1 one class | 0.855 (0.850–0.860) |" in table[2]
    assert table[-1].startswith(
        'Seeds that predicted one class (marked "one class"): sst2 scratch seed 2: every dev '
        "prediction is 'positive' (56.4% of the dev set). Those fine-tunings learned only one "
        "class; likely causes: a learning rate too high or too low"
    )
    del results[ONE_CLASS]  # results.json written before the check
    assert "one class" not in "\n".join(results_table(results))
