"""A pre-training run described and resolved: `PretrainRun`, what `run_pretraining` trains
(`bertlab.training.pretraining.runner`), and `ResolvedRun`, every value it trains with.

`PretrainRun` describes a whole run: the corpus and the run directory, how long (`budget`,
`max_steps` or `max_time`), where the tokenizer and the model come from, and every setting of
the data and the loop. Each field is named like the `bertlab pretrain` flag it comes from, and
None means "not chosen": the budget recipe's value with a `budget` (`budget.py` beside),
otherwise the default of `PretrainDataConfig` / `PretrainConfig`. The CLI parses flags into a
`PretrainRun`; the demo and the experiments build one directly.

A run is resolved once, when it is made: `run.resolved` is a frozen `ResolvedRun` holding the
data and loop configs, the objective and its settings, the shape, the dropout and the recipe's
words, which the loop, the model card, the demo and the experiments read. A budget run is
resolved again only when its plan for the machine brings another recipe
(`ResolvedRun.planned`: on an accelerator; on a CPU the plan is the measured recipe).

    run = PretrainRun(corpus=["reviews.txt"], out="runs/x", budget=3600)
    run.resolved.shape, run.resolved.loop.batch_size  # "mini", 32

Bad settings raise `ValueError` when the `PretrainRun` is built, before anything is written.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bertlab.core.config import (
    BertConfig,
    PretrainConfig,
    PretrainDataConfig,
    check_training_time,
    objective_data,
)
from bertlab.corpus.sources import LANGS, CorpusReading
from bertlab.training.pretraining.budget import (
    FINETUNE_DROPOUT,
    POSITION_INITS,
    BudgetRecipe,
    budget_recipe,
)
from bertlab.training.pretraining.budget_plan import BudgetPlan
from bertlab.training.pretraining.networks import ModelSource, Network, all_objectives, network_of
from bertlab.training.pretraining.objectives import Objective

# Fields that the budget recipe fills when they are not chosen, with the recipe's field names.
_RECIPE_FIELDS = (
    "objective",
    "max_seq_length",
    "mlm_probability",
    "batch_size",
    "learning_rate",
    "warmup_proportion",
    "schedule",
)
_DATA_FIELDS = {field.name for field in dataclasses.fields(PretrainDataConfig)}
_LOOP_FIELDS = {field.name for field in dataclasses.fields(PretrainConfig)}


# On a GPU one data worker cannot keep up with a small model's steps (BERT-mini); the batches
# are the same for any number of workers, so a GPU run takes more by default. Not measured yet
# on a device (docs/performance.md#on-a-gpu).
MAX_GPU_DATA_WORKERS = 4


def gpu_data_workers() -> int:
    """Data workers for a run on a GPU: up to MAX_GPU_DATA_WORKERS of each GPU's share of the
    cores, one of which stays with the GPU's training process."""
    cores_per_gpu = (os.cpu_count() or 2) // max(torch.cuda.device_count(), 1)
    return max(1, min(MAX_GPU_DATA_WORKERS, cores_per_gpu - 1))


