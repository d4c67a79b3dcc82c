"""The budget recipe: what `bertlab pretrain --budget 60m` trains, so that a laptop hour pays off.

A time budget fixes the compute, so every choice is about learning the most per second on the
machine at hand: a small model (BERT-Tiny's shape for short budgets, BERT-mini's from half an
hour, which reads fewer tokens but transfers better), a vocabulary trained on the user's corpus
and kept small (the output softmax is the largest single cost of a small model), sequences no
longer than the budget can afford, a high peak learning rate on a one-cycle schedule that ends at
zero when the time is up, more masking than BERT's 15% and no dropout while pre-training
(Cramming, Geiping & Goldstein 2022; Wettig et al. 2023). `docs/budget.md` gives the
measurements on a 2-core CPU behind each value.

The recipe only fills in what the user did not set: every flag given on the command line wins.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertlab.core.atomic import write_json
from bertlab.core.config import ONE_CYCLE

if TYPE_CHECKING:
    from bertlab.network.bert import BertEmbeddings

FINETUNE_DROPOUT = 0.1  # BERT's dropout, restored in the final model's config for fine-tuning
POSITION_INITS = ("normal", "sinusoidal")  # see init_positions
# From this budget on, BERT-mini (4 x 256) instead of BERT-Tiny (2 x 128): after 30 and 60 minutes
# it reads half to a third of tiny's tokens but fine-tunes better, CoNLL-2003 by far; below it tiny
# learns more per second and a 12-minute mini stays on the unigram plateau (docs/budget.md,
# "Why each choice").
LARGER_MODEL_MINUTES = 30.0
LARGER_MODEL = "mini"
LARGER_MODEL_LEARNING_RATE = 1e-3  # beat 2e-3 for mini (docs/budget.md#why-each-choice)


@dataclass(frozen=True)
class BudgetRecipe:
    """Everything `--budget` decides. Field names follow the `bertlab pretrain` flags."""

    vocab_size: int = 8000
    model_size: str = "tiny"  # a `BertConfig.from_preset` name; see budget_recipe
    max_seq_length: int = 128
    batch_size: int = 32
    objective: str = "mlm"
    pack_sequences: bool = True
    mlm_probability: float = 0.4  # leaves the unigram plateau first: docs/budget.md#why-each-choice
    learning_rate: float = 2e-3
    warmup_proportion: float = 0.1
    schedule: str = ONE_CYCLE
    dropout: float = 0.0
    position_init: str = "sinusoidal"
    # English corpora carry a few thousand rare CJK ideographs; kept whole, they would take a
    # quarter of an 8,000-piece vocabulary. Chinese corpora keep every ideograph seen twice.
    min_ideograph_frequency: dict[str, int] | None = None

    def ideograph_frequency(self, lang: str) -> int:
        table = self.min_ideograph_frequency or {"en": 200, "zh": 2}
        return table.get(lang, 1)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# --- on an accelerator ----------------------------------------------------------------------------
# The CPU table above was measured round by round on 2 cores. A GPU computes 50-100 times more in
# the same minutes, so there the recipe plans from the machine: it measures what each shape can
# train per second (`budget_plan`) and takes the largest shape that still reads
# TOKENS_PER_PARAMETER tokens per parameter in the budget (Hoffmann et al. 2022's compute-optimal
# ratio), each shape with the settings of ACCELERATOR_RECIPES. docs/budget.md#on-a-gpu gives the
# measurements behind them.
TOKENS_PER_PARAMETER = 20.0
ACCELERATOR_SHAPES = ("tiny", "mini", "small", "medium", "base", "large")  # smallest first


@dataclass(frozen=True)
class ShapeSettings:
    """A shape's batch, peak learning rate, warm-up share and masking rate on an accelerator."""

    batch_size: int
    learning_rate: float
    warmup_proportion: float
    mlm_probability: float


