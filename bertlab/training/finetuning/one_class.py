"""A fine-tuning that learned one class: every dev prediction is the same label.

Such a run scores exactly that label's share of the dev set (for example accuracy 0.564 on a dev
set that is 56.4% positive) and looks like a result; `one_class_collapse` tells it apart, and
`OneClassCollapse.warning` says so in one line. `finetune_task` runs the check on the best
epoch's dev predictions and records it in result.json (docs/reliability.md, "A fine-tuning that
learned one class"). Training labels that are all one class can teach nothing else:
`one_class_training` words the warning that fine-tuning gives before it trains on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

# What usually makes a fine-tuning predict one class, in the order to try them.
LIKELY_CAUSES = (
    "a learning rate too high or too low (try 2e-5 .. 1e-4), a pre-trained model still on the "
    "unigram plateau (see its held-out MLM accuracy), too few steps"
)


@dataclass(frozen=True)
class OneClassCollapse:
    """Every dev prediction is `label`; `share` is that label's share of the gold dev labels
    (the score of always predicting it)."""

    label: str
    share: float

    def describe(self) -> str:
        """Example: "every dev prediction is 'positive' (56.4% of the dev set)"."""
        return f"every dev prediction is {self.label!r} ({self.share:.1%} of the dev set)"

    def warning(self, seed: int) -> str:
        """The one line a run logs for its seed."""
        return (
            f"seed {seed}: {self.describe()}: the model learned only one class; likely causes: "
            f"{LIKELY_CAUSES}"
        )

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "share": self.share}

    @classmethod
    def from_json(cls, value: dict[str, Any] | None) -> OneClassCollapse | None:
        """The collapse of a result.json's "one_class" field (None, or absent in older runs:
        no collapse)."""
        return None if value is None else cls(value["label"], value["share"])


def one_class_collapse(predicted: Sequence[str], gold: Sequence[str]) -> OneClassCollapse | None:
    """The collapse of dev predictions, or None when they use more than one label or the gold
    labels are themselves all one label (then one predicted label is right, not a failure).

    Args:
        predicted: the predicted label of every dev unit (an example, or a word when tagging).
        gold: the gold label of every dev unit.

    Example: predicted ["pos", "pos", "pos", "pos"], gold ["pos", "neg", "pos", "pos"]
    -> OneClassCollapse("pos", 0.75).
    """
    labels = set(predicted)
    if len(labels) != 1 or len(set(gold)) < 2:
        return None
    (label,) = labels
    return OneClassCollapse(str(label), sum(value == label for value in gold) / len(gold))


def one_class_training(gold: Sequence[str]) -> str | None:
    """The warning for training labels that are all one class, or None: a classifier trained on
    them can only ever predict that class.

    Example: ["pos", "pos", "pos"] -> "all 3 training labels are 'pos': ...".
    """
    labels = set(gold)
    if len(labels) != 1:
        return None
    (label,) = labels
    return (
        f"all {len(gold):,} training labels are {str(label)!r}: a classifier learns nothing "
        "from one class; give examples of at least two labels"
    )
