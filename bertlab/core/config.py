"""Configuration dataclasses: the architecture and pre-training (fine-tuning's are in
`bertlab.core.finetune_config`).

`BertConfig` describes the architecture only. Its field names and defaults are those of Hugging Face
BERT's `config.json`, so a bertlab directory and a `transformers` directory share one config file.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bertlab.core.atomic import write_json

logger = logging.getLogger(__name__)

# The longest training time taken, in seconds: a year. bertlab's runs take minutes to days; a
# longer one is a mistyped unit (h for s) or a run that would never finish.
MAX_TRAINING_SECONDS = 365 * 24 * 3600.0


def check_training_time(name: str, seconds: float) -> None:
    """Refuse a training time that could never finish: infinite, or longer than a year
    (`MAX_TRAINING_SECONDS`).

    Raises:
        ValueError: naming `name`, the time in hours and the bound.
    """
    if not seconds <= MAX_TRAINING_SECONDS:
        raise ValueError(
            f"{name} must be at most a year ({MAX_TRAINING_SECONDS / 3600:,.0f} h), got "
            f"{seconds / 3600:.4g} h: a run that long would never finish"
        )


# Keys that transformers writes into every config.json but that carry no architecture for bertlab.
# They are accepted silently; anything else unknown is logged and kept in `extra` for round trips.
_HF_BOOKKEEPING_KEYS = frozenset(
    {
        "model_type",
        "architectures",
        "transformers_version",
        "dtype",
        "torch_dtype",
        "use_cache",
        "is_decoder",
        "add_cross_attention",
        "bos_token_id",
        "eos_token_id",
        "tie_word_embeddings",
        "position_embedding_type",
        "gradient_checkpointing",
        "classifier_dropout",
        "id2label",
        "label2id",
        "problem_type",
        "num_labels",
        "output_past",
        "directionality",
        "pooler_fc_size",
        "pooler_num_attention_heads",
        "pooler_num_fc_layers",
        "pooler_size_per_head",
        "pooler_type",
    }
)

# Google's released BERT sizes (Turc et al. 2019, "Well-Read Students Learn Better", and the
# BERT README): name -> (num_hidden_layers L, hidden_size H, num_attention_heads A); I = 4H.
PRESETS: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
}

FEED_FORWARD_MULTIPLIER = 4  # BERT paper Sec. 3: "the feed-forward/filter size to be 4H"

SUPPORTED_ACTIVATIONS = ("gelu", "gelu_new", "relu")


def read_json_object(path: str | Path) -> dict[str, Any]:
    """Read a JSON file that must hold an object (config.json and the like).

    Raises:
        FileNotFoundError: the file is missing.
        ValueError: it is not valid JSON, or not an object.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"file not found: {path}")
    try:
        values = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from error
    if not isinstance(values, dict):
        raise ValueError(f"{path} must hold a JSON object")
    return values


