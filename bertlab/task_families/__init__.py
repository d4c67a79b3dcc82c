"""Task families end to end, shared by fine-tuning and by `bertlab evaluate|predict`.

One module per family (`classification`, `tagging`, `qa`, `multiple_choice`), each a subclass of
`base.Task`; `make_task` picks the family of a registered task (`bertlab.data.tasks.registry`).
"""

from __future__ import annotations

import functools

from bertlab.core.finetune_config import TaskDataConfig
from bertlab.data.tasks.classification import ColumnSpec, read_classification
from bertlab.data.tasks.registry import GENERIC_CLASSIFICATION, TaskSpec, get_task
from bertlab.task_families.base import (
    PRIMARY_METRIC,
    TASK_FILE,
    Predictions,
    Task,
    predict_rows,
    predict_task,
    read_task_file,
    run_task,
)
from bertlab.task_families.classification import ClassificationTask
from bertlab.task_families.multiple_choice import MultipleChoiceTask
from bertlab.task_families.qa import QuestionAnsweringTask
from bertlab.task_families.tagging import TaggingTask, read_token_lines

__all__ = [
    "PRIMARY_METRIC",
    "TASK_CLASSES",
    "TASK_FILE",
    "ClassificationTask",
    "MultipleChoiceTask",
    "Predictions",
    "QuestionAnsweringTask",
    "TaggingTask",
    "Task",
    "make_task",
    "predict_rows",
    "predict_task",
    "read_task_file",
    "read_token_lines",
    "run_task",
]

TASK_CLASSES: dict[str, type[Task]] = {
    "classification": ClassificationTask,
    "tagging": TaggingTask,
    "qa": QuestionAnsweringTask,
    "multiple-choice": MultipleChoiceTask,
}


def make_task(
    name: str, columns: ColumnSpec | None = None, data: TaskDataConfig | None = None
) -> Task:
    """The task by name (`sst2`, `conll2003`, `squad`, ..., or the generic `classification`,
    which needs `columns`).

    Args:
        name: a task of the registry, or `classification`.
        columns: the columns of generic classification files.
        data: the input settings (a fine-tuned model's own, or the flags'); None: the task's
            own, as the registry declares them (`TaskSpec.max_seq_length`), and otherwise
            `TaskDataConfig`'s defaults (google-research/bert's).

    Raises:
        ValueError: an unknown task, or `classification` without columns.
    """
    if name == GENERIC_CLASSIFICATION:
        if columns is None:
            raise ValueError("the classification task needs the columns of its files")
        metrics = "pearson_spearman" if columns.is_regression else "accuracy"
        spec = TaskSpec(
            GENERIC_CLASSIFICATION,
            "classification",
            functools.partial(read_classification, columns=columns),
            None,
            metrics,
            "your own CSV, TSV or JSON Lines file, columns named by flags",
            is_regression=columns.is_regression,
            is_pair=columns.text_b is not None,
        )
        return ClassificationTask(spec, columns, data or TaskDataConfig())
    spec = get_task(name)
    return TASK_CLASSES[spec.family](spec, None, data or _declared_data(spec))


def _declared_data(spec: TaskSpec) -> TaskDataConfig:
    """The input settings a task declares: its `max_seq_length`. A SQuAD-style task reads
    `squad_max_seq_length` instead (run_squad.py's 384), which the registry leaves as it is."""
    if spec.family == "qa":
        return TaskDataConfig()
    return TaskDataConfig(max_seq_length=spec.max_seq_length)