# The post-LN BERT layout (transformers' keys) tolerates a lower peak the deeper and wider it is:
# BERT-base at 7e-4 sat on the unigram plateau for a whole 3-minute GPU run; at 1e-4 and 2e-4 it
# was still crawling along it after 855 steps of 256 (2026-11-26, docs/budget.md#on-a-gpu), so the
# large shapes take batches of 128: twice the optimizer steps in the same minutes, which is what
# counts early. The small shapes keep the CPU recipe's 40% masking, as every shape does.
ACCELERATOR_RECIPES: dict[str, ShapeSettings] = {
    "tiny": ShapeSettings(128, 2e-3, 0.1, 0.4),
    "mini": ShapeSettings(128, 2e-3, 0.1, 0.4),  # 2 GPU-minutes: 33.5% held-out accuracy
    "small": ShapeSettings(128, 1e-3, 0.1, 0.4),
    "medium": ShapeSettings(128, 5e-4, 0.1, 0.4),
    "base": ShapeSettings(128, 2e-4, 0.1, 0.4),
    "large": ShapeSettings(128, 1e-4, 0.1, 0.4),
}


def accelerator_recipe(model_size: str) -> BudgetRecipe:
    """The recipe of `model_size` on an accelerator: ACCELERATOR_RECIPES' settings, the rest as
    on the CPU (vocabulary, packed MLM, one-cycle, no dropout, sinusoidal positions)."""
    if model_size not in ACCELERATOR_RECIPES:
        raise ValueError(f"no accelerator recipe for model size {model_size!r}")
    settings = ACCELERATOR_RECIPES[model_size]
    return BudgetRecipe(
        model_size=model_size,
        batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        warmup_proportion=settings.warmup_proportion,
        mlm_probability=settings.mlm_probability,
    )


def choose_shape(
    seconds: float, tokens_per_second: dict[str, float], parameters: dict[str, int]
) -> str:
    """The largest shape that reads TOKENS_PER_PARAMETER tokens per parameter in `seconds` at
    its measured speed; the smallest measured one when none does.

    Args:
        seconds: the budget.
        tokens_per_second: measured training speed by shape (ACCELERATOR_SHAPES names).
        parameters: each shape's parameter count.
    """
    measured = [shape for shape in ACCELERATOR_SHAPES if shape in tokens_per_second]
    if not measured:
        raise ValueError("no shape was measured")
    enough = [
        shape
        for shape in measured
        if tokens_per_second[shape] * seconds >= TOKENS_PER_PARAMETER * parameters[shape]
    ]
    return enough[-1] if enough else measured[0]


def budget_recipe(seconds: float, model_size: str | None = None) -> BudgetRecipe:
    """The recipe for a pre-training budget of `seconds` on a CPU.

    BERT-Tiny's shape below LARGER_MODEL_MINUTES, BERT-mini's (at a peak of 1e-3) from there on.
    Measured for budgets of 4 to 60 minutes on 2 cores (docs/budget.md); longer budgets get the
    60-minute recipe, which is a safe start but not a measured optimum. A `model_size` given by
    the user replaces the recipe's shape and keeps the budget's other settings.
    """
    if not seconds > 0:
        raise ValueError(f"the budget must be positive, got {seconds}")
    recipe = BudgetRecipe()
    if seconds >= LARGER_MODEL_MINUTES * 60:
        recipe = BudgetRecipe(model_size=LARGER_MODEL, learning_rate=LARGER_MODEL_LEARNING_RATE)
    return recipe if model_size is None else replace(recipe, model_size=model_size)


def init_positions(embeddings: BertEmbeddings, position_init: str, std: float) -> None:
    """Start a new model's position embeddings as `position_init` (one of POSITION_INITS) says:
    "normal" keeps the model's own random initialization, "sinusoidal" the Transformer's sinusoids
    at standard deviation `std` (the config's initializer_range)."""
    if position_init == "sinusoidal":
        embeddings.init_sinusoidal_positions(std)


def restore_finetune_dropout(model_dir: str | Path, dropout: float = FINETUNE_DROPOUT) -> None:
    """Set the dropout of a model pre-trained without it back to BERT's value in its config.json,
    so fine-tuning (here or in `transformers`) regularizes as usual."""
    path = Path(model_dir) / "config.json"
    values = json.loads(path.read_text(encoding="utf-8"))
    values["hidden_dropout_prob"] = values["attention_probs_dropout_prob"] = dropout
    write_json(path, values, sort_keys=True)
