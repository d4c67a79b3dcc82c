"""The task registry: every named task is declared here once, and everything else reads it.

A declaration says how the task's files are read (its reader, one function of this package),
which family it belongs to (the head and the prediction format, `bertlab.task_families`), its
labels, its metric set (`bertlab.core.metrics.METRIC_SETS`), where its training file lies in the
shared data layout, and its fine-tuning defaults. `bertlab finetune|evaluate|predict|score`
take `--task NAME` from here, `bertlab experiment transfer` finds its files here, and the
docs' task list is checked against it (`tests/unit/test_task_registry.py`).

The generic `classification` task needs the columns of its files (`ColumnSpec`), so it is built
by `bertlab.task_families.make_task` rather than declared; the generic `tagging`, `qa` and
`multiple-choice` tasks read fixed formats and are declared. CONTRIBUTING.md walks through
adding a task. This module imports no torch and no metric library, so `--help` stays fast.
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

FAMILIES = ("classification", "tagging", "qa", "multiple-choice")
GENERIC_CLASSIFICATION = "classification"  # built from its columns by `make_task`
# Fine-tuning defaults: google-research/bert's run_classifier.py (max_seq_length 128) and the
# BERT paper's Appendix A.3 (2 to 4 epochs).
DEFAULT_MAX_SEQ_LENGTH = 128
DEFAULT_EPOCHS = 3


@dataclass(frozen=True)
class TaskSpec:
    """How a named task is read, scored and fine-tuned by default.

    Attributes:
        name: the task name (`cola`, `conll2003`, ...).
        family: one of `FAMILIES`; decides the head and the prediction file format.
        read: path -> examples.
        labels: the fixed label list (label id = position); None for regression, for tagging
            (tags come from the training data) and for span and choice tasks.
        label_names: what each label means, in the order of `labels`, where the dataset names
            its labels (SST-2's "0" is negative); predictions, the server and its page show
            them. None where the labels are not named (the generic tasks).
        metrics: the metric set, a key of `bertlab.core.metrics.METRIC_SETS`.
        description: one line for `--help` and the docs' task list.
        is_regression: the label is a real number (STS-B).
        is_pair: examples have a second text.
        dev_files: file names of the evaluation split(s) in the task's data folder.
        lang: the language of the data ("en", "zh"); None for the generic tasks.
        train_file: the training file, relative to the shared data folder (`../shared/data`).
        max_seq_length: the default input length of fine-tuning, special tokens included.
        epochs: the task's own number of fine-tuning epochs, which wins over the defaults by
            model width; None (every built-in task): the width's (`FINETUNE_DEFAULTS_BY_WIDTH`),
            else `DEFAULT_EPOCHS`.
        split_by_sentence: the training file holds every phrase of its sentences (SST-2), so
            held-out splits must hold out whole sentences (`bertlab.data.tasks.splits`).
    """

    name: str
    family: str
    read: Callable[[Path | str], list]
    labels: tuple[str, ...] | None
    metrics: str
    description: str
    label_names: tuple[str, ...] | None = None
    is_regression: bool = False
    is_pair: bool = False
    dev_files: tuple[str, ...] = ("dev.tsv",)
    lang: str | None = None
    train_file: str | None = None
    max_seq_length: int = DEFAULT_MAX_SEQ_LENGTH
    epochs: int | None = None
    split_by_sentence: bool = False

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"task {self.name}: unknown family {self.family!r}; one of {FAMILIES}")
        if self.label_names is not None and len(self.label_names) != len(self.labels or ()):
            raise ValueError(
                f"task {self.name}: {len(self.label_names)} label names for the labels "
                f"{self.labels}"
            )

    def label_name(self, label: str) -> str | None:
        """The name of `label` (SST-2: "1" -> "positive"); None where labels are not named."""
        if self.label_names is None or label not in self.labels:
            return None
        return self.label_names[self.labels.index(label)]


# The GLUE-standard metric set of each task (GLUE paper, Table 1).
_GLUE_METRICS = {
    "cola": "mcc",
    "sst2": "accuracy",
    "mrpc": "accuracy_f1",
    "stsb": "pearson_spearman",
    "qqp": "accuracy_f1",
    "mnli": "accuracy",
    "qnli": "accuracy",
    "rte": "accuracy",
    "wnli": "accuracy",
}
_GLUE_FOLDERS = {
    "cola": "CoLA",
    "sst2": "SST-2",
    "mrpc": "MRPC",
    "stsb": "STS-B",
    "qqp": "QQP",
    "mnli": "MNLI",
    "qnli": "QNLI",
    "rte": "RTE",
    "wnli": "WNLI",
}


# What the GLUE labels mean, in the order of `GLUE_LABELS` (the label names of the GLUE tasks'
# descriptions, as the `glue` dataset on the Hugging Face Hub names them); MNLI, QNLI and RTE
# files hold the names themselves. STS-B is regression.
_GLUE_LABEL_NAMES = {
    "cola": ("unacceptable", "acceptable"),
    "sst2": ("negative", "positive"),
    "mrpc": ("not_equivalent", "equivalent"),
    "stsb": None,
    "qqp": ("not_duplicate", "duplicate"),
    "mnli": ("contradiction", "entailment", "neutral"),
    "qnli": ("entailment", "not_entailment"),
    "rte": ("entailment", "not_entailment"),
    "wnli": ("not_entailment", "entailment"),
}


def _glue(name: str, description: str, is_pair: bool = True, **defaults) -> TaskSpec:
    labels = GLUE_LABELS[name]
    dev_files = ("dev_matched.tsv", "dev_mismatched.tsv") if name == "mnli" else ("dev.tsv",)
    return TaskSpec(
        name=name,
        family="classification",
        read=functools.partial(read_glue, name),
        labels=labels,
        metrics=_GLUE_METRICS[name],
        description=description,
        label_names=_GLUE_LABEL_NAMES[name],
        is_regression=labels is None,
        is_pair=is_pair,
        dev_files=dev_files,
        lang="en",
        train_file=f"glue/{_GLUE_FOLDERS[name]}/train.tsv",
        **defaults,
    )


def _declare(*specs: TaskSpec) -> dict[str, TaskSpec]:
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names) or GENERIC_CLASSIFICATION in names:
        raise ValueError(f"task names must be distinct and not {GENERIC_CLASSIFICATION!r}")
    return {spec.name: spec for spec in specs}


TASKS: dict[str, TaskSpec] = _declare(
    _glue("cola", "CoLA: is the sentence grammatical?", is_pair=False),
    _glue("sst2", "SST-2: movie-review sentiment", is_pair=False, split_by_sentence=True),
    _glue("mrpc", "MRPC: are the two sentences paraphrases?"),
    _glue("stsb", "STS-B: how similar are the two sentences, 0 to 5"),
    _glue("qqp", "QQP: are the two questions duplicates?"),
    _glue("mnli", "MNLI: entailment, contradiction or neutral"),
    _glue("qnli", "QNLI: does the sentence answer the question?"),
    _glue("rte", "RTE: does the first sentence entail the second?"),
    _glue("wnli", "WNLI: Winograd pronoun entailment"),
    TaskSpec(
        "chnsenticorp",
        "classification",
        read_chnsenticorp,
        ("0", "1"),
        "accuracy",
        "ChnSentiCorp: Chinese hotel, laptop and book review sentiment",
        label_names=("negative", "positive"),
        lang="zh",
        train_file="chnsenticorp/train.tsv",
    ),
    TaskSpec(
        "conll2003",
        "tagging",
        read_conll,
        None,
        "entity_f1",
        "CoNLL-2003: English named entities (PER, LOC, ORG, MISC)",
        dev_files=("valid.txt",),
        lang="en",
        train_file="conll2003/train.txt",
    ),
    TaskSpec(
        "wnut17",
        "tagging",
        read_tagging,
        None,
        "entity_f1",
        "WNUT-17: emerging entities in social media text (6 types)",
        dev_files=("dev.conll",),
        lang="en",
        train_file="wnut17/train.conll",
    ),
    TaskSpec(
        "wikiann",
        "tagging",
        read_tagging,
        None,
        "entity_f1",
        "WikiANN (PAN-X) English: PER, LOC, ORG in Wikipedia sentences",
        lang="en",
        train_file="wikiann_en/train.tsv",
    ),
    TaskSpec(
        "resume-ner",
        "tagging",
        read_tagging,
        None,
        "entity_f1",
        "Resume NER: Chinese named entities in resumes (8 types, BMES)",
        dev_files=(),
        lang="zh",
        train_file="resume_ner/train.char.bmes",
    ),
    TaskSpec(
        "squad",
        "qa",
        read_squad,
        None,
        "squad",
        "SQuAD v1.1: the answer's span in a paragraph",
        dev_files=("dev-v1.1.json",),
        lang="en",
        train_file="squad_v1.1/train-v1.1.json",
    ),
    TaskSpec(
        "swag",
        "multiple-choice",
        read_swag,
        None,
        "accuracy",
        "SWAG: the most plausible continuation of four",
        dev_files=("val.csv",),
        lang="en",
    ),
    TaskSpec(
        "tagging",
        "tagging",
        read_tagging,
        None,
        "entity_f1",
        "your own tagged file: `token ... TAG` per line (BIO, IOB2 or BMES)",
        dev_files=(),
    ),
    TaskSpec(
        "qa",
        "qa",
        read_squad,
        None,
        "squad",
        "your own questions in SQuAD's JSON layout",
        dev_files=(),
    ),
    TaskSpec(
        "multiple-choice",
        "multiple-choice",
        read_multiple_choice,
        None,
        "accuracy",
        "your own multiple-choice JSON Lines",
        dev_files=(),
    ),
)


def get_task(name: str) -> TaskSpec:
    """The registered task, or a ValueError listing the known names."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known: {', '.join(task_names())}")
    return TASKS[name]


def task_names() -> list[str]:
    """Every name `--task` accepts: the registered tasks and the generic `classification`."""
    return [*TASKS, GENERIC_CLASSIFICATION]
