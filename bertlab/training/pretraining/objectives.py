"""Pre-training objectives as values: one entry each in `OBJECTIVES`, which the pre-training loop
and `run_pretraining` call. Neither compares objective names (STYLE.md, "A variant is a value the
loop calls, not a name it tests").

An entry says, for its objective:

- what its data builds: `data`, its row of `bertlab.core.config.OBJECTIVE_DATA` (sentence pairs with
  a next-sentence label, masked positions, or left-to-right targets); that half lives in
  `core/config.py` because `data/` may not import `training/`;
- which model and heads it trains: `model_class`, built by `build_model` with the objective's own
  settings (`settings_class`, e.g. ELECTRA's `ElectraConfig`), causal for left-to-right targets;
- how a micro-batch's losses add up to the step's loss (`loss`) and what it measures
  (`batch_stats`, `detection_scores`, the `statistics` it logs, under `stat_names`);
- what is saved at the end (`saves`: OUT/final and, for ELECTRA, its generator and discriminator
  beside it), what that model can do (`uses`, the model card's list) and how the recipe line
  and the model card speak of it.

`Objective` serves BERT's pre-training heads (`BertForPreTraining`: masked LM, NSP, left-to-right
LM); `ReplacedTokenDetection` adds ELECTRA's discriminator (`bertlab.network.electra`).
"""

# Shapes: B batch, L sequence length, P masked positions per sequence.

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertlab.core.atomic import atomic_directory
from bertlab.core.config import (
    OBJECTIVE_DATA,
    BertConfig,
    ElectraConfig,
    ObjectiveData,
    PretrainDataConfig,
)
from bertlab.core.run_folder import FINAL_DIR
from bertlab.network.bert import BertForPreTraining, BertPreTrainedModel, PreTrainingOutput
from bertlab.network.checkpoint import load_into
from bertlab.network.electra import ElectraForPreTraining, ElectraOutput
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.pretraining.stats import (
    CAUSAL_NAMES,
    batch_stats,
    detection_scores,
    detection_stats,
)

GENERATOR_DIR = "generator"  # ELECTRA: the generator, beside the final (discriminator) model
# ELECTRA: the discriminator with its replaced-token head, in transformers' ELECTRA layout
DISCRIMINATOR_DIR = "discriminator"

# exp(this) is the largest perplexity logged: a diverging loss stays a finite number.
MAX_LOG_PERPLEXITY = 50.0
# (folder of OUT, how the trained model writes it): what an objective saves at the end.
Saves = tuple[tuple[str, Callable[[Any, Path], None]], ...]


@dataclass(frozen=True)
class StepShare:
    """One micro-batch's share of its optimizer step, for each kind of loss. The step's loss is
    a sum over the global step's targets (all micro-batches, all processes); DDP averages the
    processes' gradients, hence the factor world_size in the shares."""

    predictions: float  # its masked-LM (or next-token) targets over the step's, x world_size
    micro_batches: int  # NSP is a mean over each micro-batch's examples: averaged over these
    tokens: float  # its real tokens over the step's, x world_size


@dataclass(frozen=True)
class ModelUses:
    """What a pre-trained model of one objective can do, as its card says: the Hub's task tag,
    the bertlab commands that take it, the card's first example, and what its language-model
    head predicts (`fill-mask`, `generate`, `score`: `bertlab serve`'s views of it; none
    without such a head)."""

    pipeline_tag: str
    commands: str
    example: str
    head_uses: tuple[str, ...]


_MASKED_USES = ModelUses(
    "fill-mask",
    "`bertlab fill-mask`, `score-text` (pseudo-log-likelihood), `embed`, `neighbours`, "
    "`attention`, `finetune`",
    'bertlab fill-mask --model DIR "The capital of France is [MASK]."',
    ("fill-mask", "score"),
)
# A left-to-right model never saw a [MASK] filled from both sides: fill-mask refuses it.
_CAUSAL_USES = ModelUses(
    "text-generation",
    "`bertlab generate`, `score-text` (log-probability), `embed` (the last token's vector), "
    "`attention`, `finetune`; not `fill-mask`",
    'bertlab generate --model DIR "The capital of France is"',
    ("generate", "score"),
)
_DISCRIMINATOR_USES = ModelUses(
    "feature-extraction",
    "`bertlab embed`, `neighbours`, `attention`, `finetune` (the discriminator has no "
    "masked-LM head: not `fill-mask`)",
    'bertlab embed --model DIR --text "Paris is in France." --pooling cls --out features',
    (),
)


def language_model_uses(config: BertConfig) -> ModelUses:
    """What a model with a language-model head can do, read from its architecture: a
    left-to-right model's (`is_causal`: it generates) or a masked one's (it fills a [MASK])."""
    return _CAUSAL_USES if config.is_causal else _MASKED_USES


