"""What a transfer experiment runs: `TransferConfig`, its columns, its settings.

Its defaults, arms and objectives are declared without torch in `transfer_options`, its rows and
corpora in `transfer_rows`, so that `--help` lists them fast.

`bertlab experiment transfer` (`transfer`) runs it; `bertlab experiment compare`
(`transfer_compare`) reads what it left. Both name the same folders and columns
from here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.apps.experiments.grid import GridTask
from bertlab.apps.experiments.transfer_options import (
    ARMS,
    CONTINUED,
    DEFAULT_ARMS,
    DEFAULT_BUDGET_MINUTES,
    DEFAULT_LANG,
    DEFAULT_POINTS,
    DEFAULT_SEEDS,
    DEFAULT_TASK_TEXT_REPEATS,
    GENERAL,
    IN_DOMAIN,
    MIXED,
    POINTED_ARMS,
    PRETRAIN_OBJECTIVES,
    PRETRAINED_ARMS,
    WORD_VECTORS,
)
from bertlab.apps.experiments.transfer_rows import (
    CORPORA,
    FINETUNE_BATCH_SIZE,
    FINETUNE_LEARNING_RATE,
    IN_DOMAIN_CORPORA,
    ROWS,
)
from bertlab.apps.flows import config_settings
from bertlab.core.config import PRESETS, check_training_time
from bertlab.core.run_folder import FINAL_DIR
from bertlab.training.pretraining.budget import FINETUNE_DROPOUT, budget_recipe
from bertlab.training.pretraining.run import PretrainRun, ResolvedRun

SCRATCH = 0  # the point "0 minutes of pre-training": a random model of the recipe's shape
CHECKPOINT_MINUTES = 5.0  # pre-training checkpoints, from which the points are picked
TASK_TEXT_FILE = "task_text.txt"  # with --task-text: the tasks' unlabeled training text
EVAL_EVERY_STEPS = 250  # held-out MLM evaluations: a learning curve of a few dozen points
PRETRAIN_DIR = "pretrain"


@dataclass(frozen=True)
class TransferConfig:
    """What one experiment runs."""

    data_dir: Path
    out: Path
    lang: str = DEFAULT_LANG
    budget_minutes: float = DEFAULT_BUDGET_MINUTES
    points: tuple[float, ...] = DEFAULT_POINTS  # minutes, besides 0 and the whole budget
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    tasks: tuple[str, ...] | None = None  # names in ROWS[lang]; None: all
    corpus: tuple[str, ...] | None = None  # files; None: CORPORA[lang] under data_dir
    learning_rate: float = FINETUNE_LEARNING_RATE  # fine-tuning
    model_size: str | None = None  # PRESETS name, pre-trained and from scratch; None: the recipe's
    pretrain_learning_rate: float | None = None  # the peak; None: the recipe's
    tokenizer: Path | None = None  # vocab.txt or tokenizer directory; None: trained on the corpus
    finetune_dropout: float = FINETUNE_DROPOUT  # every model's, pre-trained and from scratch
    # > 0: the text of the tasks' training parts joins the corpus this many times (`task_text`)
    task_text_repeats: int = DEFAULT_TASK_TEXT_REPEATS
    pretrain_objective: str | None = None  # PRETRAIN_OBJECTIVES; None: the recipe's
    pretrain_mlm_probability: float | None = None  # share of tokens masked; None: the recipe's
    arms: tuple[str, ...] = DEFAULT_ARMS  # names in ARMS: the columns besides scratch
    in_domain_corpus: tuple[str, ...] | None = None  # None: IN_DOMAIN_CORPORA[lang] under data_dir
    continue_minutes: float | None = None  # the continued arm's in-domain minutes; None: budget

    def __post_init__(self) -> None:
        if self.lang not in ROWS:
            raise ValueError(f"unknown language {self.lang!r}; choose one of {', '.join(ROWS)}")
        if self.model_size is not None and self.model_size not in PRESETS:
            raise ValueError(
                f"unknown model size {self.model_size!r}; choose one of {', '.join(PRESETS)}"
            )
        if self.pretrain_learning_rate is not None and not self.pretrain_learning_rate > 0:
            rate = self.pretrain_learning_rate
            raise ValueError(f"the pre-training learning rate must be positive, got {rate}")
        if not 0 <= self.finetune_dropout < 1:
            raise ValueError(
                f"the fine-tuning dropout must be in [0, 1), got {self.finetune_dropout}"
            )
        if self.task_text_repeats < 0:
            raise ValueError(f"--task-text must be 0 or more, got {self.task_text_repeats}")
        if self.pretrain_objective not in (None, *PRETRAIN_OBJECTIVES):
            raise ValueError(
                f"unknown pre-training objective {self.pretrain_objective!r}; "
                f"choose one of {', '.join(PRETRAIN_OBJECTIVES)}"
            )
        if self.pretrain_mlm_probability is not None and not 0 < self.pretrain_mlm_probability < 1:
            raise ValueError(
                f"the masking rate must be in (0, 1), got {self.pretrain_mlm_probability}"
            )
        if not self.budget_minutes > 0:
            raise ValueError(f"the budget must be positive, got {self.budget_minutes}")
        check_training_time("the budget", self.budget_minutes * 60)
        if any(not 0 < p < self.budget_minutes for p in self.points):
            raise ValueError(f"points must lie strictly between 0 and {self.budget_minutes:g} min")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        if not self.arms or len(set(self.arms)) != len(self.arms) or set(self.arms) - set(ARMS):
            raise ValueError(f"arms must be distinct names of {', '.join(ARMS)}, got {self.arms}")
        if self.needs_in_domain() and not (self.in_domain_corpus or IN_DOMAIN_CORPORA[self.lang]):
            raise ValueError(f"no in-domain corpus for {self.lang}: give --in-domain-corpus")
        if not set(self.arms) & set(PRETRAINED_ARMS):
            raise ValueError("arms need a pre-trained arm: scratch takes its shape and vocabulary")
        if CONTINUED in self.arms and GENERAL not in self.arms:
            raise ValueError("the continued arm continues the general one: add general to arms")
        if self.continue_minutes is not None and not self.continue_minutes > 0:
            raise ValueError(f"--continue-minutes must be positive, got {self.continue_minutes}")
        if self.continue_minutes is not None:
            check_training_time("--continue-minutes", self.continue_minutes * 60)
        known = {t.name for t in ROWS[self.lang]}
        unknown = sorted(set(self.tasks or ()) - known)
        if unknown:
            raise ValueError(f"unknown task(s) {unknown}; choose from {sorted(known)}")

    def selected_tasks(self) -> tuple[GridTask, ...]:
        return tuple(t for t in ROWS[self.lang] if self.tasks is None or t.name in self.tasks)

    def user_corpus_files(self) -> list[Path]:
        """--corpus, else the language's corpora under the data directory."""
        names = self.corpus or tuple(str(self.data_dir / f) for f in CORPORA[self.lang])
        return [Path(name) for name in names]

    def corpus_files(self) -> list[Path]:
        """What is pre-trained on: OUT/task_text.txt with --task-text, then the user's corpus.

        The task text comes first because pre-training holds out the corpus's last documents:
        they stay the user's text, never seen in training, rather than task text that other
        repeats hold.
        """
        first = [self.out / TASK_TEXT_FILE] if self.task_text_repeats else []
        return first + self.user_corpus_files()

    def needs_in_domain(self) -> bool:
        return bool({IN_DOMAIN, MIXED, CONTINUED, WORD_VECTORS} & set(self.arms))

    def in_domain_files(self) -> list[Path]:
        """--in-domain-corpus, else the language's in-domain corpora under the data directory."""
        names = self.in_domain_corpus or tuple(
            str(self.data_dir / f) for f in IN_DOMAIN_CORPORA[self.lang]
        )
        return [Path(name) for name in names]

    def arm_corpus(self, arm: str) -> list[Path]:
        """The files an arm pre-trains on (the task text, if any, first: see `corpus_files`)."""
        first = [self.out / TASK_TEXT_FILE] if self.task_text_repeats else []
        if arm == GENERAL:
            return first + self.user_corpus_files()
        if arm == MIXED:
            return first + self.user_corpus_files() + self.in_domain_files()
        return first + self.in_domain_files()

    def pretrain_dir(self, arm: str = GENERAL) -> Path:
        return self.out / arm_pretrain_dir(arm)

    def pretrain_run(self, resume: bool = False, arm: str = GENERAL) -> PretrainRun:
        """An arm's pre-training: the budget recipe with this experiment's choices.

        The continued arm starts from the general run's final model and reads the in-domain
        corpus for `continue_minutes`, with the recipe's pre-training dropout (none) and BERT's
        dropout handed to fine-tuning, as the other arms.
        """
        checkpoint_minutes = min((CHECKPOINT_MINUTES, *(p / 2 for p in self.points)))
        shared = {
            "corpus": tuple(self.arm_corpus(arm)),
            "out": self.pretrain_dir(arm),
            "lang": self.lang,
            "learning_rate": self.pretrain_learning_rate,
            "objective": self.pretrain_objective,
            "mlm_probability": self.pretrain_mlm_probability,
            "checkpoint_every_minutes": checkpoint_minutes,
            "keep_checkpoints": 0,
            "eval_every_steps": EVAL_EVERY_STEPS,
            "resume": resume,
        }
        if arm == CONTINUED:
            minutes = self.continue_minutes or self.budget_minutes
            return PretrainRun(
                budget=minutes * 60,
                init_from=self.pretrain_dir(GENERAL) / FINAL_DIR,
                dropout=budget_recipe(minutes * 60).dropout,
                finetune_dropout=FINETUNE_DROPOUT,
                **shared,
            )
        return PretrainRun(
            budget=self.budget_minutes * 60,
            tokenizer=self.tokenizer,
            model_size=self.model_size,
            **shared,
        )

    @functools.cached_property
    def resolved(self) -> ResolvedRun:
        """The general arm's pre-training, resolved once (on first use): its objective
        (`.data.objective`: --pretrain-objective, else the budget recipe's), masking rate
        (`.data.mlm_probability`) and encoder (`.shape`, a PRESETS name: --model-size, else the
        recipe's), which the task text, the scratch column and the results read."""
        return self.pretrain_run().resolved

    def all_points(self) -> tuple[float, ...]:
        return (SCRATCH, *sorted(self.points), self.budget_minutes)

    def columns(self) -> list[str]:
        """The table's columns: scratch, then the general run's points; with arms, every arm's
        points (`general 30min`; not for continued and word-vectors) and the arm itself."""
        if self.arms == (GENERAL,):
            return [point_name(minutes) for minutes in self.all_points()]
        columns = [point_name(SCRATCH)]
        for arm in self.arms:
            if arm in POINTED_ARMS:
                columns += [arm_point_name(arm, minutes) for minutes in sorted(self.points)]
            columns.append(arm)
        return columns

    def fine_tuning_order(self) -> list[str]:
        """`columns` in the order they are fine-tuned: the ends first (scratch and the whole
        budget; with arms, every arm's final model), so that the main comparison is complete as
        early as possible, then the points between them."""
        columns = self.columns()
        ends = [columns[0], columns[-1]] if self.arms == (GENERAL,) else [columns[0], *self.arms]
        return ends + [column for column in columns if column not in ends]


