"""Extractive question answering: an answer span in strided context windows."""

# Shapes: L sequence length.

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bertlab.core.atomic import write_text
from bertlab.core.metrics import METRIC_SETS
from bertlab.data.tasks.squad import gold_answers, read_squad
from bertlab.data.tasks.squad_encoding import decode_squad, encode_squad
from bertlab.network.heads import BertForQuestionAnswering
from bertlab.task_families.base import Predictions, Task
from bertlab.tokenizer.wordpiece import Tokenizer


class QuestionAnsweringTask(Task):
    """Extractive QA over strided context windows, answers from the n-best spans (BERT Sec. 4.2)."""

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
        self,
        predictions: Predictions,
        examples: Sequence,
        source: Path,
        out: Path | str,
        details: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        write_text(out, json.dumps(predictions, ensure_ascii=False, indent=1) + "\n")