@dataclass(frozen=True)
class Objective:
    """One pre-training objective of BERT's pre-training heads (`BertForPreTraining`).

    Attributes:
        name: the name `--objective` takes (a key of `OBJECTIVES` and of `OBJECTIVE_DATA`).
        statistics: what a run of it logs each log step and held out, besides the total loss.
        uses: what its model (OUT/final) can do, as its model card says.
        stat_names: the logged name of a summed statistic that it names otherwise.
        model_class: the model it trains.
        settings_class: the dataclass of its own settings (one `PretrainRun` field each); None.
        saves: what it writes at the end, OUT/final first.
    """

    name: str
    statistics: tuple[str, ...]
    uses: ModelUses
    stat_names: Mapping[str, str] = field(default_factory=dict)
    model_class: type[BertPreTrainedModel] = BertForPreTraining
    settings_class: type | None = None
    saves: Saves = ((FINAL_DIR, BertForPreTraining.save_pretrained),)

    @property
    def data(self) -> ObjectiveData:
        """What its data builds: its row of `config.OBJECTIVE_DATA`."""
        return OBJECTIVE_DATA[self.name]

    @property
    def untrained_modules(self) -> tuple[str, ...]:
        """The modules of its model that its loss never reaches: without next-sentence pairs,
        the pooler and the NSP head. The loop freezes them while it trains, so that under
        DistributedDataParallel every parameter that requires a gradient gets one each step
        (`tests/unit/test_objectives.py` checks the list against a real step)."""
        return () if self.data.is_pair else ("bert.pooler", "cls.seq_relationship")

    # --- settings and model -------------------------------------------------------------------

    def setting_names(self) -> tuple[str, ...]:
        """The names of its own settings, fields of `PretrainRun` of the same names."""
        if self.settings_class is None:
            return ()
        return tuple(f.name for f in dataclasses.fields(self.settings_class))

    def settings(self, given: Mapping[str, Any]) -> Any:
        """Its own settings from `given` (name -> value, None: not chosen, the default); None
        for an objective without settings.

        Raises:
            ValueError: a bad value (from the settings' `__post_init__`).
        """
        if self.settings_class is None:
            return None
        chosen = {name: given[name] for name in self.setting_names() if given.get(name) is not None}
        return self.settings_class(**chosen)

    def model_config(self, config: BertConfig) -> BertConfig:
        """The architecture it trains: left-to-right attention for left-to-right targets."""
        return config.replace(is_causal=True) if self.data.is_causal else config

    def build_model(
        self, config: BertConfig, settings: Any, init_from: str | Path | None = None
    ) -> BertPreTrainedModel:
        """A new model of `config`, or the model `init_from` (a folder or Hub id) continues."""
        kwargs = self.model_kwargs(settings)
        if init_from is not None:
            return self.model_class.from_pretrained(init_from, config=config, **kwargs)
        return self.model_class(config, **kwargs)

    def model_kwargs(self, settings: Any) -> dict[str, Any]:
        """The keyword arguments its model class takes besides the config."""
        return {}

    def load_weights(self, model: nn.Module, weights: dict[str, torch.Tensor], source: str) -> None:
        """Load a checkpoint's `weights` into its model (a resumed run)."""
        load_into(model, weights, model.base_prefix, source=source)

    def model_key(self, config: Any) -> dict[str, Any]:
        """What of its model's config a resumed run must share (`checkpointing.setup_key`)."""
        return {
            "vocab_size": config.vocab_size,
            "hidden_size": config.hidden_size,
            "num_hidden_layers": config.num_hidden_layers,
        }

    # --- loss and statistics ------------------------------------------------------------------

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Any:
        """Its model's output on a batch of its data (`collate_pretraining`'s keys)."""
        return model(**batch)

    def loss(self, output: PreTrainingOutput, share: StepShare) -> torch.Tensor:
        """A micro-batch's part of the step's loss: masked LM (or left-to-right LM) summed over
        the step's targets, plus NSP averaged over the micro-batches."""
        loss = output.mlm_loss * share.predictions
        if output.nsp_loss is not None:
            loss = loss + output.nsp_loss / share.micro_batches
        return loss

    def batch_stats(
        self, output: PreTrainingOutput, batch: dict[str, torch.Tensor], count: int
    ) -> torch.Tensor:
        """One batch's sums in the order of `stats.STATS`, then its real tokens."""
        return batch_stats(output, batch, count)

    def detection_scores(
        self, output: PreTrainingOutput
    ) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(scores, 0/1 truths) of a held-out batch's detection, for an AUC; None: none."""
        return None

    def named(self, values: dict[str, float]) -> dict[str, float]:
        """`values` under the names it logs them by (`stat_names`); a left-to-right model's
        perplexity per piece beside its loss, so that every such model compares on it."""
        named = {self.stat_names.get(name, name): value for name, value in values.items()}
        if "lm_loss" in named:
            named["lm_perplexity"] = math.exp(min(named["lm_loss"], MAX_LOG_PERPLEXITY))
        return named

    # --- what it saves and how it is described ------------------------------------------------

    def save_final(self, model: BertPreTrainedModel, tokenizer: Tokenizer, out_dir: Path) -> Path:
        """Write `saves` into `out_dir`, each folder with the tokenizer; return OUT/final."""
        for name, save in self.saves:
            with atomic_directory(out_dir / name) as directory:
                save(model, directory)
                tokenizer.save_pretrained(directory)
        return out_dir / self.saves[0][0]

    def describe(self, data_config: PretrainDataConfig, settings: Any) -> str:
        """Its words in the run's recipe line, e.g. "mlm at 15% masking"."""
        if self.data.is_causal:  # predicts every next token; nothing is masked
            return f"{self.name} (next-token prediction, no masking)"
        return f"{self.name} at {data_config.mlm_probability:.0%} masking"

    def card_summary(self, shape: str) -> str:
        """What OUT/final holds, as the model card's summary begins."""
        return f"A BERT encoder with its {self.name} heads ({shape})"

    def recipe_rows(self, settings: Any) -> dict[str, Any]:
        """Its own settings as rows of the model card's recipe table."""
        return {}


