"""Score a predictions file against gold data: `score(task, gold_path, predictions_path)`.

Prediction file formats, by task family:

- classification and multiple-choice: JSON Lines, one `{"index": i, "prediction": p}` or
  `{"id": example_id, "prediction": p}` per example. `index` is the 0-based position of the
  example in the gold file; `id` matches the gold id column (`ColumnSpec.example_id`, or SWAG's
  `video-id-fold-ind`). `p` is a label string (`"entailment"`, `"1"`), a number for regression,
  or a choice index. Every gold example needs exactly one prediction.
- tagging: the gold column file with the predicted tag appended as the last column (the
  `conlleval` input layout): same sentences, same tokens.
- qa: the official SQuAD predictions JSON `{question_id: answer_text}`. As in the official
  script, a question without a prediction scores 0 (and is logged).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from bertlab.core.metrics import METRIC_SETS, squad_em_f1
from bertlab.data.tasks.classification import ColumnSpec, read_classification
from bertlab.data.tasks.files import at, read_json, read_jsonl
from bertlab.data.tasks.ner import TaggedSentence, read_tagging
from bertlab.data.tasks.registry import TaskSpec, get_task
from bertlab.data.tasks.squad import gold_answers

logger = logging.getLogger(__name__)


def compute_metrics(task: str, predictions, references) -> dict[str, float]:
    """The registered metric set of a task (for GLUE, the GLUE paper's Table 1).

    CoLA: mcc. SST-2, MNLI, QNLI, RTE, WNLI, ChnSentiCorp, SWAG, multiple-choice: accuracy.
    MRPC, QQP: accuracy and f1. STS-B: pearson and spearman. CoNLL-2003 and the other tagging
    tasks: precision, recall and f1 over entities. SQuAD, qa: exact_match and f1 (percent).

    Args:
        task: a name in `TASKS`.
        predictions: labels (ids or strings), scores, tag sequences, or for SQuAD a mapping
            question id -> answer text; the same kind as `references`.
        references: the gold values; for SQuAD a mapping question id -> gold answer texts.

    Raises:
        ValueError: an unknown task name, or predictions that do not pair up with references.
    """
    return METRIC_SETS[get_task(task).metrics](predictions, references)


def score(
    task: str,
    gold_path: Path | str,
    predictions_path: Path | str,
    columns: ColumnSpec | None = None,
) -> dict[str, float]:
    """Read the gold data with the task's reader and the predictions, and compute the task metrics.

    Args:
        task: a name in `TASKS`, or `classification` (which needs `columns`).
        gold_path: the gold file, in the task's own format.
        predictions_path: the predictions, in the format of the task family (module docstring).
        columns: for `classification` only, the columns of the gold file.

    Returns:
        The task's metric set, e.g. `{"accuracy": ..., "f1": ...}` for MRPC.

    Raises:
        FileNotFoundError: a missing file.
        ValueError: an unknown task, or predictions that do not match the gold data, naming the
            predictions file and line.
    """
    if task == "classification":
        if columns is None:
            raise ValueError("the classification task needs a ColumnSpec for the gold file")
        gold = read_classification(gold_path, columns)
        metrics = "pearson_spearman" if columns.is_regression else "accuracy"
        return _score_labels(gold, predictions_path, None, columns.is_regression, metrics)
    spec = get_task(task)
    return _FAMILY_SCORERS[spec.family](spec, gold_path, predictions_path)


def _score_classification(
    spec: TaskSpec, gold_path: Path | str, predictions_path: Path | str
) -> dict[str, float]:
    gold = spec.read(gold_path)
    return _score_labels(gold, predictions_path, spec.labels, spec.is_regression, spec.metrics)


def _score_labels(
    gold: list,
    predictions_path: Path | str,
    labels: Sequence[str] | None,
    is_regression: bool,
    metrics: str,
) -> dict[str, float]:
    def parse(value: object, where: str) -> str | float:
        if is_regression:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"{where}: prediction {value!r} is not a number")
            return float(value)
        label = str(value)
        if labels is not None and label not in labels:
            raise ValueError(
                f"{where}: prediction {label!r} is not one of the labels {list(labels)}"
            )
        return label

    ids = [example.example_id for example in gold]
    predictions = _aligned_predictions(predictions_path, ids, parse)
    return METRIC_SETS[metrics](predictions, [example.label for example in gold])


def _score_multiple_choice(
    spec: TaskSpec, gold_path: Path | str, predictions_path: Path | str
) -> dict[str, float]:
    gold = spec.read(gold_path)
    num_choices = len(gold[0].endings)

    def parse(value: object, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < num_choices:
            raise ValueError(f"{where}: prediction {value!r} is not a choice index")
        return value

    predictions = _aligned_predictions(predictions_path, [e.example_id for e in gold], parse)
    return METRIC_SETS[spec.metrics](predictions, [example.label for example in gold])


def _aligned_predictions(
    path: Path | str, gold_ids: list[str | None], parse: Callable[[object, str], object]
) -> list:
    """The predictions of a JSON Lines file, in gold order."""
    position_of_id = {example_id: index for index, example_id in enumerate(gold_ids)}
    aligned: list = [None] * len(gold_ids)
    found = [False] * len(gold_ids)
    for line_number, record in read_jsonl(path):
        where = at(path, line_number)
        if "prediction" not in record:
            raise ValueError(f"{where}: no 'prediction' key")
        if "index" in record:
            index = record["index"]
            if isinstance(index, bool) or not isinstance(index, int):
                raise ValueError(f"{where}: index {index!r} is not an integer")
            if not 0 <= index < len(gold_ids):
                raise ValueError(f"{where}: index {index} outside 0..{len(gold_ids) - 1}")
        elif "id" in record:
            index = position_of_id.get(str(record["id"]))
            if index is None:
                raise ValueError(f"{where}: id {record['id']!r} is not in the gold data")
        else:
            raise ValueError(f"{where}: needs an 'index' or an 'id' key")
        if found[index]:
            raise ValueError(f"{where}: a second prediction for example {index}")
        aligned[index] = parse(record["prediction"], where)
        found[index] = True
    missing = [index for index, is_found in enumerate(found) if not is_found]
    if missing:
        raise ValueError(
            f"{path}: no prediction for {len(missing)} of {len(gold_ids)} examples "
            f"(first missing index: {missing[0]})"
        )
    return aligned


def _score_tagging(
    spec: TaskSpec, gold_path: Path | str, predictions_path: Path | str
) -> dict[str, float]:
    gold = spec.read(gold_path)
    predicted = read_tagging(predictions_path)
    if len(predicted) != len(gold):
        raise ValueError(
            f"{predictions_path}: {len(predicted)} sentences, the gold file {gold_path} has "
            f"{len(gold)}"
        )
    for gold_sentence, predicted_sentence in zip(gold, predicted, strict=True):
        _check_same_tokens(gold_sentence, predicted_sentence, predictions_path)
    return METRIC_SETS[spec.metrics](
        [sentence.tags for sentence in predicted], [sentence.tags for sentence in gold]
    )


def _check_same_tokens(gold: TaggedSentence, predicted: TaggedSentence, path: Path | str) -> None:
    if predicted.tokens != gold.tokens:
        raise ValueError(
            f"{at(path, predicted.line)}: the sentence's tokens differ from the gold sentence "
            f"at line {gold.line}"
        )


def _score_qa(
    spec: TaskSpec, gold_path: Path | str, predictions_path: Path | str
) -> dict[str, float]:
    references = gold_answers(spec.read(gold_path))
    predictions = read_json(predictions_path)
    if not isinstance(predictions, dict) or not all(
        isinstance(answer, str) for answer in predictions.values()
    ):
        raise ValueError(f"{predictions_path}: expected a JSON object {{question_id: answer_text}}")
    num_missing = sum(question_id not in predictions for question_id in references)
    if num_missing:
        logger.warning("%s: %d questions unanswered, scored 0", predictions_path, num_missing)
    num_unknown = sum(question_id not in references for question_id in predictions)
    if num_unknown:
        logger.warning("%s: %d ids not in the gold data, ignored", predictions_path, num_unknown)
    return squad_em_f1(predictions, references)


_FAMILY_SCORERS = {
    "classification": _score_classification,
    "multiple-choice": _score_multiple_choice,
    "tagging": _score_tagging,
    "qa": _score_qa,
}