@dataclass(frozen=True)
class PretrainRun:
    """One pre-training run. None means "not chosen" (see the module docstring).

    Attributes:
        corpus: files, folders or patterns: plain text in Google's layout (a sentence or
            paragraph per line, a blank line between documents), JSON Lines, CSV, TSV, Parquet,
            a folder saved by `datasets`; gzipped or not (`bertlab.corpus.sources`).
        out: the run directory: checkpoints, metrics.jsonl, curves.png and `final/`.
        budget: seconds of training with the budget recipe's defaults (vocabulary, shape,
            objective, masking, schedule); give exactly one of budget, max_steps, max_time.
        tokenizer: vocab.txt or a tokenizer directory; None: the `init_from` model's, or a
            vocabulary of `vocab_size` (the recipe's with a budget) trained on the corpus.
        vocab_size: pieces of the vocabulary trained on the corpus when there is no tokenizer.
        architecture: the network: "bert" (None, the default), "nnlm", "elmo" or "awd-lstm"
            (`networks.NETWORKS`); an LSTM-era network trains its paper's objective.
        model_size: a preset of the network for a new model (BERT: tiny ... large; the LSTM-era
            networks: their papers' sizes and "cpu", `core.lstm_config.LM_PRESETS`).
        model_config: the architecture of a new model, as a config.json path or a config.
        init_from: a model folder or Hugging Face Hub id (`bert-base-uncased`) to continue
            pre-training (domain adaptation).
        position_init: a new model's position embeddings, "normal" or "sinusoidal".
        dropout: hidden and attention dropout while pre-training; None: the model's own.
        finetune_dropout: the dropout written into `OUT/final/config.json`; None: BERT's 0.1
            after a budget run that chose the dropout itself, else the dropout trained with.
        lang: sentence splitting and whole-word segmentation: "auto", "en" or "zh".
        corpus_cache: the tokenized corpus's directory; None: `OUT/corpus`.
        corpus_format: how the corpus files are read; "auto": each by its suffix.
        text_column: the JSON field or column that holds each document's text.
        resume: continue from the latest checkpoint in `out`.
        The rest are the fields of `PretrainDataConfig` and `PretrainConfig` of the same names.
    """

    corpus: Sequence[str | os.PathLike]
    out: str | os.PathLike
    budget: float | None = None
    max_steps: int | None = None
    max_time: float | None = None
    tokenizer: str | os.PathLike | None = None
    vocab_size: int | None = None
    architecture: str | None = None
    model_size: str | None = None
    model_config: BertConfig | str | os.PathLike | None = None
    init_from: str | os.PathLike | None = None
    position_init: str | None = None
    dropout: float | None = None
    finetune_dropout: float | None = None
    lang: str = "auto"
    corpus_cache: str | os.PathLike | None = None
    corpus_format: str = CorpusReading.corpus_format
    text_column: str = CorpusReading.text_column
    resume: bool = False
    # PretrainDataConfig
    objective: str | None = None
    max_seq_length: int | None = None
    mlm_probability: float | None = None
    max_predictions_per_seq: int | None = None
    short_seq_prob: float | None = None
    do_whole_word_mask: bool = False
    pack_sequences: bool | None = None
    # PretrainConfig
    batch_size: int | None = None
    gradient_accumulation_steps: int | None = None
    learning_rate: float | None = None
    warmup_proportion: float | None = None
    schedule: str | None = None
    weight_decay: float | None = None
    seed: int | None = None
    log_every_steps: int | None = None
    eval_every_steps: int | None = None
    eval_examples: int | None = None
    checkpoint_every_steps: int | None = None
    checkpoint_every_minutes: float | None = None
    keep_checkpoints: int | None = None
    precision: str | None = None
    do_compile: bool = False
    num_workers: int | None = None
    plateau_min_tokens: int | None = None
    # ElectraConfig (objective electra)
    generator_size: float | None = None
    rtd_weight: float | None = None
    # ElmoSettings (architecture elmo)
    use_char_cnn: bool | None = None

    def __post_init__(self) -> None:
        if not self.corpus:
            raise ValueError("give at least one corpus file")
        durations = [self.budget, self.max_steps, self.max_time]
        if sum(value is not None for value in durations) != 1:
            raise ValueError("give exactly one of budget, max_steps and max_time")
        if self.budget is not None and not self.budget > 0:
            raise ValueError(f"the budget must be positive, got {self.budget}")
        if self.budget is not None:
            check_training_time("the budget", self.budget)
        models = [self.model_size, self.model_config, self.init_from]
        if sum(value is not None for value in models) > 1:
            raise ValueError("give one of model_size, model_config and init_from, not several")
        network = network_of(self.architecture)  # raises ValueError for an unknown name
        if self.model_size is not None:
            network.check_size(self.model_size)
        if self.position_init is not None and not network.takes_positions:
            raise ValueError(f"position_init applies to BERT's positions; {network.name} has none")
        if self.position_init is not None:
            if self.init_from is not None:
                raise ValueError(
                    "position_init sets a new model's positions; init_from keeps the model's own"
                )
            if self.position_init not in POSITION_INITS:
                raise ValueError(f"position_init must be one of {POSITION_INITS}")
        if self.lang not in LANGS:
            raise ValueError(f"unknown lang {self.lang!r}; choose one of {', '.join(LANGS)}")
        if self.objective is not None:
            objective_data(self.objective)  # raises ValueError for an unknown objective
        for name in ("dropout", "finetune_dropout"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 1:
                raise ValueError(f"{name} must be in [0, 1), got {value}")
        if self.vocab_size is not None and self.tokenizer is not None:
            raise ValueError("give a tokenizer or a vocab_size to train one, not both")
        _ = self.resolved  # resolved here, once: raises ValueError on a bad value

    @functools.cached_property
    def resolved(self) -> ResolvedRun:
        """What the run resolves to, without a plan (the measured CPU recipe with a budget);
        built once, when the run is made (`dataclasses.replace` makes a run resolved anew)."""
        return resolve(self)


@dataclass(frozen=True)
class ResolvedRun:
    """A `PretrainRun` resolved: every value the run trains with, each chosen once from the
    user's choice, the budget recipe's (with a budget) or the configs' defaults.

    Attributes:
        choices: the run as the user gave it.
        network: the network's entry in `networks.NETWORKS`.
        plan: the budget's plan for this machine (`budget_plan`); None before
            it is planned, and without a budget.
        recipe: the budget recipe (the plan's once planned); None without a budget.
        data: the data and objective settings.
        loop: the loop's settings.
        objective: the objective's entry in `bertlab.training.pretraining.objectives.OBJECTIVES`.
        settings: the objective's own settings (ELECTRA's `ElectraConfig`), None for the others.
        reading: how the corpus files are read.
        vocabulary_size: the size of the vocabulary to train on the corpus; None when the
            tokenizer is given or comes with `init_from`.
        shape: the preset of a new model; None for `model_config` and `init_from`.
        dropout: the dropout while pre-training; None keeps the model's own.
        position_init: a new model's position embeddings.
        final_dropout: the dropout written into the final model's config.json; None leaves it.
        description: one line in the recipe's words, e.g. "BERT-mini, 8,000-piece vocabulary
            trained on the corpus, masked LM at 40%, ...".
    """

    choices: PretrainRun
    network: Network
    plan: BudgetPlan | None
    recipe: BudgetRecipe | None
    data: PretrainDataConfig
    loop: PretrainConfig
    objective: Objective
    settings: Any
    reading: CorpusReading
    vocabulary_size: int | None
    shape: str | None
    dropout: float | None
    position_init: str
    final_dropout: float | None
    description: str

    @property
    def source(self) -> ModelSource:
        """Where the model comes from, and how a new one starts."""
        choices = self.choices
        return ModelSource(
            choices.init_from, choices.model_config, self.shape, self.dropout, self.position_init
        )

    def planned(self, plan: BudgetPlan) -> ResolvedRun:
        """This run with the recipe of `plan`: resolved again only where the plan's recipe is
        not the one resolved (on an accelerator; on a CPU the plan is the measured recipe)."""
        if self.choices.budget is None:
            raise ValueError("only a run with a budget has a plan")
        if plan.recipe == self.recipe:
            return dataclasses.replace(self, plan=plan)
        return resolve(self.choices, plan)


def resolve(run: PretrainRun, plan: BudgetPlan | None = None) -> ResolvedRun:
    """Resolve `run` (with the recipe of `plan` when given): each value is the user's choice,
    else the budget recipe's, else the configs' default.

    Raises:
        ValueError: a value the data or loop config refuses, settings of another objective, no
            way to a tokenizer.
    """
    recipe = None
    if run.budget is not None:
        recipe = plan.recipe if plan is not None else budget_recipe(run.budget, run.model_size)
    reading = CorpusReading(run.corpus_format, run.text_column)  # raises for an unknown format

    def chosen(name: str) -> Any:
        """The field's value, else the recipe's (with a budget), else None (the default)."""
        value = getattr(run, name)
        if value is None and recipe is not None and name in _RECIPE_FIELDS:
            return getattr(recipe, name)
        return value

    network = network_of(run.architecture)
    data = _data_config(run, recipe, chosen, network)
    loop = _loop_config(run, chosen)
    objective = network.objective(data)
    own = objective.setting_names()
    for other in all_objectives():
        given = [name for name in other.setting_names() if getattr(run, name) is not None]
        if given and not set(given) <= set(own):
            raise ValueError(f"{' and '.join(given)} apply to objective {other.name} only")
    settings = objective.settings({name: getattr(run, name) for name in own})
    vocabulary_size = None
    if run.tokenizer is None and run.init_from is None:
        vocabulary_size = run.vocab_size or (recipe.vocab_size if recipe is not None else None)
        if vocabulary_size is None:
            raise ValueError(
                "give a tokenizer (vocab.txt or a tokenizer directory), a vocab_size to train "
                "one on the corpus, or a budget"
            )
    shape = None
    if run.model_config is None and run.init_from is None:
        shape = network.shape(run.model_size, recipe)
    dropout = run.dropout
    if dropout is None and recipe is not None and run.init_from is None:
        dropout = recipe.dropout
    final_dropout = run.finetune_dropout
    if final_dropout is None and run.budget is not None and run.dropout is None:
        final_dropout = FINETUNE_DROPOUT
    position_init = run.position_init or (recipe.position_init if recipe else "normal")
    model = network.model_words(shape, run.model_config)
    description = _describe(
        run, data, loop, objective.describe(data, settings), model, vocabulary_size, dropout
    )
    return ResolvedRun(
        run,
        network,
        plan,
        recipe,
        data,
        loop,
        objective,
        settings,
        reading,
        vocabulary_size,
        shape,
        dropout,
        position_init,
        final_dropout,
        description,
    )


def _data_config(
    run: PretrainRun, recipe: BudgetRecipe | None, chosen, network: Network
) -> PretrainDataConfig:
    values = {name: chosen(name) for name in _DATA_FIELDS if hasattr(run, name)}
    values["objective"] = network.data_objective(run.objective, values.get("objective"))
    values = {name: value for name, value in values.items() if value is not None}
    objective = values.get("objective", PretrainDataConfig.objective)
    if run.pack_sequences is None:  # the recipe packs, but NSP needs sentence pairs
        values["pack_sequences"] = bool(recipe and recipe.pack_sequences) and (
            not objective_data(objective).is_pair
        )
    if run.max_predictions_per_seq is None:
        length = values.get("max_seq_length", PretrainDataConfig.max_seq_length)
        rate = values.get("mlm_probability", PretrainDataConfig.mlm_probability)
        values["max_predictions_per_seq"] = math.ceil(length * rate)
    return PretrainDataConfig(**values)


def _loop_config(run: PretrainRun, chosen) -> PretrainConfig:
    values = {name: chosen(name) for name in _LOOP_FIELDS if hasattr(run, name)}
    values = {name: value for name, value in values.items() if value is not None}
    if run.budget is not None:
        values["max_time"] = run.budget
    if run.num_workers is None and torch.cuda.is_available():
        values["num_workers"] = gpu_data_workers()
    return PretrainConfig(**values)


def _describe(
    run: PretrainRun,
    data: PretrainDataConfig,
    loop: PretrainConfig,
    objective: str,
    model: str,
    vocabulary_size: int | None,
    dropout: float | None,
) -> str:
    """One line: what the run trains, e.g. "BERT-mini, 8,000-piece vocabulary ..."."""
    vocabulary = (
        f"{vocabulary_size:,}-piece vocabulary trained on the corpus"
        if vocabulary_size
        else "tokenizer as given"
    )
    return (
        f"{model}, {vocabulary}, {objective}, "
        f"{'packed ' if data.pack_sequences else ''}sequences of {data.max_seq_length}, "
        f"batch {loop.batch_size}, {loop.schedule} to {loop.learning_rate:g}, dropout "
        f"{'as the model' if dropout is None else f'{dropout:g}'}"
    )
