"""`fit(x, y)` as Keras takes it, for every ready model of `bertlab.load` (`PretrainedBert`,
`PretrainedLanguageModel`): texts and labels (or labelled examples) made the task's examples,
label names chosen and checked, a new task head where the model has none, and `bertlab
finetune`'s `finetune_task` on the model in memory.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import os
import tempfile
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch import nn

from bertlab.core.finetune_config import FinetuneConfig
from bertlab.core.runtime import set_seed
from bertlab.data.tasks.classification import ColumnSpec, Example, label_set
from bertlab.data.tasks.registry import GENERIC_CLASSIFICATION
from bertlab.task_families import Task, make_task
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.finetuning.finetune import (
    ModelSource,
    TaskData,
    finetune_task,
    warn_about_training_data,
)
from bertlab.training.finetuning.loop import FinetuneResult

# Generic classification in memory: the fields of `Example`, named as `bertlab finetune` does.
MEMORY_COLUMNS = ColumnSpec(text_a="text", label="label")


@dataclass(frozen=True)
class FitRun:
    """What `fit_head` trains: the ready model's task (None: a new classification head), its
    model, tokenizer and folder, and how it builds a new head (task, label names -> head)."""

    task: Task | None
    model: nn.Module
    tokenizer: Tokenizer
    source: Path
    new_head: Callable[[Task, tuple[str, ...]], nn.Module]


def fit_head(
    run: FitRun,
    x: Sequence[Any],
    y: Sequence[Hashable] | None,
    dev: Any,
    out: str | os.PathLike | None,
    config: FinetuneConfig,
    show_progress: bool,
) -> tuple[FinetuneResult, nn.Module, Task]:
    """Fine-tune `run`'s head (a new classification head when it has none) on `x` and `y`, as
    `PretrainedBert.fit` documents it.

    Returns:
        The result (`best_dir` None without `out`), the trained head in eval mode, its task.

    Raises:
        ValueError: as `PretrainedBert.fit`.
    """
    if y is not None and any(_is_example(label) for label in y):
        raise ValueError(
            "fit(x, y): y holds examples, not labels. fit(train, dev) is the old call: "
            "pass the dev examples by keyword, fit(train, dev=dev)"
        )
    task = run.task or make_task(GENERIC_CLASSIFICATION, MEMORY_COLUMNS)
    train = _labelled(task, x, y)
    if not train:
        raise ValueError("fit needs at least one labelled example; x is empty")
    dev_examples = None if dev is None else _labelled(task, *_dev_parts(dev))
    if run.task is None:
        set_seed(config.seed)  # the new task layer's init, as `finetune_task` seeds it
        model = run.new_head(task, _label_names([example.label for example in train]))
    else:
        model = run.model
    label_names = _head_label_names(task, model)
    train = _named_labels(task, train, label_names)
    warn_about_training_data(task, train)
    dev_examples = None if dev is None else _named_labels(task, dev_examples, label_names)
    data = TaskData(train, dev_examples, label_names)
    train_it = functools.partial(
        finetune_task,
        task,
        data,
        ModelSource(directory=run.source),
        config,
        show_progress=show_progress,
        model=model,
        tokenizer=run.tokenizer,
    )
    if out is not None:
        result = train_it(Path(out))
    else:
        with tempfile.TemporaryDirectory(prefix="bertlab-fit-") as temporary:
            result = replace(train_it(Path(temporary)), best_dir=None)
    return result, model.eval(), task


def as_examples(task: Task | None, items: Sequence[Any], with_labels: bool) -> list:
    """Classification tuples and strings as `Example`s; other families' examples as given."""
    if task is None or task.spec.family != "classification":
        return list(items)
    return [_example(item, with_labels) for item in items]


def _example(item: Any, with_labels: bool) -> Example:
    if isinstance(item, Example):
        return item
    if isinstance(item, str):
        item = (item,)
    if not isinstance(item, tuple) or not 1 <= len(item) <= 3:
        raise ValueError(f"expected a text or a (text[, pair][, label]) tuple, got {item!r}")
    if with_labels:
        if len(item) < 2:
            raise ValueError(f"a training example needs a label: {item!r}")
        *texts, label = item
    else:
        texts, label = list(item), None
    return Example(texts[0], texts[1] if len(texts) > 1 else None, label)


