"""The task registry is the one declaration of a task; the CLI, experiments and docs read it.

`test_a_new_task_is_one_declaration_plus_its_reader` is the walkthrough of CONTRIBUTING.md as a
test: a task with a file format of its own is declared once, and `bertlab finetune`,
`evaluate` and `score` and the transfer experiment's splits take it by name.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

import bertlab
from bertlab.apps.experiments.grid import GridTask
from bertlab.apps.experiments.transfer_data import task_splits
from bertlab.apps.experiments.transfer_rows import ROWS
from bertlab.cli import build_parser, main, task_configs
from bertlab.core.finetune_config import TaskDataConfig
from bertlab.data.tasks import registry
from bertlab.data.tasks.classification import ColumnSpec, Example
from bertlab.data.tasks.files import existing_file, require_examples
from bertlab.data.tasks.registry import TASKS, TaskSpec, task_names
from bertlab.task_families import ClassificationTask, TaggingTask, make_task

DOCS = Path(__file__).resolve().parents[2] / "docs" / "finetuning.md"


def test_the_docs_task_table_lists_every_registered_task_as_declared() -> None:
    rows = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        match = re.match(r"\| `([\w-]+)` \| ([\w-]+) \| [^|]+ \| ([^|]+) \|", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3).strip())
    assert set(rows) == set(task_names())
    for name, spec in TASKS.items():
        assert rows[name] == (spec.family, spec.description), name


def test_every_command_that_takes_a_task_takes_the_registry_names() -> None:
    parser = build_parser()
    for command in ("finetune", "evaluate", "predict", "score"):
        args = ["--train", "x", "--out", "o"] if command == "finetune" else []
        args += ["--model", "m", "--data", "d"] if command in ("evaluate", "predict") else []
        args += ["--data", "d", "--predictions", "p"] if command == "score" else []
        args += ["--output", "o"] if command == "predict" else []
        for name in task_names():
            assert parser.parse_args([command, "--task", name, *args]).task == name


def test_the_experiment_rows_are_registered_tasks_with_their_files() -> None:
    for rows in ROWS.values():
        for row in rows:
            assert row.spec is TASKS[row.task]
            assert row.path == TASKS[row.task].train_file


def test_the_shared_english_ner_sets_are_read_by_their_declarations(shared_data) -> None:
    """WNUT-17 and WikiANN are declarations only: the generic column reader reads them."""
    wnut = TASKS["wnut17"].read(shared_data / TASKS["wnut17"].train_file)
    assert len(wnut) == 3394  # PROVENANCE.md: 3,394 sentences (tab-only separator lines too)
    assert sum(tag.startswith("B-") for s in wnut for tag in s.tags) == 1975  # entities
    wikiann = TASKS["wikiann"].read(shared_data / TASKS["wikiann"].train_file)
    assert len(wikiann) == 20_000
    assert isinstance(make_task("wnut17"), TaggingTask)


# --- the walkthrough of CONTRIBUTING.md -------------------------------------------------------


def read_reviews(path: Path | str) -> list[Example]:
    """A made-up format: `+` or `-`, a space, then the review, one per line."""
    path = existing_file(path)
    examples = []
    for line_number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        sign, _, text = line.partition(" ")
        if sign not in "+-" or not text:
            raise ValueError(f"{path}:{line_number}: expected '+ text' or '- text'")
        examples.append(Example(text, label="1" if sign == "+" else "0"))
    return require_examples(examples, path)


REVIEWS = TaskSpec(
    name="reviews",
    family="classification",
    read=read_reviews,
    labels=("0", "1"),
    metrics="accuracy",
    description="made-up reviews: + or -, then the text",
    lang="en",
    train_file="reviews/train.txt",
    epochs=2,
)


def test_a_new_task_is_one_declaration_plus_its_reader(
    tmp_path, monkeypatch, capsys, task_vocab
) -> None:
    monkeypatch.setitem(registry.TASKS, "reviews", REVIEWS)
    data = tmp_path / "data" / "reviews"
    data.mkdir(parents=True)
    lines = [f"+ a good film {i}" if i % 2 else f"- a bad film {i}" for i in range(40)]
    (data / "train.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "reviews" in task_names()
    assert isinstance(make_task("reviews"), ClassificationTask)
    # bertlab finetune, evaluate, predict and score take it by name ...
    out = tmp_path / "run"
    train = data / "train.txt"
    code = main(
        ["finetune", "--task", "reviews", "--train", str(train), "--dev-fraction", "0.2",
         "--from-scratch", "--model-size", "tiny", "--tokenizer", str(task_vocab),
         "--out", str(out), "--batch-size", "4", "--no-progress"]
    )  # fmt: skip
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert result["epochs_run"] == REVIEWS.epochs  # the declaration's default
    assert json.loads((out / "best" / "bertlab_task.json").read_text())["task"] == "reviews"
    code = main(
        ["evaluate", "--task", "reviews", "--model", str(out / "best"), "--data", str(train)]
    )
    assert code == 0
    assert set(json.loads(capsys.readouterr().out.strip().splitlines()[-1])) == {"accuracy"}
    predictions = tmp_path / "predictions.jsonl"
    argv = ["--task", "reviews", "--model", str(out / "best"), "--data", str(train)]
    assert main(["predict", *argv, "--output", str(predictions)]) == 0
    assert main(["score", "--task", "reviews", "--data", str(train), "--predictions",
                 str(predictions)]) == 0  # fmt: skip
    # ... and so does an experiment's row, which finds the file under its data directory.
    task, split, test = task_splits(tmp_path / "data", GridTask("reviews", "reviews"))
    assert len(split.train) + len(split.dev) + len(test) == 40
    assert task.name == "reviews" and split.label_names == ("0", "1")
    # A bad line is named with its file and line, before anything is trained.
    (data / "train.txt").write_text("+ fine\n? what\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"train.txt:2: expected"):
        make_task("reviews").read_gold(data / "train.txt")


def test_a_declaration_with_an_unknown_family_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown family 'ranking'"):
        TaskSpec("x", "ranking", read_reviews, None, "accuracy", "x")


def test_named_labels_have_one_name_each_where_the_dataset_names_them() -> None:
    """Predictions, the server and its page show SST-2's "1" as positive (issue 51, item 5)."""
    assert TASKS["sst2"].label_name("1") == "positive"
    assert TASKS["cola"].label_name("0") == "unacceptable"
    assert TASKS["chnsenticorp"].label_name("0") == "negative"
    assert TASKS["mnli"].label_name("neutral") == "neutral"
    for spec in TASKS.values():
        if spec.family == "classification" and not spec.is_regression:
            assert spec.label_names is not None and len(spec.label_names) == len(spec.labels)
    generic = make_task("classification", ColumnSpec("review", label="sentiment"))
    assert generic.spec.label_name("positive") is None
    with pytest.raises(ValueError, match="1 label names"):
        TaskSpec("x", "classification", read_reviews, ("a", "b"), "accuracy", "x", ("a",))


def test_a_task_declares_its_input_length_once(monkeypatch, hub_model_folder) -> None:
    """`make_task` gives a task the input length its declaration names; the commands put their
    flags over it and a fine-tuned model's own settings replace it; `bertlab.load` gets it too."""
    monkeypatch.setitem(registry.TASKS, "reviews", dataclasses.replace(REVIEWS, max_seq_length=64))
    assert make_task("reviews").max_seq_length == 64
    assert make_task("reviews", data=TaskDataConfig(max_seq_length=32)).max_seq_length == 32
    assert make_task("squad").max_seq_length == 384  # run_squad.py's, not a declaration's
    evaluate = ["evaluate", "--task", "reviews", "--model", "m", "--data", "d"]
    parser = build_parser()
    assert task_configs.task_of(parser.parse_args(evaluate)).max_seq_length == 64
    flagged = parser.parse_args([*evaluate, "--max-seq-length", "48"])
    assert task_configs.task_of(flagged).max_seq_length == 48
    saved = {"task": "reviews", "data": {"max_seq_length": 40}}
    assert task_configs.task_of(parser.parse_args(evaluate), saved).max_seq_length == 40
    assert bertlab.load(hub_model_folder, task="reviews").task.max_seq_length == 64
