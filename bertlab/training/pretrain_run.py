"""A pre-training run described: `PretrainRun`, what `run_pretraining` trains
(`bertlab.training.pretraining`).

`PretrainRun` describes a whole run: the corpus and the run directory, how long (`budget`,
`max_steps` or `max_time`), where the tokenizer and the model come from, and every setting of
the data and the loop. Each field is named like the `bertlab pretrain` flag it comes from, and
None means "not chosen": the budget recipe's value with a `budget` (`bertlab.training.budget`),
otherwise the default of `PretrainDataConfig` / `PretrainConfig`. The CLI parses flags into a
`PretrainRun`; the demo and the experiments build one directly. Its methods say what the run
resolves to: the data and loop configs, the objective and its settings, the shape, the dropout.

Bad settings raise `ValueError` when the `PretrainRun` is built, before anything is written.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from bertlab.core.config import (
    PRESETS,
    BertConfig,
    PretrainConfig,
    PretrainDataConfig,
    check_training_time,
    objective_data,
)
from bertlab.core.corpus_sources import CorpusReading
from bertlab.training.budget import FINETUNE_DROPOUT, POSITION_INITS, BudgetRecipe, budget_recipe
from bertlab.training.budget_plan import BudgetPlan
from bertlab.training.objectives import OBJECTIVES, Objective, objective_of
from bertlab.training.pretrain_options import DEFAULT_MODEL_SIZE, LANGS

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
            a folder saved by `datasets`; gzipped or not (`bertlab.core.corpus_sources`).
        out: the run directory: checkpoints, metrics.jsonl, curves.png and `final/`.
        budget: seconds of training with the budget recipe's defaults (vocabulary, shape,
            objective, masking, schedule); give exactly one of budget, max_steps, max_time.
        tokenizer: vocab.txt or a tokenizer directory; None: the `init_from` model's, or a
            vocabulary of `vocab_size` (the recipe's with a budget) trained on the corpus.
        vocab_size: pieces of the vocabulary trained on the corpus when there is no tokenizer.
        model_size: a `BertConfig` preset (tiny ... large) for a new model.
        model_config: the architecture of a new model, as a config.json path or a `BertConfig`.
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
        plan: the budget recipe planned for the machine (`bertlab.training.budget_plan`), set by
            `run_pretraining`; None: the measured CPU recipe until then. Not a flag.
        The rest are the fields of `PretrainDataConfig` and `PretrainConfig` of the same names.
    """

    corpus: Sequence[str | os.PathLike]
    out: str | os.PathLike
    budget: float | None = None
    max_steps: int | None = None
    max_time: float | None = None
    tokenizer: str | os.PathLike | None = None
    vocab_size: int | None = None
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
    plan: BudgetPlan | None = None

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
        if self.model_size is not None and self.model_size not in PRESETS:
            raise ValueError(
                f"unknown model size {self.model_size!r}; choose one of {', '.join(PRESETS)}"
            )
        if self.position_init is not None:
            if self.init_from is not None:
                raise ValueError(
                    "position_init sets a new model's positions; init_from keeps the model's own"
                )
            if self.position_init not in POSITION_INITS:
                raise ValueError(f"position_init must be one of {POSITION_INITS}")
        if self.lang not in LANGS:
            raise ValueError(f"unknown lang {self.lang!r}; choose one of {', '.join(LANGS)}")
        self.corpus_reading()  # raises ValueError for an unknown format
        if self.objective is not None:
            objective_data(self.objective)  # raises ValueError for an unknown objective
        for name in ("dropout", "finetune_dropout"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 1:
                raise ValueError(f"{name} must be in [0, 1), got {value}")
        if self.vocab_size is not None and self.tokenizer is not None:
            raise ValueError("give a tokenizer or a vocab_size to train one, not both")
        if self.tokenizer is None and self.init_from is None and self.vocabulary_size() is None:
            raise ValueError(
                "give a tokenizer (vocab.txt or a tokenizer directory), a vocab_size to train "
                "one on the corpus, or a budget"
            )
        self.data_config()  # each raises ValueError on a bad value
        self.loop_config()
        own = self.objective_entry().setting_names()
        for other in OBJECTIVES.values():
            given = [name for name in other.setting_names() if getattr(self, name) is not None]
            if given and not set(given) <= set(own):
                raise ValueError(f"{' and '.join(given)} apply to objective {other.name} only")
        self.objective_settings()

    # --- what the run resolves to -------------------------------------------------------------

    def corpus_reading(self) -> CorpusReading:
        """How the corpus files are read: the format and the text's column."""
        return CorpusReading(self.corpus_format, self.text_column)

    def recipe(self) -> BudgetRecipe | None:
        """The budget recipe, with a budget (the machine's plan once planned); None otherwise."""
        if self.budget is None:
            return None
        return self.plan.recipe if self.plan is not None else budget_recipe(self.budget)

    def _chosen(self, name: str) -> Any:
        """The field's value, else the recipe's (with a budget), else None (the config default)."""
        value = getattr(self, name)
        recipe = self.recipe()
        if value is None and recipe is not None and name in _RECIPE_FIELDS:
            return getattr(recipe, name)
        return value

    def data_config(self) -> PretrainDataConfig:
        values = {name: self._chosen(name) for name in _DATA_FIELDS if hasattr(self, name)}
        values = {name: value for name, value in values.items() if value is not None}
        objective = values.get("objective", PretrainDataConfig.objective)
        if self.pack_sequences is None:  # the recipe packs, but NSP needs sentence pairs
            recipe = self.recipe()
            values["pack_sequences"] = bool(recipe and recipe.pack_sequences) and (
                not objective_data(objective).is_pair
            )
        if self.max_predictions_per_seq is None:
            length = values.get("max_seq_length", PretrainDataConfig.max_seq_length)
            rate = values.get("mlm_probability", PretrainDataConfig.mlm_probability)
            values["max_predictions_per_seq"] = math.ceil(length * rate)
        return PretrainDataConfig(**values)

    def loop_config(self) -> PretrainConfig:
        values = {name: self._chosen(name) for name in _LOOP_FIELDS if hasattr(self, name)}
        values = {name: value for name, value in values.items() if value is not None}
        if self.budget is not None:
            values["max_time"] = self.budget
        if self.num_workers is None and torch.cuda.is_available():
            values["num_workers"] = gpu_data_workers()
        return PretrainConfig(**values)

    def objective_entry(self) -> Objective:
        """The objective's entry in `bertlab.training.objectives.OBJECTIVES`."""
        return objective_of(self.data_config())

    def objective_settings(self) -> Any:
        """The objective's own settings (ELECTRA's `ElectraConfig`): the fields given, else
        their defaults; None for an objective without settings."""
        objective = self.objective_entry()
        return objective.settings({name: getattr(self, name) for name in objective.setting_names()})

    def vocabulary_size(self) -> int | None:
        """The size of the vocabulary to train on the corpus, or None when there is one."""
        if self.tokenizer is not None or self.init_from is not None:
            return None
        recipe = self.recipe()
        return self.vocab_size or (recipe.vocab_size if recipe is not None else None)

    def shape(self) -> str | None:
        """The preset of a new model; None for `model_config` and `init_from`."""
        if self.model_config is not None or self.init_from is not None:
            return None
        recipe = self.recipe()
        return self.model_size or (recipe.model_size if recipe else DEFAULT_MODEL_SIZE)

    def planned(self, plan: BudgetPlan) -> PretrainRun:
        """This run with the budget recipe of `plan`."""
        if self.budget is None:
            raise ValueError("only a run with a budget has a plan")
        return dataclasses.replace(self, plan=plan)

    def pretrain_dropout(self) -> float | None:
        """The dropout while pre-training; None keeps the model's own."""
        recipe = self.recipe()
        if self.dropout is None and recipe is not None and self.init_from is None:
            return recipe.dropout
        return self.dropout

    def position_initialization(self) -> str:
        recipe = self.recipe()
        return self.position_init or (recipe.position_init if recipe else "normal")

    def final_dropout(self) -> float | None:
        """The dropout to write into the final model's config.json, or None to leave it."""
        if self.finetune_dropout is not None:
            return self.finetune_dropout
        return FINETUNE_DROPOUT if self.budget is not None and self.dropout is None else None

    def describe(self) -> str:
        """One line: what the run trains, e.g. "BERT-mini, 8,000-piece vocabulary ..."."""
        data, loop = self.data_config(), self.loop_config()
        if self.shape():
            shape = f"BERT-{self.shape()}"
        elif isinstance(self.model_config, BertConfig):
            config = self.model_config
            shape = f"{config.num_hidden_layers} x {config.hidden_size} model"
        else:
            shape = "model as given"
        size = self.vocabulary_size()
        vocabulary = (
            f"{size:,}-piece vocabulary trained on the corpus" if size else "tokenizer as given"
        )
        dropout = self.pretrain_dropout()
        objective = self.objective_entry().describe(data, self.objective_settings())
        return (
            f"{shape}, {vocabulary}, {objective}, "
            f"{'packed ' if data.pack_sequences else ''}sequences of {data.max_seq_length}, "
            f"batch {loop.batch_size}, {loop.schedule} to {loop.learning_rate:g}, dropout "
            f"{'as the model' if dropout is None else f'{dropout:g}'}"
        )
