"""Pre-training as one library call: `run_pretraining(PretrainRun(...))`.

`PretrainRun` describes a whole run: the corpus and the run directory, how long (`budget`,
`max_steps` or `max_time`), where the tokenizer and the model come from, and every setting of
the data and the loop. Each field is named like the `bertlab pretrain` flag it comes from, and
None means "not chosen": the budget recipe's value with a `budget` (`bertlab.training.budget`),
otherwise the default of `PretrainDataConfig` / `PretrainConfig`. The CLI parses flags into a
`PretrainRun`; the demo and the experiments build one directly.

    result = run_pretraining(PretrainRun(corpus=("reviews.txt",), out="runs/x", budget=3600))
    result.final_dir  # runs/x/final: a BERT in the Hugging Face layout, with its tokenizer

Bad settings raise `ValueError` when the `PretrainRun` is built, before anything is written.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertlab.core import hub
from bertlab.core.atomic import (
    LOCK_FILE,
    WriteError,
    atomic_directory,
    remove_temporaries,
    run_lock,
)
from bertlab.core.config import (
    PRESETS,
    BertConfig,
    PretrainConfig,
    PretrainDataConfig,
    check_training_time,
    objective_data,
)
from bertlab.core.corpus_sources import CorpusReading, open_corpus
from bertlab.core.model_card import ModelCard, write_model_card
from bertlab.core.outputs import check_outputs
from bertlab.core.runtime import (
    SINGLE_PROCESS,
    DistributedContext,
    barrier,
    from_main,
    gathered,
    set_seed,
)
from bertlab.core.wording import Worded
from bertlab.data.corpus import (
    TokenizedCorpus,
    build_corpus,
    check_objective,
    preflight_report,
)
from bertlab.data.corpus_encode import sniff_lang
from bertlab.data.preflight import PreflightReport
from bertlab.data.pretraining import SpecialIds
from bertlab.tokenizer.training import TokenizerTrainingConfig, train_tokenizer
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training import checkpointing
from bertlab.training.budget import (
    FINETUNE_DROPOUT,
    POSITION_INITS,
    BudgetRecipe,
    budget_recipe,
    init_positions,
    restore_finetune_dropout,
)
from bertlab.training.budget_plan import (
    PLAN_FILE,
    BudgetPlan,
    load_plan,
    nearest_preset,
    plan_budget,
    read_plan,
    save_plan,
)
from bertlab.training.finetune import FINETUNE_OUTPUTS
from bertlab.training.objectives import OBJECTIVES, Objective, objective_of
from bertlab.training.pretrain_data import held_out_split, training_stream
from bertlab.training.pretrain_loop import FINAL_DIR, PretrainResult, pretrain
from bertlab.training.pretrain_options import (
    CORPUS_CACHE_DIR,
    DEFAULT_MODEL_SIZE,
    LANGS,
    TOKENIZER_DIR,
)
from bertlab.training.pretrain_stats import (
    PLATEAU_DOCS,
    near_chance_warning,
    plateau_warning,
    unigram_plateau,
)

logger = logging.getLogger(__name__)

# Training memory per layer and token, from Korthikanti et al. 2022 ("Reducing Activation
# Recomputation in Large Transformer Models", section 4.1): s·b·h·(34 + 5·a·s/h) bytes in 16-bit,
# twice that in fp32. Weights, gradients and Adam's two moments: 16 bytes per parameter in fp32.
ACTIVATION_BYTES_PER_HIDDEN = 34
ATTENTION_BYTES_PER_HEAD_POSITION = 5
FP32_FACTOR = 2
TRAINING_BYTES_PER_PARAMETER = 16
MEMORY_HEADROOM = 0.9  # refuse when the estimate exceeds this share of physical memory

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


# --- running it -----------------------------------------------------------------------------------


def run_pretraining(
    run: PretrainRun,
    context: DistributedContext = SINGLE_PROCESS,
    show_progress: bool = True,
    say: Callable[[str], None] = logger.info,
) -> PretrainResult:
    """Pre-train as `run` says: tokenizer, tokenized corpus, pre-flight check, model, loop.

    Args:
        run: the run.
        context: this process's place in a torchrun job (one process by default).
        show_progress: progress bars (the main process only).
        say: where the run's report lines go (the main process only).

    Returns:
        The loop's `PretrainResult`: counters, `final_dir` and the last held-out evaluation.

    Raises:
        ValueError: `out` already holds a run (and `resume` is not set), a corpus that cannot
            be trained on, a tokenizer that does not fit the model, a batch too large for this
            machine's memory.
        FileNotFoundError: a missing corpus, tokenizer or model file.
        WriteError: a file could not be written (a full disk); its hint says how to go on.
        KeyboardInterrupt: interrupted; its `hint` names the checkpoint kept and how to go on.
    """
    out = Path(run.out)
    if out.exists() and not out.is_dir():
        raise ValueError(Worded("{out} {path} exists and is not a directory", path=out))
    open_corpus(run.corpus, run.corpus_reading())  # bad files named before anything is written
    config = None if isinstance(run.model_config, BertConfig) else run.model_config
    reads = {"corpus": run.corpus, "tokenizer": run.tokenizer, "init_from": run.init_from}
    # nothing it reads is written over, and nothing is kept in the cache, which is rebuilt whole
    check_outputs(reads | {"model_config": config}, {"out": out}, {"corpus_cache": _cache(run)})
    # One writer per OUT (torchrun's processes are one job: its main process holds it).
    with run_lock(out) if context.is_main else contextlib.nullcontext():
        if context.is_main:
            _check_out(out, run.resume)
        try:
            return _run(run, out, context, show_progress, say)
        except WriteError as error:
            error.hint = _how_to_go_on(out, error)
            raise
        except KeyboardInterrupt as interrupt:  # Ctrl-C (and SIGTERM, which the CLI turns into it)
            interrupt.hint = _how_to_go_on(out)
            raise


def _how_to_go_on(out: Path, error: WriteError | None = None) -> Worded:
    """What to do after a failed write (or an interruption, without `error`): everything
    complete in `out` is kept."""
    latest = checkpointing.latest_checkpoint(out)
    if error is None:
        if latest is None:
            return Worded("no checkpoint was complete: {again} to start over")
        return Worded("{kept} is kept: {again_with_resume} to go on", kept=latest.name)
    fix = "make room" if error.errno in (errno.ENOSPC, errno.EDQUOT) else "fix that"
    if latest is None:
        return Worded("no checkpoint was complete: {fix}, then {again}", fix=fix)
    return Worded("{kept} is kept: {fix}, then {again_with_resume}", kept=latest.name, fix=fix)


def _run(
    run: PretrainRun,
    out: Path,
    context: DistributedContext,
    show_progress: bool,
    say: Callable[[str], None],
) -> PretrainResult:
    say = say if context.is_main else _quiet
    show_progress = show_progress and context.is_main
    _check_shared_out(out, context)
    data_config, loop_config = run.data_config(), run.loop_config()
    _check_fits(run, data_config, loop_config)  # before a vocabulary is trained on the corpus
    tokenizer = _tokenizer(run, out, context, show_progress, say)
    cache = _cache(run)
    files, reading = run.corpus, run.corpus_reading()
    whole_word = data_config.do_whole_word_mask
    if run.resume:  # a resume with other settings is refused before its corpus cache is built
        _check_resumable(run, out, tokenizer, context)
    _model_config(run, tokenizer, data_config)  # a tokenizer that does not fit, refused here
    if context.is_main:
        corpus = build_corpus(
            files, tokenizer, cache, run.lang, show_progress, whole_word, reading=reading
        )
    barrier(context)
    if not context.is_main:
        corpus = build_corpus(files, tokenizer, cache, run.lang, False, whole_word, reading=reading)
    report = preflight_report(corpus, tokenizer, data_config.objective, data_config.max_seq_length)
    for line in report.summary():
        say(line)
    check_objective(report, data_config.objective)
    warning = _no_held_out_warning(corpus.num_documents, loop_config.eval_examples)
    if warning is not None and say == logger.info:  # the default `say`: logged as a warning
        logger.warning(warning)
    elif warning is not None:
        say(f"warning: {warning}")  # with the pre-flight report's warnings
    if run.budget is not None:
        if run.plan is None:
            run = run.planned(_plan(run, out, corpus, tokenizer, context))
        data_config, loop_config = run.data_config(), run.loop_config()
        say(f"budget recipe for {run.budget / 60:g} min: {run.describe()}")
        for line in run.plan.lines():
            say(f"  {line}")
    model_config = _model_config(run, tokenizer, data_config)
    check_memory(model_config, loop_config.micro_batch_size, data_config.max_seq_length)
    set_seed(loop_config.seed)
    objective, settings = run.objective_entry(), run.objective_settings()
    model = objective.build_model(model_config, settings, run.init_from)
    if run.init_from is None:
        position_init = run.position_initialization()
        init_positions(model.bert.embeddings, position_init, model_config.initializer_range)
    num_parameters = sum(p.numel() for p in model.parameters())
    say(
        f"model: {num_parameters / 1e6:.1f}M parameters, {model_config.num_hidden_layers} layers, "
        f"hidden {model_config.hidden_size}; global batch "
        f"{loop_config.batch_size * context.world_size} x {data_config.max_seq_length} tokens; "
        f"{context.world_size} process(es)"
    )
    result = pretrain(
        model, tokenizer, corpus, data_config, loop_config, out, context, run.resume, show_progress
    )
    progress = result.progress
    say(
        f"trained {progress.step:,} steps, {progress.tokens:,} tokens in "
        f"{progress.elapsed / 60:.1f} min"
    )
    plateau = unigram_plateau(
        result.last_eval or {}, progress.tokens, loop_config.plateau_min_tokens
    )
    if result.last_eval:
        line = "held-out: " + ", ".join(f"{k} {v:.4f}" for k, v in result.last_eval.items())
        if plateau is not None:
            line += (
                f" — still on the unigram plateau (accuracy {plateau[0]:.1%} vs unigram "
                f"{plateau[1]:.1%})"
            )
        say(line)
    warning = near_chance_warning(result.last_eval)
    if warning is not None:
        say(warning)
    warning = plateau_warning(result.last_eval, progress.tokens, loop_config.plateau_min_tokens)
    if warning is not None:
        logger.warning(warning)
        if say != logger.info:  # the default `say` would log it a second time
            say(warning)
    dropout = run.final_dropout()
    if dropout is not None and context.is_main and result.final_dir is not None:
        restore_finetune_dropout(result.final_dir, dropout)
        say(f"{result.final_dir}/config.json has dropout {dropout:g} for fine-tuning")
    if context.is_main and result.final_dir is not None:
        card = pretraining_card(
            run, corpus.meta, report, model_config, num_parameters, result, context.world_size
        )
        write_model_card(result.final_dir, card)
    return result


def pretraining_card(
    run: PretrainRun,
    corpus_meta: dict[str, Any],
    report: PreflightReport,
    model_config: BertConfig,
    num_parameters: int,
    result: PretrainResult,
    world_size: int,
) -> ModelCard:
    """The model card of OUT/final: the corpus, the recipe and what this run measured."""
    loop = run.loop_config()
    progress = result.progress
    shape = (
        f"{model_config.num_hidden_layers} layers, hidden size {model_config.hidden_size}, "
        f"{model_config.num_attention_heads} heads, {num_parameters:,} parameters"
    )
    start = f"continued from `{run.init_from}`" if run.init_from is not None else "from scratch"
    files = ", ".join(
        f"`{Path(f['path']).name}` ({f['bytes']:,} bytes)" for f in corpus_meta.get("files", ())
    )
    langs = sorted(set(corpus_meta.get("langs", ())))
    _, held_out = held_out_split(report.num_documents, loop.eval_examples)
    tokenizer = run.tokenizer or run.init_from
    vocabulary = f"`{tokenizer}`" if tokenizer is not None else "trained on the corpus by bertlab"
    metrics: dict[str, Any] = {
        "steps": progress.step,
        "tokens trained on": progress.tokens,
        "training minutes": progress.elapsed / 60,
    }
    metrics |= {f"held-out {name}": value for name, value in (result.last_eval or {}).items()}
    note = "Measured by this run; held-out figures are on the held-out documents, at the run's "
    note += "own masking rate."
    plateau = unigram_plateau(result.last_eval or {}, progress.tokens, loop.plateau_min_tokens)
    if result.last_eval:
        metrics["still on the unigram plateau"] = plateau is not None
    if plateau is not None:
        note += (
            f" **Warning: this model is still on the unigram plateau** (held-out accuracy "
            f"{plateau[0]:.1%} vs {plateau[1]:.1%} for word frequencies alone, after "
            f"{progress.tokens:,} tokens): it has learned little beyond word frequencies and "
            f"tends to fine-tune to the majority class ({PLATEAU_DOCS})."
        )
    objective = run.objective_entry()
    what = objective.card_summary(shape)
    uses = objective.uses
    return ModelCard(
        title=f"{Path(run.out).name}: a BERT pre-trained with bertlab",
        summary=f"{what}, pre-trained {start} by `bertlab pretrain` on the corpus below.",
        pipeline_tag=uses.pipeline_tag,
        intended_use="A starting point for fine-tuning on a task (`bertlab finetune --model "
        f"DIR`), for feature extraction and for looking inside. What it can do: "
        f"{uses.commands}. It has seen only the corpus below, for the time below: judge it by "
        "the held-out numbers, and fine-tune and test it before relying on it.",
        data=[
            f"corpus: {files}",
            f"{report.num_documents:,} documents, {report.num_sentences:,} sentences, "
            f"{report.num_tokens:,} tokens (language: {', '.join(langs) or 'unknown'})",
            f"held out for evaluation: the last {held_out:,} documents",
            f"vocabulary: {model_config.vocab_size:,} pieces, {vocabulary}",
        ],
        recipe=_pretraining_recipe(run, model_config, world_size),
        metrics=metrics,
        metrics_note=note,
        how_to_use=[
            "# DIR: this folder, or its Hub id once uploaded; transformers loads it as well",
            uses.example,
            "bertlab finetune --task sst2 --train train.tsv --dev-fraction 0.1 --model DIR "
            "--out runs/sst2",
        ],
        base_model=None if run.init_from is None else str(run.init_from),
        language=langs,
    )


def _pretraining_recipe(run: PretrainRun, model_config: BertConfig, world_size: int) -> dict:
    data, loop = run.data_config(), run.loop_config()
    recipe = {
        "objective": data.objective,
        "sequence length": data.max_seq_length,
        "masking rate": data.mlm_probability,
        "whole-word masking": data.do_whole_word_mask,
        "packed sequences": data.pack_sequences,
        "global batch (sequences)": loop.batch_size * world_size,
        "peak learning rate": loop.learning_rate,
        "schedule": f"{loop.schedule}, warmup {loop.warmup_proportion:g} of the run",
        "weight decay": loop.weight_decay,
        "dropout while pre-training": model_config.hidden_dropout_prob,
        "precision": loop.precision,
        "seed": loop.seed,
        "processes": world_size,
    }
    if run.final_dropout() is not None:
        recipe["dropout written for fine-tuning"] = run.final_dropout()
    recipe |= run.objective_entry().recipe_rows(run.objective_settings())
    if run.budget is not None:
        recipe = {"budget recipe": f"{run.budget / 60:g} min: {run.describe()}"} | recipe
        if run.plan is not None:
            recipe["budget recipe planned"] = "; ".join(run.plan.lines())
    return recipe


def _plan(
    run: PretrainRun,
    out: Path,
    corpus: TokenizedCorpus,
    tokenizer: Tokenizer,
    context: DistributedContext,
) -> BudgetPlan:
    """The budget's plan for this machine: OUT's (a resumed run keeps its choices), else made
    here (by every process, each measuring its own device) and saved to OUT/budget_plan.json.
    The main process's plan is every process's: none reads the others' files to decide."""
    saved = _saved_plan(run, out, tokenizer, context) if context.is_main else None
    saved = from_main(None if saved is None else saved.to_json(), context)
    if saved is not None:
        return BudgetPlan.from_json(saved)
    loop = run.loop_config()
    special = SpecialIds.from_vocab(tokenizer.get_vocab())
    spec = training_stream(corpus, special, tokenizer.vocab_size, run.data_config(), loop)
    size = _planned_size(run, tokenizer)
    plan = plan_budget(run.budget, context.device(), size, spec, loop.precision, context)
    plan = BudgetPlan.from_json(from_main(plan.to_json(), context))
    if context.is_main:
        save_plan(out, plan)
    return plan


