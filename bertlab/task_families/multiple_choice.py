"""Multiple choice: one score per (context, choice) pair, softmax over the choices."""

# Shapes: B batch, K choices.

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from bertlab.data.tasks.encoding import encode_multiple_choice
from bertlab.network.heads import BertForMultipleChoice
from bertlab.task_families.base import Predictions, Task
from bertlab.tokenizer.wordpiece import Tokenizer


class MultipleChoiceTask(Task):
    """Score K (context, choice) pairs, softmax over the choices (BERT Sec. 4.4)."""

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

    def text_fields(self, example: Any) -> dict[str, Any] | None:
        return {
            "context": example.context,
            "start": example.start,
            "choices": list(example.endings),
        }
