"""The networks `bertlab pretrain --architecture` trains, as values the run calls: one entry
each in `NETWORKS`, which `run.resolve` looks up once and `run_pretraining` calls. Neither
compares a network's name (STYLE.md, "A variant is a value the loop calls, not a name it tests").

An entry says, for its network:

- which objective trains it (`objective`): BERT's is `--objective`'s entry of
  `objectives.OBJECTIVES`; an LSTM-era network has its own (`lm_objectives.LM_OBJECTIVES`);
- the sizes `--model-size` names and the default one (`check_size`, `shape`);
- its architecture for a run (`config`: a preset at the tokenizer's vocabulary, a config file,
  or the `--init-from` model's), what must fit before training (`check_fits`, `check_memory`),
  and the new model (`build`);
- how the run's output and the model card speak of it (`model_words`, `model_line`,
  `shape_words`), and the dropout written into OUT/final for fine-tuning (`restore_dropout`).

BERT (`network.bert`) is `Network`; NNLM, ELMo's biLM and AWD-LSTM (`network.nnlm`, `elmo`,
`awd_lstm`) are `LanguageModelNetwork`s.

What is done with OUT/final afterwards (loading, `embed`, `score-text`, fine-tuning's heads and
defaults) is the use side's table, `network.architectures.ARCHITECTURES`, which reads a folder by
its config.json alone. The two tables share only the names, both from `core.lstm_config`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from bertlab.core import hub
from bertlab.core.atomic import write_json
from bertlab.core.config import PRESETS, BertConfig, PretrainDataConfig
from bertlab.core.lstm_config import (
    AWD_LSTM,
    DEFAULT_LM_PRESET,
    ELMO,
    LM_PRESETS,
    NNLM,
    lm_preset,
    lstm_config_from_dict,
)
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.pretraining.budget import (
    BudgetRecipe,
    init_positions,
    restore_finetune_dropout,
)
from bertlab.training.pretraining.budget_plan import nearest_preset
from bertlab.training.pretraining.lm_objectives import (
    LEFT_TO_RIGHT,
    LM_OBJECTIVES,
    LanguageModelObjective,
)
from bertlab.training.pretraining.memory import check_length, check_memory
from bertlab.training.pretraining.objectives import OBJECTIVES, Objective, objective_of
from bertlab.training.pretraining.options import BERT, DEFAULT_MODEL_SIZE


@dataclass(frozen=True)
class ModelSource:
    """Where a run's model comes from, as the user chose (one of the three, or none: a preset).

    Attributes:
        init_from: a model folder or Hub id that pre-training continues.
        model_config: a config (a path, or the network's config object).
        shape: the preset of a new model.
        dropout: the dropout while pre-training; None keeps the model's own.
        position_init: a new BERT's position embeddings.
    """

    init_from: str | Path | None
    model_config: Any
    shape: str | None
    dropout: float | None
    position_init: str = "normal"


@dataclass(frozen=True)
class Network:
    """BERT (`bertlab.network.bert`): the encoder of `--model-size` (a preset of
    `config.PRESETS`), a config.json or the `--init-from` model, trained by the objective that
    `--objective` names.

    Attributes:
        name: the name `--architecture` takes.
        title: the network in words.
        measures_plan: on an accelerator, a budget's plan times its shapes (`budget_plan`).
        takes_positions: a new model's position embeddings start as `--position-init` says.
    """

    name: str = BERT
    title: str = "BERT"
    measures_plan: bool = True
    takes_positions: bool = True

    # --- the run's choices ---------------------------------------------------------------------

    def objective(self, data: PretrainDataConfig) -> Objective:
        """The objective that trains it on `data`."""
        return objective_of(data)

    def data_objective(self, given: str | None, chosen: str | None) -> str | None:
        """The data objective of a run: `chosen`, the user's (`given`) or the budget recipe's
        (None: the default)."""
        return chosen

    def check_size(self, size: str) -> None:
        """Raises `ValueError` for a `--model-size` it has no preset of."""
        if size not in PRESETS:
            raise ValueError(f"unknown model size {size!r}; choose one of {', '.join(PRESETS)}")

    def shape(self, size: str | None, recipe: BudgetRecipe | None) -> str:
        """The preset of a new model: the user's, the budget recipe's, else the default."""
        return size or (recipe.model_size if recipe else DEFAULT_MODEL_SIZE)

    def model_words(self, shape: str | None, model_config: Any) -> str:
        """The model in the run's recipe line, e.g. "BERT-mini"."""
        if shape:
            return f"BERT-{shape}"
        if isinstance(model_config, BertConfig):
            return f"{model_config.num_hidden_layers} x {model_config.hidden_size} model"
        return "model as given"

    # --- the architecture ----------------------------------------------------------------------

    def given_config(self, source: ModelSource, vocab_size: int | None = None) -> Any:
        """The architecture as given: the `init_from` model's config, `model_config`, or the
        preset at `vocab_size` (None: the preset's own)."""
        if source.init_from is not None:
            return BertConfig.from_json_file(hub.resolve(source.init_from) / "config.json")
        if isinstance(source.model_config, BertConfig):
            return source.model_config
        if source.model_config is not None:
            return BertConfig.from_json_file(source.model_config)
        overrides = {"vocab_size": vocab_size} if vocab_size else {}
        return BertConfig.from_preset(source.shape, **overrides)

    def config(
        self,
        source: ModelSource,
        tokenizer: Tokenizer,
        data: PretrainDataConfig,
        objective: Objective,
        settings: Any,
    ) -> Any:
        """The model's architecture for the run: as given, at the tokenizer's vocabulary, for
        the objective (causal for `clm`), with the pre-training dropout.

        Raises:
            ValueError: a tokenizer that does not fit the model, sequences longer than its
                positions.
        """
        if source.init_from is None and source.model_config is None:
            config = BertConfig.from_preset(
                source.shape, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id
            )
        else:
            config = self.given_config(source)
        _check_vocabulary(config.vocab_size, tokenizer)
        check_length(config, data)
        config = objective.model_config(config)
        if source.dropout is not None:
            config = config.replace(
                hidden_dropout_prob=source.dropout, attention_probs_dropout_prob=source.dropout
            )
        return config

    def check_fits(
        self, source: ModelSource, vocab_size: int | None, data: PretrainDataConfig, batch: int
    ) -> None:
        """Before the tokenizer and the corpus: sequences within the model's positions, and
        (`batch` not None) a micro-batch within this machine's memory."""
        config = self.given_config(source, vocab_size)
        check_length(config, data)
        if batch:
            check_memory(config, batch, data.max_seq_length)

    def check_memory(self, config: Any, batch: int, length: int) -> None:
        check_memory(config, batch, length)

    def build(
        self,
        objective: Objective,
        config: Any,
        settings: Any,
        source: ModelSource,
        tokenizer: Tokenizer,
    ) -> nn.Module:
        """The model to train: new (its positions as `position_init` says), or continued."""
        model = objective.build_model(config, settings, source.init_from)
        if source.init_from is None:
            init_positions(model.bert.embeddings, source.position_init, config.initializer_range)
        return model

    def planned_size(self, size: str | None, source: ModelSource, config: Any) -> str | None:
        """The size a budget plans: the user's; a model given as a folder or config is its
        nearest preset."""
        if size is None and (source.init_from is not None or source.model_config is not None):
            return nearest_preset(config)
        return size

    # --- words ---------------------------------------------------------------------------------

    def model_line(self, config: Any) -> str:
        """Its layers and width, for the run's model line."""
        return f"{config.num_hidden_layers} layers, hidden {config.hidden_size}"

    def shape_words(self, config: Any, parameters: int) -> str:
        """Its shape, as the model card says it."""
        return (
            f"{config.num_hidden_layers} layers, hidden size {config.hidden_size}, "
            f"{config.num_attention_heads} heads, {parameters:,} parameters"
        )

    def dropout_words(self, config: Any) -> float:
        return config.hidden_dropout_prob

    def restore_dropout(self, final_dir: Path, dropout: float, preset: str | None) -> str | None:
        """Write `dropout` into OUT/final's config.json for fine-tuning; what was written, in
        words (None: nothing)."""
        restore_finetune_dropout(final_dir, dropout)
        return f"dropout {dropout:g}"


@dataclass(frozen=True)
class LanguageModelNetwork(Network):
    """An LSTM-era network (`network.lm_base.LanguageModel`): a preset of
    `core.lstm_config.LM_PRESETS` (`cpu` by default), a config.json of its architecture or
    the `--init-from` model of it, trained by its own objective on left-to-right targets.

    Attributes (besides `Network`'s):
        lm_objective: its objective, `lm_objectives.LM_OBJECTIVES[name]`.
        dropouts: the names of its config's dropout probabilities (what `--dropout` sets).
        line: the config in words for the run's model line, from its fields.
    """

    lm_objective: LanguageModelObjective | None = None
    dropouts: tuple[str, ...] = ()
    line: str = ""

    def objective(self, data: PretrainDataConfig) -> Objective:
        return self.lm_objective

    def data_objective(self, given: str | None, chosen: str | None) -> str:
        """Left-to-right targets, whatever the recipe's objective; another objective asked
        for (`given`) is refused: the network's paper fixes its own."""
        if given not in (None, LEFT_TO_RIGHT):
            raise ValueError(
                f"--objective {given} trains a BERT; --architecture {self.name} trains its "
                "paper's own objective, on left-to-right targets (leave --objective out)"
            )
        return LEFT_TO_RIGHT

    def check_size(self, size: str) -> None:
        presets = LM_PRESETS[self.name]
        if size not in presets:
            raise ValueError(
                f"unknown model size {size!r} for --architecture {self.name}; choose one of "
                f"{', '.join(presets)}"
            )

    def shape(self, size: str | None, recipe: BudgetRecipe | None) -> str:
        """The user's preset, else its CPU size (the budget recipe's sizes are BERT's)."""
        return size or DEFAULT_LM_PRESET

    def model_words(self, shape: str | None, model_config: Any) -> str:
        return f"{self.title} ({shape})" if shape else f"{self.title} as given"

    def given_config(self, source: ModelSource, vocab_size: int | None = None) -> Any:
        if source.init_from is not None:
            path = hub.resolve(source.init_from) / "config.json"
            config = lstm_config_from_dict(json.loads(path.read_text(encoding="utf-8")))
        elif source.model_config is not None and not isinstance(source.model_config, str | Path):
            config = source.model_config
        elif source.model_config is not None:
            config = lstm_config_from_dict(json.loads(Path(source.model_config).read_text()))
        else:
            overrides = {"vocab_size": vocab_size} if vocab_size else {}
            return lm_preset(self.name, source.shape, **overrides)
        if config.architecture != self.name:
            raise ValueError(
                f"the model given is a {config.architecture} model, not {self.name}: give "
                f"--architecture {config.architecture}"
            )
        return config

    def config(
        self,
        source: ModelSource,
        tokenizer: Tokenizer,
        data: PretrainDataConfig,
        objective: Objective,
        settings: Any,
    ) -> Any:
        """The network's config for the run: as given or the preset at the tokenizer's
        vocabulary (ELMo's char CNN over its pieces' characters), with the pre-training dropout
        in every dropout of the network."""
        if source.init_from is None and source.model_config is None:
            config = lm_preset(
                self.name,
                source.shape,
                vocab_size=tokenizer.vocab_size,
                pad_token_id=tokenizer.pad_token_id,
            )
        else:
            config = self.given_config(source)
        _check_vocabulary(config.vocab_size, tokenizer)
        config = objective.with_settings(config, settings, pieces_of(tokenizer))
        if source.dropout is not None:
            config = config.replace(**{name: source.dropout for name in self.dropouts})
        return config

    def check_fits(
        self, source: ModelSource, vocab_size: int | None, data: PretrainDataConfig, batch: int
    ) -> None:
        """A recurrent network has no positions to run out of; its size is checked when its
        config is built."""
        self.given_config(source, vocab_size)

    def check_memory(self, config: Any, batch: int, length: int) -> None:
        """Not estimated: the LSTM-era networks' presets train in well under a GiB."""

    def build(
        self,
        objective: Objective,
        config: Any,
        settings: Any,
        source: ModelSource,
        tokenizer: Tokenizer,
    ) -> nn.Module:
        return objective.build_model(config, settings, source.init_from, pieces_of(tokenizer))

    def planned_size(self, size: str | None, source: ModelSource, config: Any) -> str | None:
        return size

    def model_line(self, config: Any) -> str:
        return self.line.format(**config.to_dict())

    def shape_words(self, config: Any, parameters: int) -> str:
        return f"{self.model_line(config)}, {parameters:,} parameters"

    def dropout_words(self, config: Any) -> str:
        values = {name: getattr(config, name) for name in self.dropouts}
        return ", ".join(f"{name} {value:g}" for name, value in values.items()) or "none"

    def restore_dropout(self, final_dir: Path, dropout: float, preset: str | None) -> str | None:
        """The preset's own dropouts back in OUT/final's config.json (what its paper trains and
        fine-tunes with), or `dropout` in each where the run gave one (`--finetune-dropout`);
        None for a network without dropout (NNLM)."""
        if not self.dropouts:
            return None
        path = final_dir / "config.json"
        values = json.loads(path.read_text(encoding="utf-8"))
        if preset is not None:
            own = lm_preset(self.name, preset).to_dict()
            values |= {name: own[name] for name in self.dropouts}
        else:
            values |= {name: dropout for name in self.dropouts}
        write_json(path, values, sort_keys=True)
        return ", ".join(f"{name} {values[name]:g}" for name in self.dropouts)


def pieces_of(tokenizer: Tokenizer) -> list[str]:
    """The tokenizer's pieces in id order (what ELMo's char CNN reads)."""
    vocab = tokenizer.get_vocab()
    return sorted(vocab, key=vocab.__getitem__)


def _check_vocabulary(vocab_size: int, tokenizer: Tokenizer) -> None:
    if vocab_size != tokenizer.vocab_size:
        raise ValueError(
            f"the tokenizer has {tokenizer.vocab_size} tokens but the model's vocabulary has "
            f"{vocab_size}; use the model's own tokenizer (or a config with vocab_size "
            f"{tokenizer.vocab_size})"
        )


# The networks, by the name `--architecture` takes (`options.ARCHITECTURES`, torch-free).
NETWORKS: dict[str, Network] = {
    BERT: Network(),
    NNLM: LanguageModelNetwork(
        NNLM,
        "NNLM",
        measures_plan=False,
        takes_positions=False,
        lm_objective=LM_OBJECTIVES[NNLM],
        line="order {ngram_order}, piece vectors of {embedding_size}, tanh layer of {hidden_size}",
    ),
    ELMO: LanguageModelNetwork(
        ELMO,
        "ELMo's biLM",
        measures_plan=False,
        takes_positions=False,
        lm_objective=LM_OBJECTIVES[ELMO],
        dropouts=("dropout_prob",),
        line="{num_hidden_layers} + {num_hidden_layers} LSTM layers of {lstm_hidden_size} "
        "projected to {projection_size}",
    ),
    AWD_LSTM: LanguageModelNetwork(
        AWD_LSTM,
        "AWD-LSTM",
        measures_plan=False,
        takes_positions=False,
        lm_objective=LM_OBJECTIVES[AWD_LSTM],
        dropouts=(
            "output_dropout_prob",
            "hidden_dropout_prob",
            "input_dropout_prob",
            "embedding_dropout_prob",
            "weight_dropout_prob",
        ),
        line="{num_hidden_layers} LSTM layers, embedding {embedding_size}, hidden {hidden_size}",
    ),
}
assert set(NETWORKS) == {BERT, *LM_OBJECTIVES}  # one list of names


def network_of(name: str | None) -> Network:
    """The entry of `--architecture name` (None: BERT).

    Raises:
        ValueError: an unknown name, naming the known ones.
    """
    name = name or BERT
    if name not in NETWORKS:
        raise ValueError(f"unknown architecture {name!r}; choose one of {', '.join(NETWORKS)}")
    return NETWORKS[name]


def all_objectives() -> list[Objective]:
    """Every objective a run may train: BERT's and the LSTM-era networks' own."""
    return [*OBJECTIVES.values(), *LM_OBJECTIVES.values()]
