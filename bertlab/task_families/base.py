"""What every task family shares: the `Task` base class and running a head over features.

A `Task` knows, for one task family, how to read its files, which head and label names it needs,
how to encode examples, how to turn the model's outputs into predictions in the task's own terms
(label strings or scores, one tag per input word, answer texts, choice indices), how to score them
with the official metrics and how to write a predictions file that `bertlab score` reads back:

- classification and multiple choice: JSON Lines `{"index": i, "id": ..., "prediction": p}`,
  with what the family adds beside the prediction (`Task.details`: a label's name and every
  label's probability) and, when asked for, the example's text (`Task.text_fields`);
- tagging: the input file's columns with the predicted tag appended (conlleval layout);
- question answering: the official SQuAD `{question_id: answer_text}` JSON.

`predict_rows` runs any head over features in longest-first batches (dynamic padding);
`run_task` encodes, runs and decodes in one call; `predict_task` also returns the details.
"""

# Shapes: B batch, L sequence length, C labels, K choices; F features.

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from bertlab.core.atomic import write_text
from bertlab.core.config import BertConfig, read_json_object
from bertlab.core.finetune_config import TaskDataConfig
from bertlab.core.metrics import METRIC_SETS
from bertlab.core.runtime import autocast, model_device
from bertlab.data.collate import collate_task_batch, feature_lengths, sorted_length_batches
from bertlab.data.tasks.classification import ColumnSpec
from bertlab.data.tasks.registry import TaskSpec
from bertlab.network.architectures import HeadRequest, folder_architecture
from bertlab.network.feature_head_config import FeatureHeadConfig
from bertlab.network.heads import BertForTask, TaskOutput
from bertlab.tokenizer.wordpiece import Tokenizer

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
TASK_FILE = "bertlab_task.json"  # beside config.json: the task, its columns and input settings

# The score that picks the best epoch and drives early stopping, per metric set: the figures the
# BERT paper reports (Table 1: F1 for MRPC and QQP, Spearman for STS-B, MCC for CoLA; Table 2 and
# 7: SQuAD and CoNLL F1).
PRIMARY_METRIC = {
    "accuracy": "accuracy",
    "accuracy_f1": "f1",
    "mcc": "mcc",
    "pearson_spearman": "spearman",
    "entity_f1": "f1",
    "squad": "f1",
}

Predictions = list | dict  # per family: labels/scores, tag lists, {id: answer}, choice indices


# --- running a head ------------------------------------------------------------------------------


def predict_rows(
    model: BertForTask,
    features: Sequence[Any],
    batch_size: int,
    precision: str,
    reduce: Callable[[TaskOutput], torch.Tensor],
) -> list[np.ndarray]:
    """Run `model` over `features` in longest-first batches; one output row per feature.

    Args:
        model: any task head; it is put in eval mode.
        features: from the task's encoder (dicts or `QAFeature`s).
        batch_size: features per forward pass.
        precision: "fp32" or "bf16" (autocast).
        reduce: TaskOutput -> the (B, ...) tensor to keep, e.g. `logits` or `logits.argmax(-1)`.

    Returns:
        Per feature, in input order, its row of `reduce(output)` as a numpy array; per-token rows
        keep the batch's padding (length >= the feature's).
    """
    model.eval()
    device = model_device(model)
    rows: list[np.ndarray | None] = [None] * len(features)
    pad_token_id = model.config.pad_token_id
    for indices in sorted_length_batches(feature_lengths(features), batch_size):
        batch = collate_task_batch([features[index] for index in indices], pad_token_id)
        inputs = {key: batch[key].to(device) for key in MODEL_INPUTS}
        with torch.inference_mode(), autocast(device, precision):
            kept = reduce(model(**inputs)).float().cpu().numpy()  # (B, ...)
        for row, index in enumerate(indices):
            rows[index] = kept[row]
    return rows


def _logits(output: TaskOutput) -> torch.Tensor:
    return output.logits


def token_labels(output: TaskOutput) -> torch.Tensor:
    return output.logits.argmax(-1)  # (B, L): the predicted label id of every token


def _jsonl(records: Sequence[dict]) -> str:
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


