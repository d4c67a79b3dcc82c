"""Extractive question answering examples from SQuAD-format JSON (v1.1, and v2.0 unanswerables).

Format: `{"version", "data": [{"title", "paragraphs": [{"context", "qas": [{"id", "question",
"answers": [{"text", "answer_start"}], "is_impossible"?}]}]}]}`.

Answer positions are checked: `context[answer_start : answer_start + len(text)]` must equal the
text. When it does not but the text occurs in the context, the occurrence nearest to the given
start is used and the number of such fixes is logged. An answer whose text does not occur in its
context at all is an error (ValueError naming the file, the question id and the answer), never a
silent skip: such a file cannot train span prediction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from bertlab.data.tasks.files import read_json, require_examples

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Answer:
    """An answer text and its character offset in the context."""

    text: str
    start: int


@dataclass(frozen=True)
class SquadExample:
    """One question on one context. `answers` is empty for an unanswerable (v2.0) question."""

    id: str
    question: str
    context: str
    answers: tuple[Answer, ...]
    is_impossible: bool = False
    title: str = ""


def read_squad(path: Path | str, require_answers: bool = True) -> list[SquadExample]:
    """Read a SQuAD v1.1 or v2.0 JSON file into one example per question.

    Args:
        path: the JSON file.
        require_answers: False to accept questions without answers that are not marked
            `is_impossible` (input for prediction).

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: malformed JSON (file, line, column), a missing key, a duplicate question id,
            an answer absent from its context, a question without answers, or no questions.
    """
    document = read_json(path)
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise ValueError(f"{path}: not SQuAD format: expected an object with a 'data' list")
    examples = []
    num_fixed = 0
    for article_index, article in enumerate(document["data"]):
        title = article.get("title", "") if isinstance(article, dict) else ""
        for paragraph_index, paragraph in enumerate(_field(article, "paragraphs", path, "")):
            where = f"data[{article_index}].paragraphs[{paragraph_index}]"
            context = _field(paragraph, "context", path, where)
            for qa in _field(paragraph, "qas", path, where):
                example, fixed = _example(qa, context, title, path, where, require_answers)
                examples.append(example)
                num_fixed += fixed
    _check_unique_ids(examples, path)
    if num_fixed:
        logger.warning(
            "%s: %d answer_start offsets fixed to the nearest occurrence", path, num_fixed
        )
    return require_examples(examples, path)


def gold_answers(examples: list[SquadExample]) -> dict[str, list[str]]:
    """Question id -> gold answer texts, the references of `bertlab.core.metrics.squad_em_f1`."""
    return {example.id: [answer.text for answer in example.answers] for example in examples}


def _field(record: object, key: str, path: Path | str, where: str) -> object:
    if not isinstance(record, dict) or key not in record:
        raise ValueError(f"{path}: {where or 'an article'} has no {key!r}")
    return record[key]


def _example(
    qa: object, context: str, title: str, path: Path | str, where: str, require_answers: bool
) -> tuple[SquadExample, int]:
    question_id = str(_field(qa, "id", path, where + " question"))
    where = f"question {question_id!r} ({where})"
    question = _field(qa, "question", path, where)
    is_impossible = bool(qa.get("is_impossible", False))
    answers = [] if is_impossible else qa.get("answers", [])
    if not answers and not is_impossible and require_answers:
        raise ValueError(f"{path}: {where} has no answers and is not marked is_impossible")
    located = []
    num_fixed = 0
    for answer in answers:
        text = _field(answer, "text", path, where + " answer")
        start = _field(answer, "answer_start", path, where + " answer")
        if not isinstance(text, str) or not isinstance(start, int):
            raise ValueError(f"{path}: {where}: answer text must be a string, answer_start an int")
        found = _locate(text, start, context)
        if found is None:
            raise ValueError(f"{path}: {where}: answer {text!r} does not occur in its context")
        num_fixed += found != start
        located.append(Answer(text=text, start=found))
    example = SquadExample(
        id=question_id,
        question=question,
        context=context,
        answers=tuple(located),
        is_impossible=is_impossible,
        title=title,
    )
    return example, num_fixed


def _locate(text: str, start: int, context: str) -> int | None:
    """`start` when the text is there, else the start of its nearest occurrence, else None."""
    if context[start : start + len(text)] == text:
        return start
    occurrences = []
    position = context.find(text)
    while position != -1 and text:
        occurrences.append(position)
        position = context.find(text, position + 1)
    return min(occurrences, key=lambda found: abs(found - start)) if occurrences else None


def _check_unique_ids(examples: list[SquadExample], path: Path | str) -> None:
    seen = set()
    for example in examples:
        if example.id in seen:
            raise ValueError(f"{path}: question id {example.id!r} occurs twice")
        seen.add(example.id)