@dataclass(frozen=True)
class BertConfig:
    """Architecture only. Field names and defaults match HF BERT's config.json (bert-base)."""

    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"  # exact erf GELU, not the tanh approximation
    hidden_dropout_prob: float = 0.1  # probability of dropping
    attention_probs_dropout_prob: float = 0.1  # probability of dropping an attention weight
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    # bertlab's one addition: left-to-right attention (BERT Table 5 "LTR", GPT's objective).
    is_causal: bool = False
    # Unknown config.json keys, kept so that a round trip loses nothing.
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        positive = (
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
            "type_vocab_size",
        )
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"BertConfig.{name} must be a positive integer, got {value!r}")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(
                f"hidden_size {self.hidden_size} not divisible by {self.num_attention_heads} heads"
            )
        for name in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"BertConfig.{name} must be in [0, 1), got {value!r}")
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise ValueError(
                f"hidden_act {self.hidden_act!r} is not supported; "
                f"use one of {SUPPORTED_ACTIVATIONS}"
            )
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"pad_token_id {self.pad_token_id} outside the vocabulary (size {self.vocab_size})"
            )

    @property
    def head_size(self) -> int:
        """D = H // N, the size of one attention head."""
        return self.hidden_size // self.num_attention_heads

    # --- presets -------------------------------------------------------------------------------

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> BertConfig:
        """A Google release size by name (`tiny`, `mini`, `small`, `medium`, `base`, `large`).

        Any field can be overridden, e.g. `BertConfig.from_preset("mini", vocab_size=8000)`.
        """
        if name not in PRESETS:
            raise ValueError(f"unknown model size {name!r}; choose one of {', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        values: dict[str, Any] = {
            "num_hidden_layers": layers,
            "hidden_size": hidden,
            "num_attention_heads": heads,
            "intermediate_size": FEED_FORWARD_MULTIPLIER * hidden,
        }
        values.update(overrides)
        return cls(**values)

    @classmethod
    def tiny(cls, **overrides: Any) -> BertConfig:
        """BERT-Tiny: L2/H128/A2."""
        return cls.from_preset("tiny", **overrides)

    @classmethod
    def mini(cls, **overrides: Any) -> BertConfig:
        """BERT-Mini: L4/H256/A4."""
        return cls.from_preset("mini", **overrides)

    @classmethod
    def small(cls, **overrides: Any) -> BertConfig:
        """BERT-Small: L4/H512/A8."""
        return cls.from_preset("small", **overrides)

    @classmethod
    def medium(cls, **overrides: Any) -> BertConfig:
        """BERT-Medium: L8/H512/A8."""
        return cls.from_preset("medium", **overrides)

    @classmethod
    def base(cls, **overrides: Any) -> BertConfig:
        """BERT-Base: L12/H768/A12."""
        return cls.from_preset("base", **overrides)

    @classmethod
    def large(cls, **overrides: Any) -> BertConfig:
        """BERT-Large: L24/H1024/A16."""
        return cls.from_preset("large", **overrides)

    # --- config.json round trip ------------------------------------------------------------------

    def replace(self, **changes: Any) -> BertConfig:
        """A copy with some fields changed (configs are immutable)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The HF `config.json` fields, unknown keys read earlier and `model_type`.

        `is_causal` is also written as `is_decoder`, the flag `transformers` reads for
        left-to-right self-attention, so a causal checkpoint stays causal there too.
        """
        values = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"
        }
        values.update(self.extra)
        values["model_type"] = "bert"
        values["is_decoder"] = self.is_causal
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> BertConfig:
        """Build from a `config.json` dict. Unknown keys are logged and kept in `extra`."""
        if values.get("model_type", "bert") != "bert":
            raise ValueError(f"not a BERT config: model_type is {values['model_type']!r}")
        if values.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError(
                "only absolute position embeddings are supported, got "
                f"{values['position_embedding_type']!r}"
            )
        known = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        kwargs = {k: v for k, v in values.items() if k in known}
        extra = {
            k: v for k, v in values.items() if k not in known and k not in _HF_BOOKKEEPING_KEYS
        }
        if extra:
            logger.info("config.json keys unknown to bertlab kept as-is: %s", sorted(extra))
        # HF's decoder flag is the same left-to-right attention as bertlab's `is_causal`.
        if values.get("is_decoder") and "is_causal" not in values:
            kwargs["is_causal"] = True
        return cls(**kwargs, extra=extra)

    def to_json_file(self, path: str | Path, **additional: Any) -> None:
        """Write `config.json`; `additional` adds keys such as `architectures`."""
        values = self.to_dict()
        values.update(additional)
        write_json(path, values, sort_keys=True)

    @classmethod
    def from_json_file(cls, path: str | Path) -> BertConfig:
        """Read a `config.json` written by bertlab or by `transformers`."""
        return cls.from_dict(read_json_object(path))


# --- pre-training data -------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectiveData:
    """What the pre-training data of one objective holds: the data layer's half of the
    objective's entry (`training.pretraining.objectives.OBJECTIVES` holds the rest: its model, loss,
    statistics, final save and model card). It lives here because `data/` may not import
    `training/`."""

    # Sentence pairs A [SEP] B with a next-sentence label (BERT Sec. 3.1, NSP); otherwise single
    # segments, which may also be packed across sentence and document boundaries.
    is_pair: bool
    # Left-to-right targets: every next token, nothing masked, and the model attends to the left
    # only; otherwise masked positions and their original tokens (masked LM, BERT Sec. 3.1).
    is_causal: bool


