"""Sentence (pair) classification and regression on the pooled [CLS] vector."""

# Shapes: B batch, C labels.

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from bertlab.core.config import BertConfig
from bertlab.data.tasks.classification import label_set, read_classification, read_glue
from bertlab.data.tasks.encoding import encode_classification
from bertlab.network.architectures import HeadRequest
from bertlab.network.heads import BertForSequenceClassification, BertForTask
from bertlab.task_families.base import Predictions, Task
from bertlab.tokenizer.wordpiece import Tokenizer


class ClassificationTask(Task):
    """Sentence (pair) classification and regression on the pooled [CLS] vector (BERT Sec. 4.1)."""

    head_class = BertForSequenceClassification

    @property
    def is_regression(self) -> bool:
        return self.spec.is_regression

    def read_gold(self, path: Path | str, label_names: Sequence[str] | None = None) -> list:
        if self.columns is not None:  # generic classification: check labels while reading
            labels = None if self.is_regression else label_names
            return read_classification(path, self.columns, labels)
        examples = self.spec.read(path)
        if label_names is not None:
            self.check_labels(examples, label_names, path)
        return examples

    def check_labels(
        self, examples: Sequence, label_names: Sequence[str], path: Path | str
    ) -> None:
        if self.is_regression:
            return
        known = set(label_names)
        for index, example in enumerate(examples):
            if example.label is not None and example.label not in known:
                raise ValueError(
                    f"{path}: example {index}: label {example.label!r} was never seen in "
                    f"training; the model's labels are {list(label_names)}"
                )

    def read_inputs(self, path: Path | str) -> list:
        if self.columns is not None and self.columns.label is not None:
            unlabeled = dataclasses.replace(self.columns, label=None)
            return _labelled_or_not(
                lambda: self.read_gold(path), read_classification, path, unlabeled
            )
        if self.spec.name in _GLUE_UNLABELED:
            return _labelled_or_not(
                lambda: self.read_gold(path), _GLUE_UNLABELED[self.spec.name], path
            )
        return self.read_gold(path)

    def label_names(self, examples: Sequence) -> tuple[str, ...] | None:
        if self.is_regression:
            return None
        return self.spec.labels if self.spec.labels is not None else label_set(examples)

    def new_head(self, config: BertConfig, label_names: Sequence[str] | None) -> BertForTask:
        if self.is_regression:
            return BertForSequenceClassification(
                config, num_labels=1, problem_type="regression", **self.head_kwargs()
            )
        return BertForSequenceClassification(
            config, id2label=dict(enumerate(label_names)), **self.head_kwargs()
        )

    def head_request(self, label_names: Sequence[str] | None) -> HeadRequest:
        if self.is_regression:
            return dataclasses.replace(super().head_request(None), is_regression=True)
        return super().head_request(label_names)

    def encode(
        self,
        examples: Sequence,
        tokenizer: Tokenizer,
        label2id: dict[str, int] | None,
        with_labels: bool,
    ) -> list:
        if not with_labels:
            examples = [dataclasses.replace(example, label=None) for example in examples]
        return encode_classification(examples, tokenizer, self.data.max_seq_length, label2id)

    def decode(
        self,
        features: Sequence,
        rows: Sequence[np.ndarray],
        examples: Sequence,
        id2label: dict[int, str] | None,
    ) -> Predictions:
        if self.is_regression:
            return [float(row[0]) for row in rows]
        return [id2label[int(row.argmax())] for row in rows]

    def probabilities(
        self, rows: Sequence[np.ndarray], id2label: dict[int, str]
    ) -> list[dict[str, float]]:
        """Every label's probability, the softmax of the head's logits, per example.

        Args:
            rows: per example, the head's logits, (C,) float32.
            id2label: the head's labels by id.

        Returns:
            Per example, {label: probability} in label id order.
        """
        if not rows:
            return []
        probabilities = torch.from_numpy(np.stack(rows)).softmax(-1).tolist()  # (B, C)
        labels = [id2label[index] for index in range(len(id2label))]
        return [dict(zip(labels, row, strict=True)) for row in probabilities]

    def label_name(self, label: str) -> str | None:
        """The name the task gives `label` (SST-2: "1" -> "positive"); None when unnamed."""
        return self.spec.label_name(label)

    def details(
        self, predictions: Predictions, rows: Sequence[np.ndarray], id2label: dict[int, str] | None
    ) -> list[dict[str, Any]] | None:
        if self.is_regression:
            return None
        details = []
        for label, probabilities in zip(
            predictions, self.probabilities(rows, id2label), strict=True
        ):
            name = self.label_name(label)
            detail: dict[str, Any] = {} if name is None else {"label_name": name}
            details.append(detail | {"probabilities": probabilities})
        return details

    def text_fields(self, example: Any) -> dict[str, Any] | None:
        if example.text_b is None:
            return {"text": example.text_a}
        return {"text": example.text_a, "text_pair": example.text_b}

    def classes(
        self, predictions: Predictions, examples: Sequence
    ) -> tuple[list[str], list[str]] | None:
        if self.is_regression:
            return None
        return list(predictions), [example.label for example in examples]


_GLUE_UNLABELED = {
    name: functools.partial(read_glue, name, with_labels=False)
    for name in ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
}


def _labelled_or_not(read_labelled: Callable[[], list], read_unlabeled: Callable, path, *args):
    """Read a file with labels; when that fails, as an unlabeled (test) file. When both fail, the
    unlabeled reader's error is raised: it names what is wrong beyond a missing label."""
    try:
        return read_labelled()
    except ValueError:
        return read_unlabeled(path, *args)