# --- tasks ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """One task: its registry entry, the columns of generic classification files, input settings
    and, for a feature-based head, how the head reads the encoder
    (`feature_head_config.FeatureHeadConfig`; None: BERT's fine-tuning head).

    Subclasses implement one task family each; `make_task` picks the subclass.
    """

    spec: TaskSpec
    columns: ColumnSpec | None = None
    data: TaskDataConfig = dataclasses.field(default_factory=TaskDataConfig)
    features: FeatureHeadConfig | None = None

    head_class: ClassVar[type[BertForTask]]
    reduce: ClassVar[Callable[[TaskOutput], torch.Tensor]] = staticmethod(_logits)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def primary_metric(self) -> str:
        return PRIMARY_METRIC[self.spec.metrics]

    @property
    def max_seq_length(self) -> int:
        """The longest model input of this task, special tokens included."""
        return self.data.max_seq_length

    def check_fits(self, config: Any) -> None:
        """Raise a ValueError when inputs of `max_seq_length` exceed the model's positions. A
        model without a position table (an LSTM-era one's config has none) reads any length."""
        limit = getattr(config, "max_position_embeddings", None)
        if limit is not None and self.max_seq_length > limit:
            raise ValueError(
                f"max_seq_length {self.max_seq_length} exceeds the model's "
                f"max_position_embeddings {limit}"
            )

    def read_gold(self, path: Path | str, label_names: Sequence[str] | None = None) -> list:
        """Labelled examples; with `label_names` (the model's), a gold label outside them is a
        ValueError naming the file and line."""
        return self.spec.read(path)

    def read_inputs(self, path: Path | str) -> list:
        """Examples to predict; labels may be absent."""
        return self.read_gold(path)

    def check_labels(
        self, examples: Sequence, label_names: Sequence[str], path: Path | str
    ) -> None:
        """Raise a ValueError naming the file when a gold label is not one of `label_names`."""

    def label_names(self, examples: Sequence) -> tuple[str, ...] | None:
        """The head's label names, learned from training examples; None for label-free heads."""
        return None

    def head_kwargs(self) -> dict[str, Any]:
        """Constructor arguments every head of this task takes: its `features`, when set."""
        return {} if self.features is None else {"features": self.features}

    def new_head(self, config: BertConfig, label_names: Sequence[str] | None) -> BertForTask:
        return self.head_class(config, **self.head_kwargs())

    def holdout_group(self, example: Any, index: int) -> object:
        """Examples of one group go to the same side of a train/dev split."""
        return index

    def head_request(self, label_names: Sequence[str] | None) -> HeadRequest:
        """What this task asks of a head: its family, BERT's head class for it, the labels of a
        new head (None: the folder's own) and the feature-based reading, if any."""
        id2label = None if label_names is None else dict(enumerate(label_names))
        return HeadRequest(self.spec.family, self.head_class, id2label, features=self.features)

    def load_head(self, directory: Path | str, label_names: Sequence[str] | None) -> nn.Module:
        """The head of `directory` (a new one on a pre-trained model, or a fine-tuned model's
        own), built by the entry of the folder's architecture (`network.architectures`); with
        `label_names`, a label head gets that label set.

        Raises:
            ValueError: the architecture has no head for this task family, or for the
                feature-based reading asked for.
        """
        architecture = folder_architecture(directory)
        architecture.check_finetune(self.spec.family, self.features)
        return architecture.load_head(directory, self.head_request(label_names), None)

    def encode(
        self,
        examples: Sequence,
        tokenizer: Tokenizer,
        label2id: dict[str, int] | None,
        with_labels: bool,
    ) -> list:
        """Model inputs for `examples`; `with_labels` adds the training targets (class ids via
        `label2id`, regression scores, tag ids, answer positions or the right choice)."""
        raise NotImplementedError

    def decode(
        self,
        features: Sequence,
        rows: Sequence[np.ndarray],
        examples: Sequence,
        id2label: dict[int, str] | None,
    ) -> Predictions:
        raise NotImplementedError

    def details(
        self, predictions: Predictions, rows: Sequence[np.ndarray], id2label: dict[int, str] | None
    ) -> list[dict[str, Any]] | None:
        """Per example, what its predictions file says beside the prediction (classification:
        the label's name and every label's probability); None for a family that adds nothing."""
        return None

    def text_fields(self, example: Any) -> dict[str, Any] | None:
        """The example's text as a JSON Lines predictions file shows it (`predict --with-text`);
        None for a family whose predictions file has no place for it (tagging files hold their
        text already; SQuAD's official file maps ids to answers)."""
        return None

    def score(self, predictions: Predictions, examples: Sequence) -> dict[str, float]:
        golds = [example.label for example in examples]
        if any(gold is None for gold in golds):
            raise ValueError("the data has examples without a label; evaluation needs gold labels")
        return METRIC_SETS[self.spec.metrics](predictions, golds)

    def classes(
        self, predictions: Predictions, examples: Sequence
    ) -> tuple[list[str], list[str]] | None:
        """The predicted and the gold class of every unit this task labels with one class of a
        label set (an example; a word when tagging), for the one-class check of fine-tuning;
        None for a task without such classes (regression, answers, choices)."""
        return None

    def write(
        self,
        predictions: Predictions,
        examples: Sequence,
        source: Path,
        out: Path | str,
        details: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        """Write the predictions file; `details`: per example, fields written after the
        prediction (`details`, `text_fields`)."""
        records = []
        for index, (example, prediction) in enumerate(zip(examples, predictions, strict=True)):
            record: dict[str, Any] = {"index": index}
            if example.example_id is not None:
                record["id"] = example.example_id
            record["prediction"] = prediction
            records.append(record | (details[index] if details is not None else {}))
        write_text(out, _jsonl(records))

    def to_json(self) -> dict[str, Any]:
        """What `TASK_FILE` holds, so that evaluation can reuse the training settings."""
        columns = None if self.columns is None else dataclasses.asdict(self.columns)
        return {"task": self.name, "columns": columns, "data": dataclasses.asdict(self.data)}


def read_task_file(directory: Path | str) -> dict[str, Any] | None:
    """The `TASK_FILE` of a fine-tuned model directory, or None when there is none."""
    path = Path(directory) / TASK_FILE
    return read_json_object(path) if path.is_file() else None


def run_task(
    task: Task,
    model: BertForTask,
    tokenizer: Tokenizer,
    examples: Sequence,
    batch_size: int,
    precision: str,
    features: list | None = None,
) -> Predictions:
    """Encode `examples`, run `model` over them and decode its outputs into predictions.

    `features`: `examples` already encoded by `task.encode` (without labels), for a set that is
    run again and again, such as the dev set after every epoch.
    """
    return _run_rows(task, model, tokenizer, examples, batch_size, precision, features)[1]


def _run_rows(
    task: Task,
    model: BertForTask,
    tokenizer: Tokenizer,
    examples: Sequence,
    batch_size: int,
    precision: str,
    features: list | None = None,
) -> tuple[list, Predictions]:
    """`run_task` keeping the model's output rows, for what is read beside the predictions."""
    if features is None:
        features = task.encode(examples, tokenizer, None, with_labels=False)
    rows = predict_rows(model, features, batch_size, precision, task.reduce)
    return rows, task.decode(features, rows, examples, getattr(model, "id2label", None))


def predict_task(
    task: Task,
    model: BertForTask,
    tokenizer: Tokenizer,
    examples: Sequence,
    batch_size: int,
    precision: str,
    with_text: bool = False,
) -> tuple[Predictions, list[dict[str, Any]] | None]:
    """`run_task`'s predictions and, per example, what a predictions file shows beside each
    (`Task.details`, and with `with_text` the example's text, `Task.text_fields`).

    Raises:
        ValueError: `with_text` for a family whose predictions file has no place for the text.
    """
    if with_text and examples and task.text_fields(examples[0]) is None:
        raise ValueError(f"the predictions file of a {task.spec.family} task has no text field")
    rows, predictions = _run_rows(task, model, tokenizer, examples, batch_size, precision)
    details = task.details(predictions, rows, getattr(model, "id2label", None))
    if with_text:
        details = details or [{} for _ in examples]
        details = [
            detail | task.text_fields(example)
            for detail, example in zip(details, examples, strict=True)
        ]
    return predictions, details