# Training objectives: BERT's masked LM plus next-sentence prediction (paper Sec. 3.1), masked LM
# alone on full-length single segments (RoBERTa Sec. 4.2), left-to-right LM for the causal model
# option, and ELECTRA's replaced-token detection over masked-LM inputs (`bertlab.network.electra`).
OBJECTIVE_DATA = {
    "mlm+nsp": ObjectiveData(is_pair=True, is_causal=False),
    "mlm": ObjectiveData(is_pair=False, is_causal=False),
    "clm": ObjectiveData(is_pair=False, is_causal=True),
    "electra": ObjectiveData(is_pair=False, is_causal=False),
}
OBJECTIVES = tuple(OBJECTIVE_DATA)  # the names `--objective` takes


def objective_data(name: str) -> ObjectiveData:
    """What the data of objective `name` holds.

    Raises:
        ValueError: an unknown objective, naming the known ones.
    """
    if name not in OBJECTIVE_DATA:
        raise ValueError(f"unknown objective {name!r}; choose one of {tuple(OBJECTIVE_DATA)}")
    return OBJECTIVE_DATA[name]


@dataclass(frozen=True)
class PretrainDataConfig:
    """How pre-training examples are built. Defaults are google-research/bert
    `create_pretraining_data.py`'s flags and the BERT paper's values."""

    max_seq_length: int = 128  # Google's flag default (the paper trains 90% of steps at 128)
    short_seq_prob: float = 0.1  # Google: probability of a shorter target length
    mlm_probability: float = 0.15  # BERT paper Sec. 3.1: mask 15% of the tokens
    max_predictions_per_seq: int = 20  # Google's flag default for max_seq_length 128
    objective: str = "mlm+nsp"  # one of OBJECTIVES
    do_whole_word_mask: bool = False  # Google's flag of the same name
    random_next_prob: float = 0.5  # BERT paper Sec. 3.1: 50% of B sentences are random (NotNext)
    # mlm/clm only: fill every sequence to the full length, across sentence and document
    # boundaries ([SEP] between documents; RoBERTa's FULL-SENTENCES) instead of ending it at the
    # last whole sentence of its document that fits. short_seq_prob does not apply then.
    pack_sequences: bool = False

    def __post_init__(self) -> None:
        data = objective_data(self.objective)  # raises ValueError for an unknown name
        if self.max_seq_length < 5:  # [CLS] A [SEP] B [SEP] with one token each
            raise ValueError(f"max_seq_length must be at least 5, got {self.max_seq_length}")
        if self.max_predictions_per_seq < 1:
            raise ValueError(
                f"max_predictions_per_seq must be positive, got {self.max_predictions_per_seq}"
            )
        for name in ("short_seq_prob", "random_next_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"PretrainDataConfig.{name} must be in [0, 1], got {value!r}")
        if not 0.0 < self.mlm_probability < 1.0:
            raise ValueError(f"mlm_probability must be in (0, 1), got {self.mlm_probability!r}")
        if self.pack_sequences and data.is_pair:
            raise ValueError("pack_sequences needs objective mlm or clm (NSP keeps sentence pairs)")


@dataclass(frozen=True)
class ElectraConfig:
    """The `electra` objective's settings (Clark et al. 2020, `bertlab.network.electra`)."""

    generator_size: float = 0.25  # ELECTRA Table 7 (Small): the generator has 1/4 of the width
    rtd_weight: float = 50.0  # ELECTRA Sec. 3: lambda, the replaced-token detection loss weight

    def __post_init__(self) -> None:
        if not 0 < self.generator_size <= 1:
            raise ValueError(f"generator_size must be in (0, 1], got {self.generator_size!r}")
        if not self.rtd_weight > 0:
            raise ValueError(f"rtd_weight must be positive, got {self.rtd_weight!r}")

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)


# Pre-training learning-rate schedules (`training.pretrain_schedules.pretrain_schedule` builds
# them), each over the run's budget: its optimizer steps (`max_steps`) or its training time
# (`max_time`, which a `--budget` run sets). Names and what they do; torch-free, for `bertlab
# pretrain --help`.
LINEAR_WARMUP_DECAY, ONE_CYCLE = "linear", "one-cycle"
PRETRAIN_SCHEDULES = {
    LINEAR_WARMUP_DECAY: "linear warmup and decay (BERT's)",
    ONE_CYCLE: "cosine rise and fall (1cycle)",
}