def _saved_plan(
    run: PretrainRun, out: Path, tokenizer: Tokenizer, context: DistributedContext
) -> BudgetPlan | None:
    """OUT/budget_plan.json's plan for this run on this machine, if there is one."""
    device = context.device()
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    size = _planned_size(run, tokenizer)
    return load_plan(out, run.budget, size, device_name, context.world_size)


def _planned_size(run: PretrainRun, tokenizer: Tokenizer) -> str | None:
    """The size a budget plans: a model given as a folder or config is its nearest preset."""
    size = run.model_size
    if size is None and (run.init_from is not None or run.model_config is not None):
        size = nearest_preset(_model_config(run, tokenizer, run.data_config()))
    return size


def _check_resumable(
    run: PretrainRun, out: Path, tokenizer: Tokenizer, context: DistributedContext
) -> None:
    """Refuse a resume with other settings (`checkpointing.check_resumable`) from what is known
    before the corpus is read. A budget run without a saved plan is left to the loop's own
    check."""
    if run.budget is not None and run.plan is None:
        plan = _saved_plan(run, out, tokenizer, context)
        if plan is None:
            _check_same_budget(run, out, tokenizer)
            return
        run = run.planned(plan)
    data_config, loop_config = run.data_config(), run.loop_config()
    model_config = _model_config(run, tokenizer, data_config)
    checkpointing.check_resumable(
        out, checkpointing.setup_key(data_config, loop_config, context, model_config)
    )


