"""What a strategies experiment runs: `StrategiesConfig`, the strategies and the rows, declared
without torch so that `bertlab experiment strategies --help` lists them fast.

`bertlab experiment strategies` (`bertlab.apps.experiments.strategies`) runs it; the report
(`bertlab.apps.experiments.strategies_report`) names the same strategies from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bertlab.apps.experiments.grid import GridTask
from bertlab.apps.experiments.transfer_rows import FINETUNE_BATCH_SIZE, FINETUNE_LEARNING_RATE, ROWS
from bertlab.core.finetune_config import SLANTED_TRIANGULAR_SCHEDULE, FinetuneConfig

FINETUNE_DIR = "finetune"
BERT_DEFAULT = "bert"  # the strategy every other one is judged against
ULMFIT_LAYER_DECAY = 1 / 2.6  # ULMFiT Sec. 3.2: "η^{l-1} = η^l / 2.6 works well"
ELECTRA_LAYER_DECAY = 0.8  # ELECTRA (Clark et al. 2020), Appendix, fine-tuning: Small and Base
# Keras' recipe trains the head on the frozen base before fine-tuning; the guide ("Transfer
# learning & fine-tuning", Chollet) leaves how long to the user. Two of ten epochs leave the
# encoder most of the run.
KERAS_HEAD_EPOCHS = 2


@dataclass(frozen=True)
class Strategy:
    """One way to fine-tune: the `FinetuneConfig` fields it sets over BERT's defaults."""

    label: str  # the table's column
    description: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "description": self.description, "fields": dict(self.fields)}


STRATEGIES: dict[str, Strategy] = {
    BERT_DEFAULT: Strategy(
        "BERT default", "every layer at one rate, linear warmup over 10% and linear decay"
    ),
    "layerwise": Strategy(
        f"layer-wise {ELECTRA_LAYER_DECAY:g}",
        f"layer-wise learning-rate decay {ELECTRA_LAYER_DECAY:g} (ELECTRA's), otherwise BERT's",
        {"layerwise_lr_decay": ELECTRA_LAYER_DECAY},
    ),
    "ulmfit": Strategy(
        "ULMFiT",
        "ULMFiT's three: decay 1/2.6 per layer, slanted triangular rates, gradual unfreezing",
        {
            "layerwise_lr_decay": ULMFIT_LAYER_DECAY,
            "schedule": SLANTED_TRIANGULAR_SCHEDULE,
            "do_gradual_unfreezing": True,
        },
    ),
    "keras": Strategy(
        "Keras staged",
        f"Keras' staged recipe: the head alone for {KERAS_HEAD_EPOCHS} epochs, then every layer "
        "with a fresh optimizer and schedule",
        {"head_warmup_epochs": KERAS_HEAD_EPOCHS},
    ),
    "frozen": Strategy(
        "frozen encoder",
        "feature-based (--freeze-encoder): the encoder frozen, only the task layer trains",
        {"do_freeze_encoder": True},
    ),
}

# The rows: the transfer experiment's tasks with 1,000 labels (SST-2 also with 500), each read
# ten times as its sst2-1k row is.
LOW_LABEL_EXAMPLES = 1000
LOW_LABEL_EPOCHS = 10
_TRANSFER_ROWS = {row.name: row for row in ROWS["en"]}


def _low_label(name: str, transfer_row: str, examples: int = LOW_LABEL_EXAMPLES) -> GridTask:
    return replace(
        _TRANSFER_ROWS[transfer_row],
        name=name,
        epochs=LOW_LABEL_EPOCHS,
        max_train_examples=examples,
    )


STRATEGY_ROWS = (
    _low_label("sst2-500", "sst2-1k", examples=500),
    _low_label("sst2-1k", "sst2-1k"),
    _low_label("mrpc-1k", "mrpc"),
    _low_label("rte-1k", "rte"),
    _low_label("conll2003-1k", "conll2003"),
)


# StrategiesConfig fields that are no settings: where the inputs and OUT are (the rows' data is
# checked per row, `flows.check_split`), what a later run may add to (seeds, the rows and
# strategies chosen), and fields recorded under other names: `learning_rate` as
# `finetune_learning_rate`, `model` and `row_models` as each row's model in `models`.
NOT_SETTINGS = (
    "data_dir",
    "out",
    "seeds",
    "tasks",
    "strategies",
    "learning_rate",
    "model",
    "row_models",
)


@dataclass(frozen=True)
class StrategiesConfig:
    """What one comparison runs.

    Attributes:
        data_dir: the shared data layout (`glue/SST-2/train.tsv`, ...).
        out: the experiment directory.
        model: the pre-trained encoder every row fine-tunes, unless `row_models` names another.
        row_models: row name -> its own encoder (for SST-2, one pre-trained on reviews).
        seeds: one run per strategy and seed.
        tasks: names in STRATEGY_ROWS; None: all.
        strategies: names in STRATEGIES; BERT's default is always among them.
        learning_rate: every strategy's top rate (the transfer experiment's for BERT-mini).
    """

    data_dir: Path
    out: Path
    model: Path
    row_models: Mapping[str, Path] = field(default_factory=dict)
    seeds: tuple[int, ...] = (1, 2, 3, 4, 5)
    tasks: tuple[str, ...] | None = None
    strategies: tuple[str, ...] = tuple(STRATEGIES)
    learning_rate: float = FINETUNE_LEARNING_RATE

    def __post_init__(self) -> None:
        rows = {row.name for row in STRATEGY_ROWS}
        unknown = sorted((set(self.tasks or ()) | set(self.row_models)) - rows)
        if unknown:
            raise ValueError(f"unknown row(s) {unknown}; choose from {sorted(rows)}")
        if self.tasks is not None and not self.tasks:
            raise ValueError("tasks is empty; None runs every row")
        strategies = set(self.strategies)
        if len(strategies) != len(self.strategies) or strategies - set(STRATEGIES):
            raise ValueError(
                f"strategies must be distinct names of {', '.join(STRATEGIES)}, "
                f"got {list(self.strategies)}"
            )
        if BERT_DEFAULT not in strategies:
            raise ValueError(f"strategies need {BERT_DEFAULT!r}: the others are judged against it")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        if not self.learning_rate > 0:
            raise ValueError(f"the learning rate must be positive, got {self.learning_rate}")

    def selected_rows(self) -> tuple[GridTask, ...]:
        return tuple(row for row in STRATEGY_ROWS if self.tasks is None or row.name in self.tasks)

    def model_for(self, row: GridTask) -> Path:
        return Path(self.row_models.get(row.name, self.model))

    def finetune_config(self, strategy: str, row: GridTask, seed: int) -> FinetuneConfig:
        """The run's settings: the strategy's fields over the shared budget."""
        return FinetuneConfig(
            learning_rate=self.learning_rate,
            batch_size=FINETUNE_BATCH_SIZE,
            num_train_epochs=row.num_epochs,
            seed=seed,
            **STRATEGIES[strategy].fields,
        )
