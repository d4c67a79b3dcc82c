"""Tasks end to end, shared by fine-tuning and by `bertlab evaluate|predict`.

A `Task` knows, for one task family, how to read its files, which head and label names it needs,
how to encode examples, how to turn the model's outputs into predictions in the task's own terms
(label strings or scores, one tag per input word, answer texts, choice indices), how to score them
with the official metrics and how to write a predictions file that `bertlab score` reads back:

- classification and multiple choice: JSON Lines `{"index": i, "id": ..., "prediction": p}`;
- tagging: the input file's columns with the predicted tag appended (conlleval layout);
- question answering: the official SQuAD `{question_id: answer_text}` JSON.

`predict_rows` runs any head over features in longest-first batches (dynamic padding).
"""

# Shapes: B batch, L sequence length, C labels, K choices; F features.

from __future__ import annotations

import dataclasses
import functools
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from bertlab.config import BertConfig, TaskDataConfig, read_json_object
from bertlab.data.task_collate import collate_task_batch, feature_lengths, sorted_length_batches
from bertlab.data.tasks.classification import ColumnSpec, label_set, read_classification
from bertlab.data.tasks.features import (
    encode_classification,
    encode_multiple_choice,
    encode_tagging,
    word_labels,
)
from bertlab.data.tasks.files import at, existing_file, require_examples
from bertlab.data.tasks.ner import DOCUMENT_MARKER, TaggedSentence
from bertlab.data.tasks.registry import TaskSpec, get_task
from bertlab.data.tasks.squad import gold_answers, read_squad
from bertlab.data.tasks.squad_features import decode_squad, encode_squad
from bertlab.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTask,
    BertForTokenClassification,
    TaskOutput,
)
from bertlab.metrics import METRIC_SETS, OUTSIDE_TAG
from bertlab.tokenization import Tokenizer
from bertlab.training.runtime import autocast

MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
TASK_FILE = "bertlab_task.json"  # beside config.json: the task, its columns and input settings
FILE_MODE = 0o644  # tempfile.mkstemp makes 0o600 files; predictions are for sharing

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
    device = next(model.parameters()).device
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


def _token_labels(output: TaskOutput) -> torch.Tensor:
    return output.logits.argmax(-1)  # (B, L): the predicted label id of every token


# --- writing files --------------------------------------------------------------------------------