def _check_shared_out(out: Path, context: DistributedContext) -> None:
    """Refuse a torchrun job whose processes do not all see OUT as the main process writes it:
    they read its vocabulary, checkpoints and plan, so on several machines OUT must be on a file
    system they share. Every process raises alike (none is left waiting for the others)."""
    if not context.is_distributed:
        return
    holder = from_main(f"{os.getpid()}\n", context)  # what the main process's lock file holds
    lock = out / LOCK_FILE
    sees = lock.is_file() and lock.read_text(encoding="utf-8") == holder
    blind = [rank for rank, seen in enumerate(gathered(sees, context)) if not seen]
    if blind:
        raise ValueError(
            Worded(
                "process {ranks} of this torchrun job cannot see {out} {path} as the main "
                "process writes it; on several machines {out} must be a folder on a file system "
                "that they all share (e.g. NFS), at the same path",
                ranks=", ".join(map(str, blind)),
                path=out,
            )
        )


def _no_held_out_warning(num_documents: int, eval_examples: int) -> str | None:
    """Why a run that asks for evaluation gets none: too few documents to hold some out."""
    if not eval_examples or held_out_split(num_documents, eval_examples)[1]:
        return None
    needed = next(n for n in itertools.count(num_documents) if held_out_split(n, eval_examples)[1])
    return (
        f"the corpus has {num_documents} document{'s' if num_documents != 1 else ''}, fewer "
        f"than the {needed} needed to hold some out for evaluation: --eval-every evaluates "
        "nothing and the unigram plateau goes unchecked; give at least "
        f"{needed} documents (a blank line between two)"
    )