@dataclass(frozen=True)
class PretrainConfig:
    """How the pre-training loop runs. Defaults are the BERT paper's (Appendix A.2: Adam, learning
    rate 1e-4, weight decay 0.01, warmup over the first 1% of the steps, linear decay) and Google's
    `run_pretraining.py` (gradient clipping at 1.0). Give `max_steps` or `max_time` (seconds)."""

    learning_rate: float = 1e-4  # paper A.2
    weight_decay: float = 0.01  # paper A.2
    warmup_proportion: float = 0.01  # paper A.2: 10,000 of 1,000,000 steps
    schedule: str = LINEAR_WARMUP_DECAY  # one of PRETRAIN_SCHEDULES, over max_steps or max_time
    batch_size: int = 32  # examples per optimizer step in each process
    gradient_accumulation_steps: int = 1  # micro-batches of batch_size // steps each
    max_grad_norm: float = 1.0  # Google's optimization.py: clip_by_global_norm(grads, 1.0)
    max_steps: int | None = None  # optimizer steps
    max_time: float | None = None  # seconds of training (evaluation and checkpoints excluded)
    seed: int = 0
    log_every_steps: int = 10  # a training record in metrics.jsonl
    eval_every_steps: int = 500  # held-out MLM/NSP evaluation (and at the end)
    eval_examples: int = 512  # held-out examples evaluated each time
    checkpoint_every_steps: int | None = None
    checkpoint_every_minutes: float | None = None
    keep_checkpoints: int = 2  # the most recent ones kept
    precision: str = "auto"  # see core.precision.PRECISIONS
    do_compile: bool = False  # torch.compile the model
    # Processes building batches beside the training process (0: inline); the batches, their
    # order and the checkpoints' positions are the same for any number (`training.pretrain_loop`).
    num_workers: int = 1
    # Tokens after which a held-out accuracy still at the unigram level is reported as the
    # unigram plateau (docs/reliability.md): the budget recipe's BERT-mini leaves it after about
    # 5M tokens at 40% masking on 2 CPU cores (docs/budget.md#why-each-choice).
    plateau_min_tokens: int = 5_000_000

    def __post_init__(self) -> None:
        if (self.max_steps is None) == (self.max_time is None):
            raise ValueError("give exactly one of max_steps and max_time")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"max_steps must be positive, got {self.max_steps}")
        if self.max_time is not None and not self.max_time > 0:
            raise ValueError(f"max_time must be positive, got {self.max_time}")
        if self.max_time is not None:
            check_training_time("max_time", self.max_time)
        for name in ("batch_size", "gradient_accumulation_steps", "log_every_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"PretrainConfig.{name} must be positive")
        for name in (
            "eval_every_steps",
            "eval_examples",
            "num_workers",
            "keep_checkpoints",
            "plateau_min_tokens",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"PretrainConfig.{name} must not be negative")
        for name in ("checkpoint_every_steps", "checkpoint_every_minutes"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"PretrainConfig.{name} must be positive, got {value}")
        if self.batch_size % self.gradient_accumulation_steps:
            raise ValueError(
                f"batch_size {self.batch_size} is not divisible by gradient_accumulation_steps "
                f"{self.gradient_accumulation_steps}"
            )
        if not self.learning_rate > 0 or self.weight_decay < 0 or not self.max_grad_norm > 0:
            raise ValueError("need learning_rate > 0, weight_decay >= 0 and max_grad_norm > 0")
        if not 0.0 <= self.warmup_proportion < 1.0:
            raise ValueError(f"warmup_proportion must be in [0, 1), got {self.warmup_proportion}")
        if self.schedule not in PRETRAIN_SCHEDULES:
            raise ValueError(
                f"unknown schedule {self.schedule!r}; choose one of {', '.join(PRETRAIN_SCHEDULES)}"
            )

    def budget_used(self, step: int, elapsed: float) -> float:
        """The fraction of the budget used after `step` optimizer steps and `elapsed` seconds of
        training: of `max_time` if given, else of `max_steps`."""
        if self.max_time is not None:
            return elapsed / self.max_time
        return step / self.max_steps

    @property
    def micro_batch_size(self) -> int:
        """Examples per forward pass: the batch split over the accumulation steps."""
        return self.batch_size // self.gradient_accumulation_steps
