"""Multiple-choice examples: SWAG CSV and a generic JSON Lines format.

SWAG (Zellers et al. 2018) CSV columns, found by header name: `video-id, fold-ind, startphrase,
sent1, sent2, gold-source, ending0..ending3, label` (the released files also start with an unnamed
index column). As in BERT's SWAG setup (paper Sec. 4.4), the context is `sent1` and each choice is
`sent2` followed by one ending. SWAG's test file has no `label` column; its examples get None.

Generic JSON Lines: `{"id"?, "context"?, "question"?, "choices": [...], "label"?: int}` per
line; `question` is the start shared by every choice (SWAG's `sent2`). Every example of a file
must have the same number of choices.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from bertlab.data.tasks.files import at, existing_file, read_jsonl, require_examples, text_lines

SWAG_NUM_CHOICES = 4
SWAG_COLUMNS = ("fold-ind", "sent1", "sent2") + tuple(
    f"ending{index}" for index in range(SWAG_NUM_CHOICES)
)


@dataclass(frozen=True)
class MultipleChoiceExample:
    """A context, the start shared by the choices, the choice endings and the gold choice index."""

    example_id: str
    context: str
    start: str
    endings: tuple[str, ...]
    label: int | None = None


def read_swag(path: Path | str) -> list[MultipleChoiceExample]:
    """Read a SWAG CSV file (standard CSV quoting).

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: a missing column, a short row or a label outside 0..3, naming file and line;
            an empty file.
    """
    path = existing_file(path)
    examples = []
    with text_lines(path, newline="") as file:
        reader = csv.DictReader(file)
        header = reader.fieldnames or []
        missing = [column for column in SWAG_COLUMNS if column not in header]
        if missing:
            raise ValueError(f"{at(path, 1)}: SWAG columns {missing} missing; header is {header}")
        has_label = "label" in header
        for row in reader:
            if any(row[column] is None for column in SWAG_COLUMNS):
                raise ValueError(f"{at(path, reader.line_num)}: the row has too few columns")
            label = None
            if has_label:
                label = _label(row["label"], SWAG_NUM_CHOICES, path, reader.line_num)
            examples.append(
                MultipleChoiceExample(
                    example_id=row.get("video-id", "") + "-" + row["fold-ind"],
                    context=row["sent1"],
                    start=row["sent2"],
                    endings=tuple(row[f"ending{index}"] for index in range(SWAG_NUM_CHOICES)),
                    label=label,
                )
            )
    return require_examples(examples, path)


def read_multiple_choice(path: Path | str) -> list[MultipleChoiceExample]:
    """Read the generic multiple-choice JSON Lines format (see the module docstring).

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: malformed JSON, missing or empty `choices`, a choice count differing from the
            first example's, or a label outside the choices, naming file and line.
    """
    examples = []
    num_choices = None
    for line_number, record in read_jsonl(path):
        choices = record.get("choices")
        if not isinstance(choices, list) or len(choices) < 2:
            raise ValueError(f"{at(path, line_number)}: 'choices' must list at least 2 texts")
        if not all(isinstance(choice, str) for choice in choices):
            raise ValueError(f"{at(path, line_number)}: every choice must be a string")
        num_choices = num_choices or len(choices)
        if len(choices) != num_choices:
            raise ValueError(
                f"{at(path, line_number)}: {len(choices)} choices, the file's first example "
                f"has {num_choices}"
            )
        label = record.get("label")
        if label is not None:
            label = _label(label, num_choices, path, line_number)
        examples.append(
            MultipleChoiceExample(
                example_id=str(record.get("id", len(examples))),
                context=str(record.get("context", "")),
                start=str(record.get("question", "")),
                endings=tuple(choices),
                label=label,
            )
        )
    return require_examples(examples, path)


def _label(value: object, num_choices: int, path: Path, line_number: int) -> int:
    try:
        label = int(value)
    except (TypeError, ValueError):
        label = -1
    if not 0 <= label < num_choices or isinstance(value, float | bool):
        raise ValueError(
            f"{at(path, line_number)}: label {value!r} is not a choice index 0..{num_choices - 1}"
        )
    return label
