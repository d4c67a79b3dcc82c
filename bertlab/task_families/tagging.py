"""Token tagging: one label per word, read from its first piece."""

# Shapes: B batch, L sequence length, C labels.

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bertlab.core.atomic import write_text
from bertlab.core.config import BertConfig
from bertlab.core.metrics import METRIC_SETS, OUTSIDE_TAG
from bertlab.data.tasks.encoding import encode_tagging, word_labels
from bertlab.data.tasks.files import at, existing_file, require_examples, text_lines
from bertlab.data.tasks.ner import DOCUMENT_MARKER, TaggedSentence
from bertlab.network.heads import BertForTask, BertForTokenClassification
from bertlab.task_families.base import Predictions, Task, token_labels
from bertlab.tokenizer.wordpiece import Tokenizer


class TaggingTask(Task):
    """Token tagging: each word takes the label of its first piece (BERT Sec. 4.3)."""

    head_class = BertForTokenClassification
    reduce = staticmethod(token_labels)

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
        return BertForTokenClassification(
            config, id2label=dict(enumerate(label_names)), **self.head_kwargs()
        )

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

    def classes(
        self, predictions: Predictions, examples: Sequence
    ) -> tuple[list[str], list[str]] | None:
        """Every word's tag: a tagger that tags every word O has learned one class."""
        predicted = [tag for sentence in predictions for tag in sentence]
        return predicted, [tag for sentence in examples for tag in sentence.tags]

    def write(
        self,
        predictions: Predictions,
        examples: Sequence,
        source: Path,
        out: Path | str,
        details: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        """The source file's lines with the predicted tag appended to each token line."""
        tags = iter(tag for sentence in predictions for tag in sentence)
        lines = []
        with text_lines(source) as file:
            for line in file:
                line = line.rstrip("\r\n")
                columns = line.split()
                is_token = bool(columns) and columns[0] != DOCUMENT_MARKER
                lines.append(f"{line} {next(tags)}" if is_token else line)
        write_text(out, "\n".join(lines) + "\n")


def read_token_lines(path: Path | str) -> list[TaggedSentence]:
    """Sentences of a column file's first column (blank lines between sentences, `-DOCSTART-`
    lines skipped), with every tag O: the input of tagging prediction, labelled or not.

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: the file holds no token.
    """
    path = existing_file(path)
    sentences, tokens, first_line = [], [], 0
    with text_lines(path) as file:
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