@dataclass(frozen=True)
class ReplacedTokenDetection(Objective):
    """ELECTRA (`bertlab.network.electra`): a masked-LM generator and a BERT discriminator that
    tells replaced tokens from original ones; the discriminator is what OUT/final holds."""

    model_class: type[BertPreTrainedModel] = ElectraForPreTraining
    settings_class: type | None = ElectraConfig
    saves: Saves = (
        (FINAL_DIR, ElectraForPreTraining.save_discriminator),  # what fine-tuning uses: a BERT
        (GENERATOR_DIR, ElectraForPreTraining.save_generator),
        (DISCRIMINATOR_DIR, ElectraForPreTraining.save_electra_discriminator),
    )

    @property
    def untrained_modules(self) -> tuple[str, ...]:
        """The discriminator's pooler: replaced-token detection reads every position instead."""
        return ("bert.pooler",)

    def model_kwargs(self, settings: ElectraConfig) -> dict[str, Any]:
        return {"electra": settings}

    def loss(self, output: ElectraOutput, share: StepShare) -> torch.Tensor:
        """The generator's masked-LM loss, plus replaced-token detection (a mean over this
        batch's real tokens) weighted by lambda (`rtd_weight`, ELECTRA Sec. 3)."""
        loss = super().loss(output, share)
        return loss + output.rtd_weight * output.rtd_loss * share.tokens

    def batch_stats(
        self, output: ElectraOutput, batch: dict[str, torch.Tensor], count: int
    ) -> torch.Tensor:
        return batch_stats(output, batch, count) + detection_stats(output)

    def detection_scores(self, output: ElectraOutput) -> tuple[torch.Tensor, torch.Tensor]:
        return detection_scores(output)

    def describe(self, data_config: PretrainDataConfig, settings: ElectraConfig) -> str:
        words = super().describe(data_config, settings)
        return f"{words} (generator {settings.generator_size:g}, weight {settings.rtd_weight:g})"

    def card_summary(self, shape: str) -> str:
        return (
            f"The discriminator of ELECTRA's replaced-token detection, a BERT encoder ({shape}; "
            f"its generator is in `../{GENERATOR_DIR}`, in the ElectraForMaskedLM layout)"
        )

    def recipe_rows(self, settings: ElectraConfig) -> dict[str, Any]:
        return {
            "generator width (share of the model's)": settings.generator_size,
            "replaced-token detection weight": settings.rtd_weight,
        }


_MASKED_LM = ("mlm_loss", "mlm_accuracy")
_DETECTION = ("rtd_loss", "rtd_accuracy")
# The objectives, by name; `config.OBJECTIVE_DATA` has the same keys (a unit test checks).
OBJECTIVES: dict[str, Objective] = {
    "mlm+nsp": Objective("mlm+nsp", (*_MASKED_LM, "nsp_loss", "nsp_accuracy"), _MASKED_USES),
    "mlm": Objective("mlm", _MASKED_LM, _MASKED_USES),
    # Next-token predictions are summed in the masked-LM slots and logged as a language model's.
    "clm": Objective(
        "clm",
        (*(CAUSAL_NAMES[name] for name in _MASKED_LM), "lm_perplexity"),
        _CAUSAL_USES,
        CAUSAL_NAMES,
    ),
    "electra": ReplacedTokenDetection("electra", (*_MASKED_LM, *_DETECTION), _DISCRIMINATOR_USES),
}


def objective_of(data_config: PretrainDataConfig) -> Objective:
    """The entry of `data_config`'s objective.

    Raises:
        ValueError: an objective with data (`config.OBJECTIVE_DATA`) but no entry here.
    """
    if data_config.objective not in OBJECTIVES:
        raise ValueError(
            f"objective {data_config.objective!r} has no entry in "
            "bertlab.training.pretraining.objectives.OBJECTIVES (its model, loss and save)"
        )
    return OBJECTIVES[data_config.objective]