def _check_same_budget(run: PretrainRun, out: Path, tokenizer: Tokenizer) -> None:
    """Refuse a resume with another budget or model size than OUT's plan, before the corpus is
    read and the plan made again (and saved over OUT's)."""
    saved = read_plan(out)
    if saved is None:
        return
    for key, was, now in (
        ("budget", f"{saved.budget:g} s", f"{run.budget:g} s"),
        ("model size", repr(saved.model_size), repr(_planned_size(run, tokenizer))),
    ):
        if was != now:
            raise ValueError(
                Worded(
                    "cannot resume from {where}: its plan ({plan}) is for {key} {was}, now "
                    "{now}; use the same settings or a new {out}",
                    where=out,
                    plan=PLAN_FILE,
                    key=key,
                    was=was,
                    now=now,
                )
            )


def _cache(run: PretrainRun) -> Path:
    """The tokenized corpus's folder: `corpus_cache`, else OUT/corpus."""
    return (
        Path(run.corpus_cache) if run.corpus_cache is not None else Path(run.out) / CORPUS_CACHE_DIR
    )


def _quiet(line: str) -> None:
    """`say` of the processes other than the main one."""


def _check_out(out: Path, resume: bool) -> None:
    """Refuse to start over a run that can be resumed or is finished, or in a fine-tuning run's
    directory; clear what killed writers left (temporary files and checkpoints): a run killed
    before its first checkpoint was complete holds nothing to resume, and runs again from the
    start."""
    for directory in (out, out / checkpointing.CHECKPOINTS_DIR):
        remove_temporaries(directory)
    has_checkpoint = checkpointing.latest_checkpoint(out) is not None
    if not resume and (has_checkpoint or (out / FINAL_DIR).exists()):
        raise ValueError(
            Worded(
                "{out} {path} already holds a run; add {resume} or choose another {out}", path=out
            )
        )
    finetuned = [name for name in FINETUNE_OUTPUTS if (out / name).exists()]
    if finetuned:
        raise ValueError(
            Worded(
                "{out} {path} holds a fine-tuning run ({name}); choose another {out}",
                path=out,
                name=finetuned[0],
            )
        )


