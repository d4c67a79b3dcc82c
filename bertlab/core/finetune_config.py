"""Fine-tuning's configuration dataclasses: how task examples become inputs (`TaskDataConfig`)
and the fine-tuning run's settings (`FinetuneConfig`), with the learning-rate schedules it may
choose. Torch-free, beside the architecture and pre-training's configs in `bertlab.core.config`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskDataConfig:
    """How task examples become model inputs. Defaults are google-research/bert's flags
    (`run_classifier.py` max_seq_length 128; `run_squad.py` 384/128/64/20/30)."""

    max_seq_length: int = 128  # run_classifier.py; SQuAD uses `squad_max_seq_length`
    squad_max_seq_length: int = 384  # run_squad.py max_seq_length
    doc_stride: int = 128  # run_squad.py: pieces between the starts of two context windows
    max_query_length: int = 64  # run_squad.py: question pieces kept
    n_best_size: int = 20  # run_squad.py: starts and ends considered per window
    max_answer_length: int = 30  # run_squad.py: longest answer, in pieces

    def __post_init__(self) -> None:
        for name in (
            "max_seq_length",
            "squad_max_seq_length",
            "doc_stride",
            "max_query_length",
            "n_best_size",
            "max_answer_length",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"TaskDataConfig.{name} must be a positive integer, got {value!r}")
        if self.max_seq_length < 3:  # [CLS] piece [SEP]
            raise ValueError(f"max_seq_length must be at least 3, got {self.max_seq_length}")


# Fine-tuning learning-rate schedules (`bertlab.training.optim.finetune_schedule` builds them):
# BERT's linear warmup and decay, ULMFiT's slanted triangular rates (Howard & Ruder 2018, eq. 3)
# and a constant rate after the warmup.
LINEAR_SCHEDULE, SLANTED_TRIANGULAR_SCHEDULE, CONSTANT_SCHEDULE = (
    "linear",
    "slanted-triangular",
    "constant",
)
SCHEDULES = (LINEAR_SCHEDULE, SLANTED_TRIANGULAR_SCHEDULE, CONSTANT_SCHEDULE)
STLR_CUT_FRAC = 0.1  # ULMFiT Sec. 3.2: the fraction of the steps over which the rate rises
STLR_RATIO = 32.0  # ULMFiT Sec. 3.2: how much smaller the lowest rate is than the peak
WARMUP_PROPORTION = 0.1  # run_classifier.py: linear warmup over 10% of the steps


@dataclass(frozen=True)
class FinetuneConfig:
    """How a task head is trained. Defaults follow the BERT paper Sec. 4 and Appendix A.3 (batch 16
    or 32; Adam learning rate 5e-5, 3e-5 or 2e-5; 2 to 4 epochs) and google-research/bert's
    `run_classifier.py` (warmup proportion 0.1, weight decay 0.01, gradient clipping at 1.0)."""

    learning_rate: float = 2e-5  # paper A.3: one of 5e-5, 3e-5, 2e-5
    batch_size: int = 32  # paper A.3: 16 or 32; examples per optimizer step
    num_train_epochs: int = 3  # paper A.3: 2, 3 or 4
    warmup_proportion: float = WARMUP_PROPORTION  # of the linear and constant schedules
    weight_decay: float = 0.01  # Google's AdamWeightDecayOptimizer
    max_grad_norm: float = 1.0  # Google's optimization.py: clip_by_global_norm(grads, 1.0)
    gradient_accumulation_steps: int = 1  # micro-batches of batch_size // steps each
    eval_batch_size: int = 64  # inference only: no gradients, so twice the training batch fits
    early_stopping_patience: int = 0  # epochs without a better dev score before stopping; 0: off
    do_freeze_encoder: bool = False  # feature-based use (paper Sec. 5.3): only the head trains
    freeze_layers: int = 0  # embeddings and the first K encoder layers frozen
    # Fine-tuning strategies (docs/finetuning.md#fine-tuning-strategies). Layer-wise decay D: the
    # rate of layer l of L is learning_rate * D**(L - l), the embeddings' D**L, the pooler's and
    # the task layer's learning_rate (ULMFiT's discriminative fine-tuning divides by 2.6 per
    # layer, D = 1/2.6; ELECTRA fine-tunes with 0.8, Sun et al. 2019 BERT with 0.95). 1: off.
    layerwise_lr_decay: float = 1.0
    schedule: str = LINEAR_SCHEDULE  # one of SCHEDULES
    cut_frac: float = STLR_CUT_FRAC  # slanted-triangular only
    stlr_ratio: float = STLR_RATIO  # slanted-triangular only
    # ULMFiT Sec. 3.2: the task layer trains alone in epoch 1, then one more layer group per
    # epoch from the top (the top layer with the pooler, ..., the first layer, the embeddings).
    do_gradual_unfreezing: bool = False
    # Keras' staged recipe: the first N epochs train the task layer alone (the encoder frozen),
    # then the encoder is unfrozen (less the `freeze_layers` bottom) with a fresh optimizer and
    # schedule at the full rate. 0: off.
    head_warmup_epochs: int = 0
    seed: int = 42  # run_classifier.py / transformers default seed
    precision: str = "auto"  # see core.precision.PRECISIONS
    log_every_steps: int = 10  # a training record in metrics.jsonl every this many steps

    def __post_init__(self) -> None:
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be positive, got {self.learning_rate!r}")
        for name in ("batch_size", "num_train_epochs", "gradient_accumulation_steps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"FinetuneConfig.{name} must be a positive integer, got {value!r}")
        for name in ("eval_batch_size", "log_every_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"FinetuneConfig.{name} must be positive")
        if self.batch_size % self.gradient_accumulation_steps:
            raise ValueError(
                f"batch_size {self.batch_size} is not divisible by gradient_accumulation_steps "
                f"{self.gradient_accumulation_steps}"
            )
        if not 0.0 <= self.warmup_proportion < 1.0:
            raise ValueError(f"warmup_proportion must be in [0, 1), got {self.warmup_proportion}")
        if self.weight_decay < 0 or self.max_grad_norm <= 0:
            raise ValueError("weight_decay must be >= 0 and max_grad_norm > 0")
        if self.early_stopping_patience < 0 or self.freeze_layers < 0:
            raise ValueError("early_stopping_patience and freeze_layers must be >= 0")
        if self.do_freeze_encoder and self.freeze_layers:
            raise ValueError("give do_freeze_encoder or freeze_layers, not both")
        self._check_strategy()

    def _check_strategy(self) -> None:
        """The fine-tuning strategy's fields, alone and together with the freezing flags."""
        if not 0.0 < self.layerwise_lr_decay <= 1.0:
            raise ValueError(f"layerwise_lr_decay must be in (0, 1], got {self.layerwise_lr_decay}")
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"unknown schedule {self.schedule!r}; choose one of {', '.join(SCHEDULES)}"
            )
        if not 0.0 < self.cut_frac < 1.0:
            raise ValueError(f"cut_frac must be in (0, 1), got {self.cut_frac}")
        if not self.stlr_ratio >= 1.0:
            raise ValueError(f"stlr_ratio must be at least 1, got {self.stlr_ratio}")
        is_slanted = self.schedule == SLANTED_TRIANGULAR_SCHEDULE
        if not is_slanted and (self.cut_frac, self.stlr_ratio) != (STLR_CUT_FRAC, STLR_RATIO):
            raise ValueError(
                f"cut_frac and stlr_ratio shape the {SLANTED_TRIANGULAR_SCHEDULE} schedule, "
                f"not {self.schedule!r}"
            )
        if is_slanted and self.warmup_proportion != WARMUP_PROPORTION:
            raise ValueError(
                f"the {SLANTED_TRIANGULAR_SCHEDULE} schedule rises over cut_frac, not over "
                f"warmup_proportion ({self.warmup_proportion})"
            )
        epochs = self.head_warmup_epochs
        if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 0:
            raise ValueError(f"head_warmup_epochs must be a non-negative integer, got {epochs!r}")
        if epochs and epochs >= self.num_train_epochs:
            raise ValueError(
                f"head_warmup_epochs {epochs} leaves none of the {self.num_train_epochs} epochs "
                "to train the encoder (to train the task layer alone, freeze the encoder)"
            )
        if self.do_gradual_unfreezing and epochs:
            raise ValueError("give do_gradual_unfreezing or head_warmup_epochs, not both")
        if self.do_freeze_encoder:
            wanted = [
                name
                for name, is_set in (
                    ("do_gradual_unfreezing", self.do_gradual_unfreezing),
                    ("head_warmup_epochs", bool(epochs)),
                    ("layerwise_lr_decay", self.layerwise_lr_decay != 1.0),
                )
                if is_set
            ]
            if wanted:
                raise ValueError(
                    f"do_freeze_encoder trains the task layer alone: {', '.join(wanted)} "
                    "would change nothing"
                )

    @property
    def micro_batch_size(self) -> int:
        """Examples per forward pass: the batch split over the accumulation steps."""
        return self.batch_size // self.gradient_accumulation_steps


