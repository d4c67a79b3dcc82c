"""The LSTM era's own objectives, as values the pre-training loop calls
(`objectives.Objective`): what `bertlab pretrain --architecture nnlm|elmo|awd-lstm` trains.

Each network has one objective, fixed by its paper, on the left-to-right targets of
`--objective clm` (`config.OBJECTIVE_DATA["clm"]`: position t labelled with piece t + 1):

- NNLM (Bengio et al. 2003): the next piece from the window of the n - 1 pieces before it;
- AWD-LSTM (Merity et al. 2017): the next piece, plus the activation and temporal activation
  regularizers (Sec. 4.6) while training;
- ELMo's biLM (Peters et al. 2018 Sec. 3.1): the forward LM's next piece and the backward LM's
  previous piece, their log likelihoods added.

Every one logs the left-to-right statistics of `--objective clm` (`lm_loss`, `lm_accuracy`,
`lm_perplexity`) on the same held-out text, so that they compare with each other and with a
left-to-right BERT; ELMo's backward LM beside them (`backward_lm_loss`, `backward_lm_accuracy`).
"""

# Shapes: B batch, L sequence length, V vocab.

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertlab.core.config import OBJECTIVE_DATA, ObjectiveData, PretrainDataConfig
from bertlab.core.lstm_config import AWD_LSTM, ELMO, NNLM, ElmoSettings
from bertlab.core.run_folder import FINAL_DIR
from bertlab.network.awd_lstm import AwdLstmForLanguageModeling, AwdLstmOutput
from bertlab.network.elmo import ElmoForLanguageModeling, ElmoOutput
from bertlab.network.lm_base import (
    IGNORE_INDEX,
    LanguageModel,
    LanguageModelOutput,
    load_weights,
    previous_piece_labels,
)
from bertlab.network.nnlm import NnlmForLanguageModeling
from bertlab.training.pretraining.objectives import (
    CAUSAL_NAMES,
    ModelUses,
    Objective,
    Saves,
    StepShare,
)
from bertlab.training.pretraining.stats import STATS, language_model_stats

LEFT_TO_RIGHT = "clm"  # the data every LSTM-era objective reads: `OBJECTIVE_DATA["clm"]`
# ELMo's backward LM, logged beside the forward LM's `lm_*` (the stats' blm_* slots).
BACKWARD_NAMES = {"blm_loss": "backward_lm_loss", "blm_accuracy": "backward_lm_accuracy"}
BACKWARD_SLOT = STATS.index("blm_loss_sum")  # then blm_correct, blm_count
_LM_STATISTICS = ("lm_loss", "lm_accuracy", "lm_perplexity")


def _uses(commands: str) -> ModelUses:
    return ModelUses(
        "text-generation", commands, 'bertlab generate --model DIR "The movie was"', ()
    )


@dataclass(frozen=True)
class LanguageModelObjective(Objective):
    """Left-to-right language modelling of an LSTM-era network (`network.lm_base`): the mean
    loss per target piece, with the statistics and held-out perplexity of `--objective clm`.

    Attributes (besides `Objective`'s):
        summary: the network in words, as the model card's summary begins.
    """

    stat_names: Any = field(default_factory=lambda: dict(CAUSAL_NAMES))
    model_class: type[LanguageModel] = NnlmForLanguageModeling
    saves: Saves = ((FINAL_DIR, LanguageModel.save_pretrained),)
    summary: str = ""

    @property
    def data(self) -> ObjectiveData:
        """Left-to-right targets, as `--objective clm` builds them."""
        return OBJECTIVE_DATA[LEFT_TO_RIGHT]

    @property
    def untrained_modules(self) -> tuple[str, ...]:
        """Its loss reaches every module."""
        return ()

    def model_config(self, config: Any) -> Any:
        return config

    def build_model(
        self,
        config: Any,
        settings: Any,
        init_from: str | Path | None = None,
        pieces: Sequence[str] | None = None,
    ) -> LanguageModel:
        """A new network of `config`, or the one `init_from` (a folder or Hub id) continues.
        `pieces`, the WordPiece vocabulary in id order, is what ELMo's char CNN reads."""
        if init_from is not None:
            return self.model_class.from_pretrained(init_from)
        return self.model_class(config, **self.model_kwargs(settings, pieces))

    def model_kwargs(self, settings: Any, pieces: Sequence[str] | None = None) -> dict[str, Any]:
        return {}

    def with_settings(self, config: Any, settings: Any, pieces: Sequence[str]) -> Any:
        """`config` as its own settings shape it (ELMo's char CNN); the pieces are the
        tokenizer's, in id order."""
        return config

    def load_weights(self, model: nn.Module, weights: dict[str, torch.Tensor], source: str) -> None:
        load_weights(model, weights, source)

    def model_key(self, config: Any) -> dict[str, Any]:
        """The whole architecture: a resumed run continues the same network."""
        return {"architecture": config.architecture} | config.to_dict()

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> LanguageModelOutput:
        return model(
            input_ids=batch["input_ids"],
            attention_mask=batch.get("attention_mask"),
            labels=batch["labels"],
        )

    def loss(self, output: LanguageModelOutput, share: StepShare) -> torch.Tensor:
        """The mean loss per target piece, weighted as the step's share of the targets."""
        return output.loss * share.predictions

    def batch_stats(
        self, output: LanguageModelOutput, batch: dict[str, torch.Tensor], count: int
    ) -> torch.Tensor:
        return language_model_stats(output.loss, output.logits, batch, count)

    def describe(self, data_config: PretrainDataConfig, settings: Any) -> str:
        return f"{self.name} (next-piece prediction)"

    def card_summary(self, shape: str) -> str:
        return f"{self.summary} ({shape})"


