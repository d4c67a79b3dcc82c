"""Sentence and sentence-pair classification (and regression) examples: GLUE TSV and users' files.

GLUE files are read as the GLUE download script wrote them: tab-separated, UTF-8 (MRPC's header
starts with a byte-order mark), and with no quoting at all. A field such as `"the witness"` keeps
its quote marks, which is why every TSV here is read with `csv.QUOTE_NONE`; the default CSV quoting
would swallow tabs and newlines up to the next quote mark and merge rows.

Users' files: CSV (standard quoting), TSV (no quoting, as GLUE) or JSON Lines, with the text, label
and id columns named by a `ColumnSpec`.
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bertlab.core.wording import Worded
from bertlab.data.tasks.files import at, existing_file, read_jsonl, require_examples, text_lines

Column = str | int  # a header name, or a 0-based position in files without a header


@dataclass(frozen=True)
class Example:
    """One input: a text or text pair, and its label (a label string or a float for regression).

    `label` is None in unlabeled files. `example_id` is the file's id column when one is named.
    """

    text_a: str
    text_b: str | None = None
    label: str | float | None = None
    example_id: str | None = None


@dataclass(frozen=True)
class ColumnSpec:
    """Where the fields of an `Example` are in a file.

    Columns are header names, or 0-based positions when `has_header` is False. JSON Lines files
    always use names (keys). `label=None` reads an unlabeled file (input for prediction).
    """

    text_a: Column
    text_b: Column | None = None
    label: Column | None = None
    example_id: Column | None = None
    has_header: bool = True
    is_regression: bool = False

    def named(self) -> dict[str, Column]:
        """The example fields that are read, mapped to their columns."""
        fields = {
            "text_a": self.text_a,
            "text_b": self.text_b,
            "label": self.label,
            "example_id": self.example_id,
        }
        return {field: column for field, column in fields.items() if column is not None}


# Column layouts of the GLUE train/dev files (as written by GLUE's download_glue_data.py).
GLUE_COLUMNS: dict[str, ColumnSpec] = {
    # CoLA has no header: source, label, original-label mark, sentence.
    "cola": ColumnSpec(text_a=3, label=1, has_header=False),
    "sst2": ColumnSpec(text_a="sentence", label="label"),
    "mrpc": ColumnSpec(text_a="#1 String", text_b="#2 String", label="Quality"),
    "stsb": ColumnSpec(text_a="sentence1", text_b="sentence2", label="score", is_regression=True),
    "qqp": ColumnSpec(text_a="question1", text_b="question2", label="is_duplicate"),
    "mnli": ColumnSpec(text_a="sentence1", text_b="sentence2", label="gold_label"),
    "qnli": ColumnSpec(text_a="question", text_b="sentence", label="label"),
    "rte": ColumnSpec(text_a="sentence1", text_b="sentence2", label="label"),
    "wnli": ColumnSpec(text_a="sentence1", text_b="sentence2", label="label"),
}

# The GLUE label sets; a label outside its set is an error naming the file and line.
GLUE_LABELS: dict[str, tuple[str, ...] | None] = {
    "cola": ("0", "1"),
    "sst2": ("0", "1"),
    "mrpc": ("0", "1"),
    "stsb": None,  # regression: a similarity score in [0, 5]
    "qqp": ("0", "1"),
    "mnli": ("contradiction", "entailment", "neutral"),
    "qnli": ("entailment", "not_entailment"),
    "rte": ("entailment", "not_entailment"),
    "wnli": ("0", "1"),
}

CHNSENTICORP_COLUMNS = ColumnSpec(text_a="text_a", label="label")

_DELIMITED_FORMATS = {".tsv": ("\t", csv.QUOTE_NONE), ".txt": ("\t", csv.QUOTE_NONE)}
_DELIMITED_FORMATS[".csv"] = (",", csv.QUOTE_MINIMAL)
_JSONL_SUFFIXES = (".jsonl", ".json")


def read_glue(task: str, path: Path | str, with_labels: bool = True) -> list[Example]:
    """Read a GLUE TSV file: train, dev, MNLI dev_matched/dev_mismatched, or test (no labels).

    Args:
        task: one of `GLUE_COLUMNS` (cola sst2 mrpc stsb qqp mnli qnli rte wnli).
        path: the TSV file.
        with_labels: False for GLUE test files, which have no label column.

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: a missing column, a short row, or a label outside the task's label set,
            naming file and line; an empty file.
    """
    if task not in GLUE_COLUMNS:
        raise ValueError(f"unknown GLUE task {task!r}; known: {', '.join(GLUE_COLUMNS)}")
    columns = GLUE_COLUMNS[task]
    if not with_labels:
        # GLUE test files have a header and an index column; CoLA's names its text "sentence".
        columns = ColumnSpec(text_a="sentence") if task == "cola" else columns
        columns = dataclasses.replace(columns, label=None)
    return read_delimited(path, columns, "\t", csv.QUOTE_NONE, GLUE_LABELS[task])


def suffix_for(head: str) -> str:
    """The suffix `read_classification` needs for text that comes without a file name (standard
    input), from its beginning: JSON Lines when it starts with `{`, CSV when its first line has a
    comma and no tab, else TSV.

    Example: '{"text": "a"}' -> ".jsonl"; 'text,label' -> ".csv"; 'text\tlabel' -> ".tsv".
    """
    head = head.removeprefix("\ufeff")
    if head.lstrip().startswith("{"):
        return ".jsonl"
    first_line = head.split("\n", 1)[0]
    return ".csv" if "," in first_line and "\t" not in first_line else ".tsv"


def read_classification(
    path: Path | str, columns: ColumnSpec, labels: Sequence[str] | None = None
) -> list[Example]:
    """Read a user's CSV, TSV or JSON Lines file, the format chosen by the file suffix.

    `.csv`: comma-separated with standard quoting. `.tsv`/`.txt`: tab-separated, no quoting.
    `.jsonl`/`.json`: one JSON object per line, columns are keys.

    Args:
        path: the file.
        columns: where the texts, the label and the id are.
        labels: the label set seen in training; at evaluation a label outside it is an error
            naming the file and line. None accepts any label (use `label_set` afterwards).

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: unknown suffix, missing column, unknown label, bad number, empty file.
    """
    path = existing_file(path)
    suffix = path.suffix.lower()
    if suffix in _JSONL_SUFFIXES:
        return _read_jsonl_examples(path, columns, labels)
    if suffix in _DELIMITED_FORMATS:
        delimiter, quoting = _DELIMITED_FORMATS[suffix]
        return read_delimited(path, columns, delimiter, quoting, labels)
    known = ", ".join([*_DELIMITED_FORMATS, *_JSONL_SUFFIXES])
    raise ValueError(f"{path}: unknown file type {suffix!r}; expected one of {known}")


def read_chnsenticorp(path: Path | str) -> list[Example]:
    """ChnSentiCorp TSV (`label<TAB>text_a`, header row; 1 positive, 0 negative)."""
    return read_delimited(path, CHNSENTICORP_COLUMNS, "\t", csv.QUOTE_NONE, ("0", "1"))


def label_set(examples: Iterable[Example]) -> tuple[str, ...]:
    """The sorted distinct labels; numerically sorted when every label is an integer."""
    labels = {example.label for example in examples if example.label is not None}
    if all(isinstance(label, str) and label.lstrip("-").isdigit() for label in labels):
        return tuple(sorted(labels, key=int))
    return tuple(sorted(labels, key=str))


def read_delimited(
    path: Path | str,
    columns: ColumnSpec,
    delimiter: str,
    quoting: int,
    labels: Sequence[str] | None = None,
) -> list[Example]:
    """Read a delimited file with the `csv` module; line numbers in errors are physical lines."""
    path = existing_file(path)
    if not columns.has_header and not all(isinstance(c, int) for c in columns.named().values()):
        raise ValueError(f"{path}: a file without a header needs column positions, not names")
    with text_lines(path, newline="") as file:
        reader = csv.reader(file, delimiter=delimiter, quoting=quoting)
        try:
            examples = _delimited_examples(reader, columns, labels, path)
        except csv.Error as error:
            raise ValueError(f"{at(path, reader.line_num)}: {error}") from None
    return require_examples(examples, path)


def _delimited_examples(
    reader: Iterable[list[str]], columns: ColumnSpec, labels: Sequence[str] | None, path: Path
) -> list[Example]:
    """Every row as an example. A row must have as many fields as the header (without a
    header: as the first row); more fields would mean a stray delimiter has shifted a text
    into another column, fewer a cut-off line."""
    examples = []
    positions = None if columns.has_header else columns.named()
    width = None
    for row in reader:
        if not row:
            continue
        if width is None:
            width, first_line = len(row), reader.line_num
        elif len(row) != width:
            what = "the header" if columns.has_header else f"line {first_line}"
            raise ValueError(
                f"{at(path, reader.line_num)}: {len(row)} fields where {what} has {width}; "
                "a delimiter inside a text must be quoted (.csv) or removed (.tsv)"
            )
        if positions is None:
            positions = _header_positions(row, columns, path, reader.line_num)
            continue
        fields = {}
        for field, position in positions.items():
            if position >= len(row):
                raise ValueError(
                    f"{at(path, reader.line_num)}: {len(row)} columns, but column "
                    f"{position} ({field}) was asked for"
                )
            fields[field] = row[position]
        examples.append(_example(fields, columns, labels, path, reader.line_num))
    return examples


def _header_positions(
    header: list[str], columns: ColumnSpec, path: Path, line_number: int
) -> dict[str, int]:
    names = [name.strip() for name in header]
    positions = {}
    for field, column in columns.named().items():
        if isinstance(column, int):
            positions[field] = column
        elif column in names:
            positions[field] = names.index(column)
        else:
            raise _missing_column(at(path, line_number), column, field, names, columns)
    return positions


def _missing_column(
    where: str, column: str, field: str, names: list[str], columns: ColumnSpec
) -> ValueError:
    """The error for a column (or JSON key) that is not there, suggesting the closest one
    that no other field reads: `ColumnSpec(text_a='sentence')`, `--text-column 'sentence'`."""
    taken = set(columns.named().values())
    free = [name for name in names if name not in taken]
    closest = difflib.get_close_matches(column, free, n=1, cutoff=0.0)
    # `field` (text_a, text_b, label) selects the words: `text_a` or `--text-column`.
    template = "{where}: no column {column} ({" + field + "}) in the file; columns are {names}"
    if closest:
        template += "; to read {closest}, give {set_" + field + "}{closest}{end_set}"
    return ValueError(
        Worded(
            template,
            where=where,
            column=repr(column),
            names=names,
            closest=repr(closest[0]) if closest else "",
        )
    )


def _read_jsonl_examples(
    path: Path, columns: ColumnSpec, labels: Sequence[str] | None
) -> list[Example]:
    examples = []
    for line_number, record in read_jsonl(path):
        fields = {}
        for field, key in columns.named().items():
            if key not in record:
                raise _missing_column(at(path, line_number), key, field, list(record), columns)
            fields[field] = record[key]
        examples.append(_example(fields, columns, labels, path, line_number))
    return require_examples(examples, path)


def _example(
    fields: dict[str, object],
    columns: ColumnSpec,
    labels: Sequence[str] | None,
    path: Path,
    line_number: int,
) -> Example:
    for field in ("text_a", "text_b"):
        if field in fields and not isinstance(fields[field], str):
            raise ValueError(f"{at(path, line_number)}: {field} is not a string: {fields[field]!r}")
    label = fields.get("label")
    if label is not None:
        label = _parse_label(label, columns.is_regression, labels, path, line_number)
    example_id = fields.get("example_id")
    return Example(
        text_a=fields["text_a"],
        text_b=fields.get("text_b"),
        label=label,
        example_id=None if example_id is None else str(example_id),
    )


def _parse_label(
    value: object,
    is_regression: bool,
    labels: Sequence[str] | None,
    path: Path,
    line_number: int,
) -> str | float:
    if is_regression:
        try:
            target = float(value)
        except (TypeError, ValueError):
            target = math.nan
        if not math.isfinite(target):  # one NaN target turns every weight into NaN
            raise ValueError(
                f"{at(path, line_number)}: regression target {value!r} is not a finite number"
            )
        return target
    label = str(value).strip()
    if labels is not None and label not in labels:
        raise ValueError(
            f"{at(path, line_number)}: label {label!r} is not one of the labels {list(labels)}"
        )
    return label