# TransferConfig fields that are no settings: where the inputs and OUT are (the task data is
# checked per task, `flows.check_split`), what a later run may add to (tasks, points, seeds, arms),
# and `learning_rate`, recorded as `finetune_learning_rate`.
NOT_SETTINGS = ("data_dir", "out", "tasks", "points", "seeds", "arms", "learning_rate")
# Settings that came after the first experiments: left out while they take no effect (None), as
# those experiments recorded them.
RECORDED_WHEN_SET = (
    "task_text_repeats",
    "task_text_tasks",
    "pretrain_objective",
    "pretrain_mlm_probability",
    "in_domain_corpus",
    "continue_minutes",
)


def experiment_settings(config: TransferConfig) -> dict[str, Any]:
    """What every finished step of an experiment depends on, as JSON values: the config's fields
    (`flows.config_settings`), but NOT_SETTINGS, as they resolve, with the budget recipe's."""
    recipe = budget_recipe(config.budget_minutes * 60)
    task_text = config.task_text_repeats > 0
    resolved = {
        "corpus": config.corpus_files(),
        "model_size": config.resolved.shape,
        "pretrain_learning_rate": config.pretrain_learning_rate or recipe.learning_rate,
        **{f"recipe.{name}": value for name, value in recipe.to_json().items()},
        "finetune_learning_rate": config.learning_rate,
        "finetune_batch_size": FINETUNE_BATCH_SIZE,
        "task_text_repeats": config.task_text_repeats if task_text else None,
        # The corpus holds these tasks' text: adding a task later would change it.
        "task_text_tasks": [row.name for row in config.selected_tasks()] if task_text else None,
        "in_domain_corpus": config.in_domain_files() if config.needs_in_domain() else None,
        "continue_minutes": (
            config.continue_minutes or config.budget_minutes if CONTINUED in config.arms else None
        ),
    }
    return config_settings(config, NOT_SETTINGS, resolved, RECORDED_WHEN_SET)


def arm_pretrain_dir(arm: str) -> str:
    """The folder of an arm's pre-training run inside OUT: `pretrain`, `pretrain-in-domain`..."""
    return PRETRAIN_DIR if arm == GENERAL else f"{PRETRAIN_DIR}-{arm}"


def point_name(minutes: float) -> str:
    return "scratch" if minutes == SCRATCH else f"{minutes:g}min"


def arm_point_name(arm: str, minutes: float) -> str:
    """An arm's column at a point of its run, e.g. `in-domain 30min`."""
    return f"{arm} {point_name(minutes)}"