def write_atomically(path: Path | str, text: str) -> None:
    """Write `text` to a temporary file beside `path`, then rename it: never a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.chmod(temporary, FILE_MODE)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def _jsonl(records: Sequence[dict]) -> str:
    return "".join(json.dumps(record, ensure_ascii=False) + "\n" for record in records)


# --- tasks ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """One task: its registry entry, the columns of generic classification files, input settings.

    Subclasses implement one task family each; `make_task` picks the subclass.
    """

    spec: TaskSpec
    columns: ColumnSpec | None = None
    data: TaskDataConfig = dataclasses.field(default_factory=TaskDataConfig)

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

    def check_fits(self, config: BertConfig) -> None:
        """Raise a ValueError when inputs of `max_seq_length` exceed the model's positions."""
        if self.max_seq_length > config.max_position_embeddings:
            raise ValueError(
                f"max_seq_length {self.max_seq_length} exceeds the model's "
                f"max_position_embeddings {config.max_position_embeddings}"
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

    def new_head(self, config: BertConfig, label_names: Sequence[str] | None) -> BertForTask:
        return self.head_class(config)

    def holdout_group(self, example: Any, index: int) -> object:
        """Examples of one group go to the same side of a train/dev split."""
        return index

    def load_head(self, directory: Path | str, label_names: Sequence[str] | None) -> BertForTask:
        """The head of `directory`; with `label_names`, a label head gets that label set."""
        if label_names is None:
            return self.head_class.from_pretrained(directory)
        return self.head_class.from_pretrained(
            directory, id2label=dict(enumerate(label_names)), num_labels=None
        )

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

    def score(self, predictions: Predictions, examples: Sequence) -> dict[str, float]:
        golds = [example.label for example in examples]
        if any(gold is None for gold in golds):
            raise ValueError("the data has examples without a label; evaluation needs gold labels")
        return METRIC_SETS[self.spec.metrics](predictions, golds)

    def write(
        self, predictions: Predictions, examples: Sequence, source: Path, out: Path | str
    ) -> None:
        records = []
        for index, (example, prediction) in enumerate(zip(examples, predictions, strict=True)):
            record: dict[str, Any] = {"index": index}
            if example.example_id is not None:
                record["id"] = example.example_id
            records.append(record | {"prediction": prediction})
        write_atomically(out, _jsonl(records))

    def to_json(self) -> dict[str, Any]:
        """What `TASK_FILE` holds, so that evaluation can reuse the training settings."""
        columns = None if self.columns is None else dataclasses.asdict(self.columns)
        return {"task": self.name, "columns": columns, "data": dataclasses.asdict(self.data)}


class ClassificationTask(Task):
    """Sentence (pair) classification and regression on the pooled [CLS] vector (BERT §4.1)."""

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
            return BertForSequenceClassification(config, num_labels=1, problem_type="regression")
        return BertForSequenceClassification(config, id2label=dict(enumerate(label_names)))

    def load_head(self, directory: Path | str, label_names: Sequence[str] | None) -> BertForTask:
        if self.is_regression:
            return BertForSequenceClassification.from_pretrained(
                directory, num_labels=1, problem_type="regression"
            )
        return super().load_head(directory, label_names)

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


def _read_glue_unlabeled(task: str, path: Path | str) -> list:
    from bertlab.data.tasks.classification import read_glue

    return read_glue(task, path, with_labels=False)


_GLUE_UNLABELED = {
    name: functools.partial(_read_glue_unlabeled, name)
    for name in ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
}


def _labelled_or_not(read_labelled: Callable[[], list], read_unlabeled: Callable, path, *args):
    """Read a file with labels; when that fails, as an unlabeled (test) file. When both fail, the
    unlabeled reader's error is raised: it names what is wrong beyond a missing label."""
    try:
        return read_labelled()
    except ValueError:
        return read_unlabeled(path, *args)


class TaggingTask(Task):
    """Token tagging: each word takes the label of its first piece (BERT §4.3)."""

    head_class = BertForTokenClassification
    reduce = staticmethod(_token_labels)

    def read_gold(self, path: Path | str, label_names: Sequence[str] | None = None) -> list:
        sentences = self.spec.read(path)
        if label_names is not None:
            self.check_labels(sentences, label_names, path)
        return sentences

    def check_labels(
        self, examples: Sequence, label_names: Sequence[str], path: Path | str
    ) -> None:
        known = set(label_names)
        for sentence in examples:
            unseen = sorted(set(sentence.tags) - known)
            if unseen:
                raise ValueError(
                    f"{at(path, sentence.line)}: tag {unseen[0]!r} was never seen in training; "
                    f"the model's tags are {list(label_names)}"
                )

    def read_inputs(self, path: Path | str) -> list:
        """Sentences of the first column's tokens; tags, if any, are not read."""
        return read_token_lines(path)

    def label_names(self, examples: Sequence) -> tuple[str, ...] | None:
        tags = {tag for sentence in examples for tag in sentence.tags} - {OUTSIDE_TAG}
        # Entity types together, B before I (and BMES prefixes in order).
        return (OUTSIDE_TAG, *sorted(tags, key=lambda tag: (tag[2:], tag[:1])))

    def new_head(self, config: BertConfig, label_names: Sequence[str] | None) -> BertForTask:
        return BertForTokenClassification(config, id2label=dict(enumerate(label_names)))

    def encode(
        self,
        examples: Sequence,
        tokenizer: Tokenizer,
        label2id: dict[str, int] | None,
        with_labels: bool,
    ) -> list:
        label2id = label2id if with_labels else None
        return encode_tagging(examples, tokenizer, self.data.max_seq_length, label2id)

    def decode(
        self,
        features: Sequence,
        rows: Sequence[np.ndarray],
        examples: Sequence,
        id2label: dict[int, str] | None,
    ) -> Predictions:
        return word_labels(features, [row.astype(np.int64) for row in rows], id2label)

    def score(self, predictions: Predictions, examples: Sequence) -> dict[str, float]:
        return METRIC_SETS[self.spec.metrics](predictions, [s.tags for s in examples])

    def write(
        self, predictions: Predictions, examples: Sequence, source: Path, out: Path | str
    ) -> None:
        """The source file's lines with the predicted tag appended to each token line."""
        tags = iter(tag for sentence in predictions for tag in sentence)
        lines = []
        with Path(source).open(encoding="utf-8-sig") as file:
            for line in file:
                line = line.rstrip("\r\n")
                columns = line.split()
                is_token = bool(columns) and columns[0] != DOCUMENT_MARKER
                lines.append(f"{line} {next(tags)}" if is_token else line)
        write_atomically(out, "\n".join(lines) + "\n")


def read_token_lines(path: Path | str) -> list[TaggedSentence]:
    """Sentences of a column file's first column (blank lines between sentences, `-DOCSTART-`
    lines skipped), with every tag O: the input of tagging prediction, labelled or not.

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: the file holds no token.
    """
    path = existing_file(path)
    sentences, tokens, first_line = [], [], 0
    with path.open(encoding="utf-8-sig") as file:
        for line_number, line in enumerate(file, start=1):
            columns = line.split()
            if columns and columns[0] != DOCUMENT_MARKER:
                first_line = first_line if tokens else line_number
                tokens.append(columns[0])
                continue
            if tokens:
                sentences.append(
                    TaggedSentence(tuple(tokens), (OUTSIDE_TAG,) * len(tokens), first_line)
                )
            tokens = []
    if tokens:
        sentences.append(TaggedSentence(tuple(tokens), (OUTSIDE_TAG,) * len(tokens), first_line))
    return require_examples(sentences, path)


class QuestionAnsweringTask(Task):
    """Extractive QA over strided context windows, answers decoded from n-best spans (BERT §4.2)."""

    head_class = BertForQuestionAnswering

    @property
    def max_seq_length(self) -> int:
        return self.data.squad_max_seq_length

    def read_inputs(self, path: Path | str) -> list:
        return read_squad(path, require_answers=False)

    def holdout_group(self, example: Any, index: int) -> object:
        return example.title or example.context  # no context on both sides of a split

    def encode(
        self,
        examples: Sequence,
        tokenizer: Tokenizer,
        label2id: dict[str, int] | None,
        with_labels: bool,
    ) -> list:
        data = self.data
        return encode_squad(
            examples, tokenizer, data.squad_max_seq_length, data.doc_stride, data.max_query_length
        )

    def decode(
        self,
        features: Sequence,
        rows: Sequence[np.ndarray],
        examples: Sequence,
        id2label: dict[int, str] | None,
    ) -> Predictions:
        starts = [row[:, 0] for row in rows]  # (L,) each
        ends = [row[:, 1] for row in rows]
        return decode_squad(
            features, starts, ends, examples, self.data.n_best_size, self.data.max_answer_length
        )

    def score(self, predictions: Predictions, examples: Sequence) -> dict[str, float]:
        if any(not example.answers and not example.is_impossible for example in examples):
            raise ValueError("the data has questions without answers; evaluation needs them")
        return METRIC_SETS[self.spec.metrics](predictions, gold_answers(examples))

    def write(
        self, predictions: Predictions, examples: Sequence, source: Path, out: Path | str
    ) -> None:
        write_atomically(out, json.dumps(predictions, ensure_ascii=False, indent=1) + "\n")


class MultipleChoiceTask(Task):
    """Score K (context, choice) pairs, softmax over the choices (BERT §4.4)."""

    head_class = BertForMultipleChoice

    def encode(
        self,
        examples: Sequence,
        tokenizer: Tokenizer,
        label2id: dict[str, int] | None,
        with_labels: bool,
    ) -> list:
        if not with_labels:
            examples = [dataclasses.replace(example, label=None) for example in examples]
        return encode_multiple_choice(examples, tokenizer, self.data.max_seq_length)

    def decode(
        self,
        features: Sequence,
        rows: Sequence[np.ndarray],
        examples: Sequence,
        id2label: dict[int, str] | None,
    ) -> Predictions:
        return [int(row.argmax()) for row in rows]


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

    Raises:
        ValueError: an unknown task, or `classification` without columns.
    """
    data = data or TaskDataConfig()
    if name == "classification":
        if columns is None:
            raise ValueError("the classification task needs the columns of its files")
        metrics = "pearson_spearman" if columns.is_regression else "accuracy"
        spec = TaskSpec(
            "classification",
            "classification",
            functools.partial(read_classification, columns=columns),
            None,
            metrics,
            is_regression=columns.is_regression,
            is_pair=columns.text_b is not None,
        )
        return ClassificationTask(spec, columns, data)
    return TASK_CLASSES[get_task(name).family](get_task(name), None, data)


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
    if features is None:
        features = task.encode(examples, tokenizer, None, with_labels=False)
    rows = predict_rows(model, features, batch_size, precision, task.reduce)
    return task.decode(features, rows, examples, getattr(model, "id2label", None))
