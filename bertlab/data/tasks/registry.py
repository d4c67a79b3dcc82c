"""Tasks by name: which reader, labels and metrics each benchmark uses.

The generic `classification` task needs a `ColumnSpec` to be read, so it is not here; use
`classification.read_classification`. The generic `tagging`, `qa` and `multiple-choice` tasks read
fixed formats and are listed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bertlab.data.tasks.classification import GLUE_LABELS, read_chnsenticorp, read_glue
from bertlab.data.tasks.multiple_choice import read_multiple_choice, read_swag
from bertlab.data.tasks.ner import read_conll, read_tagging
from bertlab.data.tasks.squad import read_squad
from bertlab.metrics import TASK_METRICS

FAMILIES = ("classification", "tagging", "qa", "multiple-choice")


@dataclass(frozen=True)
class TaskSpec:
    """How a named task is read and scored.

    Attributes:
        name: the task name (`cola`, `conll2003`, ...).
        family: one of `FAMILIES`; decides the head and the prediction file format.
        read: path -> examples.
        labels: the fixed label list (label id = position); None for regression, for tagging
            (tags come from the training data) and for span and choice tasks.
        metrics: the metric set, a key of `bertlab.metrics.METRIC_SETS`.
        is_regression: the label is a real number (STS-B).
        is_pair: examples have a second text.
        dev_files: file names of the evaluation split(s) in the task's data folder.
    """

    name: str
    family: str
    read: Callable[[Path | str], list]
    labels: tuple[str, ...] | None
    metrics: str
    is_regression: bool = False
    is_pair: bool = False
    dev_files: tuple[str, ...] = ("dev.tsv",)


def _glue(name: str, is_pair: bool = True) -> TaskSpec:
    labels = GLUE_LABELS[name]
    dev_files = ("dev_matched.tsv", "dev_mismatched.tsv") if name == "mnli" else ("dev.tsv",)
    return TaskSpec(
        name=name,
        family="classification",
        read=functools.partial(read_glue, name),
        labels=labels,
        metrics=TASK_METRICS[name],
        is_regression=labels is None,
        is_pair=is_pair,
        dev_files=dev_files,
    )


TASKS: dict[str, TaskSpec] = {
    "cola": _glue("cola", is_pair=False),
    "sst2": _glue("sst2", is_pair=False),
    "mrpc": _glue("mrpc"),
    "stsb": _glue("stsb"),
    "qqp": _glue("qqp"),
    "mnli": _glue("mnli"),
    "qnli": _glue("qnli"),
    "rte": _glue("rte"),
    "wnli": _glue("wnli"),
    "chnsenticorp": TaskSpec(
        "chnsenticorp", "classification", read_chnsenticorp, ("0", "1"), "accuracy"
    ),
    "conll2003": TaskSpec(
        "conll2003", "tagging", read_conll, None, "entity_f1", dev_files=("valid.txt",)
    ),
    "tagging": TaskSpec("tagging", "tagging", read_tagging, None, "entity_f1", dev_files=()),
    "squad": TaskSpec("squad", "qa", read_squad, None, "squad", dev_files=("dev-v1.1.json",)),
    "qa": TaskSpec("qa", "qa", read_squad, None, "squad", dev_files=()),
    "swag": TaskSpec(
        "swag", "multiple-choice", read_swag, None, "accuracy", dev_files=("val.csv",)
    ),
    "multiple-choice": TaskSpec(
        "multiple-choice", "multiple-choice", read_multiple_choice, None, "accuracy", dev_files=()
    ),
}


def get_task(name: str) -> TaskSpec:
    """The registered task, or a ValueError listing the known names."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    return TASKS[name]