@dataclass(frozen=True)
class RegularizedLanguageModel(LanguageModelObjective):
    """AWD-LSTM's: the next piece, plus Merity et al.'s activation regularizer (alpha x the
    mean square of the last layer's output) and temporal one (beta x the mean square of its
    change between positions), Sec. 4.6, each a mean over its micro-batch."""

    model_class: type[LanguageModel] = AwdLstmForLanguageModeling

    def loss(self, output: AwdLstmOutput, share: StepShare) -> torch.Tensor:
        loss = super().loss(output, share)
        for term in (output.activation_regularization, output.temporal_activation_regularization):
            if term is not None:
                loss = loss + term / share.micro_batches
        return loss


@dataclass(frozen=True)
class BidirectionalLanguageModel(LanguageModelObjective):
    """ELMo's: "jointly maximizes the log likelihood of the forward and backward directions"
    (Peters et al. 2018 Sec. 3.1), each a mean per target piece, added. The forward LM's
    statistics are the left-to-right ones every such model logs; the backward LM's beside."""

    stat_names: Any = field(default_factory=lambda: CAUSAL_NAMES | BACKWARD_NAMES)
    model_class: type[LanguageModel] = ElmoForLanguageModeling
    settings_class: type | None = ElmoSettings

    def model_kwargs(self, settings: ElmoSettings, pieces: Sequence[str] | None = None) -> dict:
        return {"pieces": pieces}

    def with_settings(self, config: Any, settings: ElmoSettings, pieces: Sequence[str]) -> Any:
        """The char CNN over the characters of the vocabulary's pieces, when chosen."""
        if settings.use_char_cnn and not config.use_char_cnn:
            return config.with_characters(pieces)
        return config

    def loss(self, output: ElmoOutput, share: StepShare) -> torch.Tensor:
        return (output.forward_loss + output.backward_loss) * share.predictions

    def batch_stats(
        self, output: ElmoOutput, batch: dict[str, torch.Tensor], count: int
    ) -> torch.Tensor:
        stats = language_model_stats(output.forward_loss, output.logits, batch, count)
        labels = previous_piece_labels(batch["input_ids"], batch["attention_mask"])  # (B, L)
        with torch.no_grad():  # on the device, unread (as `language_model_stats`)
            is_target = labels != IGNORE_INDEX
            targets = is_target.sum().double()
            loss = torch.where(targets > 0, output.backward_loss.double() * targets, 0.0)
            predicted = output.backward_logits.argmax(dim=-1)  # (B, L)
            stats[BACKWARD_SLOT] = loss
            stats[BACKWARD_SLOT + 1] = ((predicted == labels) & is_target).sum()
            stats[BACKWARD_SLOT + 2] = targets
        return stats

    def describe(self, data_config: PretrainDataConfig, settings: ElmoSettings) -> str:
        inputs = "character CNN" if settings.use_char_cnn else "WordPiece embeddings"
        return f"{self.name} (forward and backward next-piece prediction, {inputs})"

    def recipe_rows(self, settings: ElmoSettings) -> dict[str, Any]:
        return {"token input": "character CNN" if settings.use_char_cnn else "WordPiece pieces"}


# The objectives of the LSTM-era networks, by `--architecture` name.
LM_OBJECTIVES: dict[str, LanguageModelObjective] = {
    NNLM: LanguageModelObjective(
        NNLM,
        _LM_STATISTICS,
        _uses(
            "`bertlab generate`, `score-text`, `embed` (its piece vectors and hidden layer), "
            "`neighbours` (static vectors), `finetune` (its vectors as a task model's input)"
        ),
        model_class=NnlmForLanguageModeling,
        summary="A neural probabilistic language model (Bengio et al. 2003)",
    ),
    ELMO: BidirectionalLanguageModel(
        ELMO,
        (*_LM_STATISTICS, "backward_lm_loss", "backward_lm_accuracy"),
        _uses(
            "`bertlab embed` (each layer, or ELMo's scalar mix), `neighbours` (contextual), "
            "`generate` and `score-text` (its forward LM), `finetune` (frozen, a learned "
            "scalar mix and the task's BiLSTM)"
        ),
        summary="ELMo's bidirectional LSTM language model (Peters et al. 2018)",
    ),
    AWD_LSTM: RegularizedLanguageModel(
        AWD_LSTM,
        _LM_STATISTICS,
        _uses(
            "`bertlab generate`, `score-text`, `embed` (each layer), `neighbours`, `finetune` "
            "(ULMFiT's classifier: discriminative rates, slanted triangular schedule, gradual "
            "unfreezing)"
        ),
        summary="An AWD-LSTM language model (Merity et al. 2017), the network ULMFiT "
        "fine-tunes (Howard & Ruder 2018)",
    ),
}
