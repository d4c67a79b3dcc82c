"""Readers and feature builders for the fine-tuning task families, one file per family.

Readers (pure Python, no torch): `classification` (GLUE TSV, ChnSentiCorp, users' CSV/TSV/JSONL),
`ner` (CoNLL-2003 and BIO/IOB/BMES column files), `squad` (SQuAD v1.1/v2.0 JSON) and
`multiple_choice` (SWAG CSV, JSON Lines). `registry.TASKS` maps task names to readers, labels and
metrics; `scoring.score` scores a predictions file against gold data.
"""

from bertlab.data.tasks.classification import (
    ColumnSpec,
    Example,
    label_set,
    read_classification,
    read_glue,
)
from bertlab.data.tasks.multiple_choice import (
    MultipleChoiceExample,
    read_multiple_choice,
    read_swag,
)
from bertlab.data.tasks.ner import TaggedSentence, read_conll, read_tagging, to_iob2
from bertlab.data.tasks.registry import TASKS, TaskSpec, get_task
from bertlab.data.tasks.scoring import score
from bertlab.data.tasks.squad import Answer, SquadExample, read_squad

__all__ = [
    "TASKS",
    "Answer",
    "ColumnSpec",
    "Example",
    "MultipleChoiceExample",
    "SquadExample",
    "TaggedSentence",
    "TaskSpec",
    "get_task",
    "label_set",
    "read_classification",
    "read_conll",
    "read_glue",
    "read_multiple_choice",
    "read_squad",
    "read_swag",
    "read_tagging",
    "score",
    "to_iob2",
]
