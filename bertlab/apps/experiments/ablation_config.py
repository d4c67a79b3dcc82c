"""What an ablation experiment runs: `AblationConfig`, its rows' labels, its settings.

Its defaults, rows and columns are declared without torch in `ablation_options`, so that
`--help` lists them fast. `bertlab experiment ablation` (`ablation`) runs it; the report
(`ablation_report`) and the command line name the same rows and columns.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.apps.experiments.ablation_options import (
    DEFAULT_BUDGET_MINUTES,
    DEFAULT_SEEDS,
    FEATURE_LEARNING_RATE,
    LTR,
    LTR_BILSTM,
    MLM,
    MLM_NSP,
    ROWS,
    SCRATCH,
    TASKS,
    UNCAPPED_TRAIN_EXAMPLES,
    WORD_VECTORS,
)
from bertlab.apps.experiments.grid import GridTask
from bertlab.apps.experiments.transfer_rows import CORPORA, FINETUNE_LEARNING_RATE
from bertlab.apps.flows import config_settings
from bertlab.core.config import PRESETS, check_training_time
from bertlab.network.feature_head_config import FeatureHeadConfig
from bertlab.training.pretraining.budget import budget_recipe
from bertlab.training.pretraining.run import PretrainRun

LANG = "en"  # the tasks of Tables 5 and 7 are English
FINETUNE_BATCH_SIZE = 32
CHECKPOINT_MINUTES = 5.0  # pre-training checkpoints, so that an interrupted run resumes
EVAL_EVERY_STEPS = 250  # held-out LM evaluations of each pre-training run
WORD_VECTOR_TOKENS = 10_000_000  # corpus tokens word2vec reads (5 epochs): about what a run sees
TOKENIZER_DIR, CORPUS_DIR, PRETRAIN_DIR = "tokenizer", "corpus", "pretrain"
WORD_VECTORS_DIR, FINETUNE_DIR, SHAPES_DIR = "word-vectors", "finetune", "shapes"

# What each of Table 5's rows (`ablation_options.ROWS`) is called in the report.
ROW_LABELS = {
    MLM_NSP: "BERT (MLM + NSP)",
    MLM: "No NSP (MLM only)",
    LTR: "LTR & No NSP",
    LTR_BILSTM: "+ BiLSTM",
    WORD_VECTORS: "Word vectors only (word2vec embeddings, random encoder)",
    SCRATCH: "No pre-training (random encoder)",
}
# The pre-training objective (`PretrainDataConfig.objective`) behind each pre-trained row.
OBJECTIVES = {MLM_NSP: "mlm+nsp", MLM: "mlm", LTR: "clm", LTR_BILSTM: "clm"}
# "+ BiLSTM" (Table 5): the left-to-right model fine-tuned under a random two-layer BiLSTM.
LTR_BILSTM_HEAD = FeatureHeadConfig(layers="last", use_bilstm=True, do_freeze_encoder=False)
# Table 7's feature-based rows, in the paper's order: the frozen MLM + NSP encoder's layers,
# combined, read by a random two-layer BiLSTM (BERT Sec. 5.3).
FEATURE_ROWS = (
    "embeddings",
    "second-to-last",
    "last",
    "sum-last-four",
    "concat-last-four",
    "scalar-mix",
)
FEATURE_LABELS = {
    "embeddings": "Embeddings",
    "second-to-last": "Second-to-Last Hidden",
    "last": "Last Hidden",
    "sum-last-four": "Sum Last Four Hidden",
    "concat-last-four": "Concat Last Four Hidden",
    "scalar-mix": "Weighted Sum All Layers (ELMo scalar mix)",
}
FEATURE_TASK = "conll2003"  # Table 7's task
FEATURE_ROW_PREFIX = "features-"  # run folders of the feature-based block: features-last, ...


# AblationConfig fields that are no settings: where the inputs and OUT are (the task data is
# checked per task, `flows.check_split`), what a later run may add to (seeds, the tasks chosen,
# rows, the feature-based block, Table 6's sizes), and fields recorded under other names:
# `learning_rate` as `finetune_learning_rate`, `uncapped` as the sizes in `tasks`.
NOT_SETTINGS = (
    "data_dir",
    "out",
    "seeds",
    "tasks",
    "rows",
    "feature_based",
    "model_sizes",
    "learning_rate",
    "uncapped",
)


@dataclass(frozen=True)
class AblationConfig:
    """What one ablation experiment runs.

    Attributes:
        data_dir: the shared data directory (`glue/SST-2/...`, `conll2003/`, `squad_v1.1/`).
        out: the experiment directory.
        budget_minutes: pre-training minutes of each objective (the budget recipe's).
        seeds: fine-tuning seeds of every row.
        tasks: names of TASKS; None: all.
        rows: names of ROWS.
        feature_based: run Table 7's feature-based block on CoNLL-2003.
        model_size: the encoder's PRESETS name; None: the budget recipe's for the minutes.
        model_sizes: Table 6: more shapes for the MLM + NSP row, with the same budget.
        corpus: pre-training files; None: the English corpora under data_dir.
        tokenizer: vocab.txt or tokenizer directory; None: one trained on the corpus.
        learning_rate: fine-tuning's peak rate; feature_learning_rate: the feature-based rows'.
        max_examples: caps every task's training, dev and test parts (a quick look, or a test);
            None: the columns' own sizes.
        uncapped: train on the whole carved training parts (`UNCAPPED_TRAIN_EXAMPLES`) instead
            of TASKS' caps, which keep the whole command under 2 hours.
    """

    data_dir: Path
    out: Path
    budget_minutes: float = DEFAULT_BUDGET_MINUTES
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    tasks: tuple[str, ...] | None = None
    rows: tuple[str, ...] = ROWS
    feature_based: bool = True
    model_size: str | None = None
    model_sizes: tuple[str, ...] = ()
    corpus: tuple[str, ...] | None = None
    tokenizer: Path | None = None
    learning_rate: float = FINETUNE_LEARNING_RATE
    feature_learning_rate: float = FEATURE_LEARNING_RATE
    max_examples: int | None = None
    uncapped: bool = False

    def __post_init__(self) -> None:
        if not self.budget_minutes > 0:
            raise ValueError(f"the budget must be positive, got {self.budget_minutes}")
        check_training_time("the budget", self.budget_minutes * 60)
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        known = {task.name for task in TASKS}
        unknown = sorted(set(self.tasks or ()) - known)
        if unknown or (self.tasks is not None and not self.tasks):
            raise ValueError(f"unknown task(s) {unknown}; choose from {sorted(known)}")
        if not self.rows or len(set(self.rows)) != len(self.rows) or set(self.rows) - set(ROWS):
            raise ValueError(f"rows must be distinct names of {', '.join(ROWS)}, got {self.rows}")
        for size in (self.model_size, *self.model_sizes):
            if size is not None and size not in PRESETS:
                raise ValueError(f"unknown model size {size!r}; choose one of {', '.join(PRESETS)}")
        if self.shape() in self.model_sizes or len(set(self.model_sizes)) != len(self.model_sizes):
            raise ValueError(
                f"model_sizes must be distinct and other than the main shape {self.shape()}"
            )
        if self.feature_based and self.tasks is not None and FEATURE_TASK not in self.tasks:
            raise ValueError(f"the feature-based block runs on {FEATURE_TASK}: add it to tasks")
        if not self.learning_rate > 0 or not self.feature_learning_rate > 0:
            raise ValueError("the fine-tuning learning rates must be positive")
        if self.max_examples is not None and self.max_examples < 2:
            raise ValueError(f"max_examples must be at least 2, got {self.max_examples}")

    def selected_tasks(self) -> tuple[GridTask, ...]:
        """The columns, with their sizes capped by `max_examples`."""
        chosen = [task for task in self.columns() if self.tasks is None or task.name in self.tasks]
        if self.max_examples is None:
            return tuple(chosen)
        cap = self.max_examples
        return tuple(
            dataclasses.replace(
                task,
                max_train_examples=min(task.max_train_examples or cap, cap),
                max_dev_examples=min(task.max_dev_examples or cap, cap),
                max_test_examples=min(task.max_test_examples or cap, cap),
            )
            for task in chosen
        )

    def columns(self) -> tuple[GridTask, ...]:
        """Every column at this experiment's training sizes: TASKS, or uncapped."""
        if not self.uncapped:
            return TASKS
        return tuple(
            dataclasses.replace(task, max_train_examples=UNCAPPED_TRAIN_EXAMPLES[task.name])
            for task in TASKS
        )

    def corpus_files(self) -> list[Path]:
        names = self.corpus or tuple(str(self.data_dir / name) for name in CORPORA[LANG])
        return [Path(name) for name in names]

    def shape(self) -> str:
        """The main encoder's PRESETS name: `model_size`, else the recipe's for the budget."""
        return self.model_size or budget_recipe(self.budget_minutes * 60).model_size

    def objectives(self) -> list[str]:
        """The pre-training objectives the rows need, in Table 5's order."""
        needed = {OBJECTIVES[row] for row in self.rows if row in OBJECTIVES}
        if self.feature_based or self.model_sizes or {WORD_VECTORS, SCRATCH} & set(self.rows):
            needed.add("mlm+nsp")  # the features' encoder; the baselines take its shape
        return [name for name in dict.fromkeys(OBJECTIVES.values()) if name in needed]

    def pretrain_dir(self, objective: str, size: str | None = None) -> Path:
        name = objective.replace("+", "-") + ("" if size is None else f"-{size}")
        return self.out / PRETRAIN_DIR / name

    def tokenizer_path(self) -> Path:
        return self.tokenizer or self.out / TOKENIZER_DIR

    def pretrain_run(self, objective: str, size: str | None, resume: bool) -> PretrainRun:
        """One objective's run: the budget recipe with this experiment's corpus, vocabulary,
        shape and minutes; only the objective (and, for Table 6, the shape) differs."""
        return PretrainRun(
            corpus=tuple(self.corpus_files()),
            out=self.pretrain_dir(objective, size),
            budget=self.budget_minutes * 60,
            tokenizer=self.tokenizer_path(),
            model_size=size or self.model_size,
            lang=LANG,
            corpus_cache=self.out / CORPUS_DIR,
            objective=objective,
            checkpoint_every_minutes=min(CHECKPOINT_MINUTES, self.budget_minutes / 2),
            keep_checkpoints=1,
            eval_every_steps=EVAL_EVERY_STEPS,
            resume=resume,
        )

    def settings(self) -> dict[str, Any]:
        """What every finished step depends on, as JSON values: the fields (`flows.
        config_settings`), but NOT_SETTINGS, as they resolve, with the budget recipe's."""
        recipe = budget_recipe(self.budget_minutes * 60)
        resolved = {
            "corpus": self.corpus_files(),
            "model_size": self.shape(),
            **{f"recipe.{name}": value for name, value in recipe.to_json().items()},
            "finetune_learning_rate": self.learning_rate,
            "finetune_batch_size": FINETUNE_BATCH_SIZE,
            "word_vector_tokens": WORD_VECTOR_TOKENS,
            # Every column as this run's sizes have it (`uncapped`), chosen or not.
            "tasks": {task.name: dataclasses.asdict(task) for task in self.columns()},
        }
        return config_settings(self, NOT_SETTINGS, resolved)