def _is_example(item: Any) -> bool:
    """An example (a tuple, an `Example`, a family's dataclass), not a label."""
    return isinstance(item, (tuple, list, dict)) or dataclasses.is_dataclass(item)


def _dev_parts(dev: Any) -> tuple[Sequence[Any], Sequence[Hashable] | None]:
    """`fit`'s dev as (x, y): an `(x, y)` pair is a tuple of two whose first item is a list of
    texts (not a text or an example); anything else is labelled examples (y None)."""
    if isinstance(dev, tuple) and len(dev) == 2 and not isinstance(dev[0], (str, tuple)):
        if not dataclasses.is_dataclass(dev[0]):  # an `Example`, a `TaggedSentence`, ...
            return dev
    return dev, None


def _labelled(task: Task, x: Sequence[Any], y: Sequence[Hashable] | None) -> list:
    """Labelled examples of `task` from `fit`'s x and y; labels as given (not yet named)."""
    if task.spec.family != "classification":
        if y is not None:
            raise ValueError(
                f"y= labels texts for classification; give {task.name}'s labelled examples as x"
            )
        return list(x)
    if y is None:
        examples = [_example(item, with_labels=True) for item in x]
    else:
        x, y = list(x), list(y)
        if len(x) != len(y):
            raise ValueError(f"x has {len(x)} inputs but y {len(y)} labels")
        inputs = [_example(item, with_labels=False) for item in x]
        examples = [replace(ex, label=label) for ex, label in zip(inputs, y, strict=True)]
    for index, example in enumerate(examples):
        if _is_missing(example.label):
            where = f"y[{index}]" if y is not None else f"example {index}'s label"
            raise ValueError(
                f"{where} is {example.label!r}, a missing value: every input needs its label"
            )
    return examples


def _is_missing(label: Hashable) -> bool:
    """None or NaN (an empty cell, as pandas reads it): no label."""
    return label is None or (isinstance(label, numbers.Real) and math.isnan(label))


def _label_names(labels: Sequence[Hashable]) -> tuple[str, ...]:
    """A new head's label names: `str(label)` of each distinct label, sorted when the labels sort
    (integer strings numerically, as `bertlab finetune` orders a file's labels), else in the
    order first seen. Example: [1, 0, 2, 0] -> ("0", "1", "2"); ["b", 3, "a"] -> ("b", "3", "a").

    Raises:
        ValueError: two labels with one name (1 and "1").
    """
    distinct = list(dict.fromkeys(labels))
    if all(isinstance(label, str) for label in distinct):
        ordered = list(label_set(Example("", label=label) for label in distinct))
    else:
        try:
            ordered = sorted(distinct)
        except TypeError:  # labels of types that do not compare: the order first seen
            ordered = distinct
    names = tuple(str(label) for label in ordered)
    if len(set(names)) != len(names):
        raise ValueError(f"labels {distinct!r} give two labels the same name (str(label))")
    return names


def _head_label_names(task: Task, model: nn.Module) -> tuple[str, ...] | None:
    """A label head's names in id order; None for a head without named labels (spans, choices,
    a regression score)."""
    if getattr(model, "id2label", None) is None or task.spec.is_regression:
        return None
    return tuple(model.id2label[label_id] for label_id in range(model.num_labels))


def _named_labels(task: Task, examples: list, label_names: tuple[str, ...] | None) -> list:
    """Classification examples with `str(label)`, each checked to be one of `label_names`."""
    if task.spec.family != "classification" or label_names is None:
        return examples
    named = [replace(example, label=str(example.label)) for example in examples]
    known = set(label_names)
    for index, example in enumerate(named):
        if example.label not in known:
            raise ValueError(
                f"example {index}: label {example.label!r} is not one of the head's labels "
                f"{list(label_names)}"
            )
    return named