# --- the defaults by model size -------------------------------------------------------------------


@dataclass(frozen=True)
class WidthDefaults:
    """The learning rate and epochs that fine-tuning takes, when not given, for models up to
    `max_hidden_size` wide: what `PretrainedBert.fit` and `bertlab finetune` both use."""

    max_hidden_size: int | None  # None: any wider model
    learning_rate: float
    num_train_epochs: int | None  # None: the task's own (BERT A.3: 3 for every bertlab task)
    model: str  # the models of this width, in words
    source: str  # where the values come from

    def why(self, hidden_size: int) -> str:
        """The choice in words, for the run's output."""
        return f"the defaults for a model {hidden_size} wide ({self.model}; {self.source})"


# Smallest first; a model wider than the last row takes BERT_BASE_DEFAULTS. docs/models.md's table
# of fine-tuning defaults is this one (a test compares them).
FINETUNE_DEFAULTS_BY_WIDTH = (
    # BERT-Tiny (2 x 128): the demo's rate and epochs (2e-4 x 3 epochs stayed at the majority).
    WidthDefaults(128, 1e-3, 4, "BERT-Tiny", "the demo's"),
    # BERT-mini (4 x 256): measured on SST-2 for the shipped model and its random twin (3e-4: no
    # seed learned one class; 1e-3 and 5e-4: one seed in three did).
    WidthDefaults(256, 3e-4, 4, "BERT-mini", "measured on SST-2"),
    # BERT-small (4 x 512) and BERT-medium (8 x 512): NOT measured here. A rate between mini's and
    # base's, from the grid of Google's smaller BERT models (google-research/bert README, "Smaller
    # BERT Models": 3e-4, 1e-4, 5e-5 or 3e-5, 4 epochs).
    WidthDefaults(
        512, 1e-4, 4, "BERT-small, BERT-medium", "between mini's and base's; not measured"
    ),
)
# BERT-base and larger: the paper's grid (Appendix A.3: 5e-5, 3e-5 or 2e-5 for 2 to 4 epochs).
BERT_BASE_DEFAULTS = WidthDefaults(
    None, FinetuneConfig.learning_rate, None, "BERT-base or larger", "the BERT paper's, A.3"
)


def width_defaults(hidden_size: int) -> WidthDefaults:
    """The row of FINETUNE_DEFAULTS_BY_WIDTH for a model `hidden_size` wide."""
    for row in FINETUNE_DEFAULTS_BY_WIDTH:
        if row.max_hidden_size is not None and hidden_size <= row.max_hidden_size:
            return row
    return BERT_BASE_DEFAULTS
