"""The transfer experiment's data: its rows' splits and the tasks' own text.

Each row of the experiment's table (`transfer_rows.ROWS`) is a `grid.GridTask`: a registered task
(`bertlab.data.tasks.registry`) with the experiment's fine-tuning budget; its training file is
found by the registry's `train_file` under the data directory, and its train, dev and test splits
are carved from that file (`task_splits`, for the ablation and strategies experiments too).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from bertlab.apps.experiments.grid import GridTask
from bertlab.apps.experiments.transfer_rows import DEV_FRACTION, TEST_FRACTION
from bertlab.core.atomic import write_text
from bertlab.core.finetune_config import TaskDataConfig
from bertlab.data.tasks import TaggedSentence
from bertlab.data.tasks.splits import holdout_split, phrase_roots, sentence_split, subsample
from bertlab.task_families import Task, make_task
from bertlab.training.finetuning.finetune import TaskData

MAX_DEV_EXAMPLES = 2000  # beyond this, a dev split only costs time
TASK_TEXT_GROUP = 16  # examples per document of the task text (1 with next-sentence prediction)


def task_splits(data_dir: Path, row: GridTask) -> tuple[Task, TaskData, list]:
    """(task, TaskData with train and dev, test examples), carved from the training file, then
    subsampled to the row's sizes."""
    task = make_task(row.task, data=TaskDataConfig(max_seq_length=row.input_length))
    examples = task.read_gold(data_dir / row.path)
    label_names = task.label_names(examples)
    if row.spec.split_by_sentence:
        rest, test = sentence_split(examples, TEST_FRACTION)
        train, dev = sentence_split(rest, DEV_FRACTION)
    else:
        rest, test = holdout_split(examples, TEST_FRACTION, task.holdout_group)
        train, dev = holdout_split(rest, DEV_FRACTION, task.holdout_group)
    dev = subsample(dev, MAX_DEV_EXAMPLES)
    train = subsample(train, row.max_train_examples)
    dev = subsample_in_order(dev, row.max_dev_examples)
    test = subsample_in_order(test, row.max_test_examples)
    return task, TaskData(train, dev, label_names), test


def subsample_in_order(examples: list, size: int | None) -> list:
    """The first `size` of a fixed shuffle (`splits.subsample`), kept in file order."""
    if size is None or size >= len(examples):
        return examples
    kept = {id(example) for example in subsample(examples, size)}
    return [example for example in examples if id(example) in kept]


def task_text(data_dir: Path, rows: Sequence[GridTask], lang: str) -> dict[str, list[list[str]]]:
    """The unlabeled text of the rows' training parts, as lines per example, by row.

    Only the part the models are fine-tuned on, never a dev or test example. A row that
    fine-tunes on a subsample (sst2-1k) gives its whole training part: the text of the examples
    whose labels it does not see, as in semi-supervised learning. Rows that share a training file
    give it once. SST-2 gives its whole sentences only, not their phrases; a sentence pair gives
    two lines; a tagged sentence gives its tokens, joined with spaces (no separator in Chinese).
    """
    joiner = "" if lang == "zh" else " "
    texts: dict[str, list[list[str]]] = {}
    paths = set()
    for row in rows:
        if row.path in paths:
            continue
        paths.add(row.path)
        _, data, _ = task_splits(data_dir, replace(row, max_train_examples=None))
        examples = data.train
        if row.spec.split_by_sentence:
            roots = phrase_roots([example.text_a for example in examples])
            examples = [example for i, example in enumerate(examples) if roots[i] == i]
        lines = []
        for example in examples:
            if isinstance(example, TaggedSentence):
                lines.append([joiner.join(example.tokens)])
            else:
                lines.append([t for t in (example.text_a, example.text_b) if t and t.strip()])
        texts[row.name] = lines
    return texts


def write_task_text(
    path: Path, texts: dict[str, list[list[str]]], repeats: int, per_document: int
) -> dict[str, int]:
    """`texts`, repeated `repeats` times, in corpus format at `path`; examples per row.

    Each repeat shuffles every row's examples anew and groups them by `per_document` into
    documents (one line per sentence, a blank line between documents): TASK_TEXT_GROUP, or 1 with
    next-sentence prediction, so that a pair's two sentences are the A and B of one instance and
    B is never the unrelated example shuffled next to it. The same arguments write the same
    bytes, so a continued run finds its tokenized corpus again.
    """
    documents = []
    for repeat in range(repeats):
        for name, lines in texts.items():
            order = list(range(len(lines)))
            random.Random(f"task-text:{name}:{repeat}").shuffle(order)
            for start in range(0, len(order), per_document):
                group = order[start : start + per_document]
                documents.append("\n".join(line for i in group for line in lines[i]))
    write_text(path, "\n\n".join(documents) + "\n")
    return {name: len(lines) for name, lines in texts.items()}