def _tokenizer(
    run: PretrainRun,
    out: Path,
    context: DistributedContext,
    show_progress: bool,
    say: Callable[[str], None],
) -> Tokenizer:
    """The run's tokenizer: given, the `init_from` model's, or trained on the corpus into
    OUT/tokenizer (once: a resumed run finds it there)."""
    path = run.tokenizer if run.tokenizer is not None else run.init_from
    if path is not None:
        return Tokenizer.from_pretrained(path)
    directory = out / TOKENIZER_DIR
    if context.is_main and not (directory / "vocab.txt").is_file():
        size = run.vocabulary_size()
        lang = sniff_lang(open_corpus(run.corpus, run.corpus_reading())[0], run.lang)
        recipe = run.recipe() or BudgetRecipe()
        config = TokenizerTrainingConfig(
            vocab_size=size, min_ideograph_frequency=recipe.ideograph_frequency(lang)
        )
        say(f"training a vocabulary of {size:,} pieces on the corpus ({lang})")
        tokenizer, report = train_tokenizer(
            run.corpus, config, show_progress=show_progress, reading=run.corpus_reading()
        )
        for line in report.summary():
            say(f"  {line}")
        with atomic_directory(directory) as temporary:
            tokenizer.save_pretrained(temporary)
    barrier(context)
    return Tokenizer.from_pretrained(directory)


def _model_config(
    run: PretrainRun, tokenizer: Tokenizer, data_config: PretrainDataConfig
) -> BertConfig:
    """The architecture: the `init_from` model's, `model_config`, or the preset's for the
    tokenizer's vocabulary; causal for `clm`; with the pre-training dropout."""
    config = _architecture(run, tokenizer)
    if config.vocab_size != tokenizer.vocab_size:
        raise ValueError(
            f"the tokenizer has {tokenizer.vocab_size} tokens but the model's vocabulary has "
            f"{config.vocab_size}; use the model's own tokenizer (or a config with "
            f"vocab_size {tokenizer.vocab_size})"
        )
    _check_length(config, data_config)
    config = objective_of(data_config).model_config(config)
    dropout = run.pretrain_dropout()
    if dropout is not None:
        config = config.replace(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    return config


def _architecture(run: PretrainRun, tokenizer: Tokenizer | None = None) -> BertConfig:
    """The model as given: the `init_from` model's config, `model_config`, or the preset at the
    tokenizer's vocabulary size (None: before the tokenizer is known, the size to train, else
    the preset's default)."""
    if run.init_from is not None:
        return BertConfig.from_json_file(hub.resolve(run.init_from) / "config.json")
    if isinstance(run.model_config, BertConfig):
        return run.model_config
    if run.model_config is not None:
        return BertConfig.from_json_file(run.model_config)
    if tokenizer is None:
        size = run.vocabulary_size()
        return BertConfig.from_preset(run.shape(), **({"vocab_size": size} if size else {}))
    return BertConfig.from_preset(
        run.shape(), vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id
    )


def _check_fits(
    run: PretrainRun, data_config: PretrainDataConfig, loop_config: PretrainConfig
) -> None:
    """Refuse, before the tokenizer and the corpus, sequences longer than the model's positions
    and a batch beyond this machine's memory (a budget's batch is planned on the corpus, later;
    the preset's vocabulary of 30,522 stands for a given tokenizer's here)."""
    config = _architecture(run)
    _check_length(config, data_config)
    if run.budget is None:
        check_memory(config, loop_config.micro_batch_size, data_config.max_seq_length)


def _check_length(config: BertConfig, data_config: PretrainDataConfig) -> None:
    """Refuse sequences longer than the model's positions."""
    if data_config.max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"--max-seq-length {data_config.max_seq_length} exceeds the model's "
            f"max_position_embeddings {config.max_position_embeddings}"
        )


def check_memory(config: BertConfig, batch_size: int, length: int) -> None:
    """Refuse a micro-batch whose training memory clearly exceeds the machine's RAM.

    Raises:
        ValueError: the estimate exceeds MEMORY_HEADROOM of the physical memory.
    """
    layer = batch_size * length * config.hidden_size
    per_layer = layer * (
        ACTIVATION_BYTES_PER_HIDDEN
        + ATTENTION_BYTES_PER_HEAD_POSITION
        * config.num_attention_heads
        * length
        / config.hidden_size
    )
    parameters = config.vocab_size * config.hidden_size + config.num_hidden_layers * (
        12 * config.hidden_size**2
    )
    needed = FP32_FACTOR * per_layer * config.num_hidden_layers
    needed += TRAINING_BYTES_PER_PARAMETER * parameters
    available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if needed > MEMORY_HEADROOM * available:
        raise ValueError(
            f"a micro-batch of {batch_size} x {length} tokens needs about {needed / 2**30:.0f} GiB "
            f"to train, more than this machine's {available / 2**30:.0f} GiB; lower --batch-size "
            "and raise --gradient-accumulation-steps"
        )
