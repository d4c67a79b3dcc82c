"""What a lineage experiment runs: `LineageConfig`, each arm's pre-training run, its settings.

Its arms, tasks, probes and defaults are declared without torch in `lineage_options`, so that
`--help` lists them fast; `lineage` runs it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.apps.experiments.grid import GridTask
from bertlab.apps.experiments.lineage_options import (
    ARM_NAMES,
    ARMS,
    CORPORA,
    DEFAULT_BUDGET_MINUTES,
    DEFAULT_LANG,
    DEFAULT_PROBES,
    DEFAULT_SEEDS,
    NETWORK,
    PROBES,
    TASKS,
    Arm,
    LineageTask,
)
from bertlab.apps.flows import config_settings
from bertlab.core.config import check_training_time
from bertlab.training.pretraining.budget import budget_recipe
from bertlab.training.pretraining.run import PretrainRun

TOKENIZER_DIR = "tokenizer"
CORPUS_DIR = "corpus"
PRETRAIN_DIR = "pretrain"
FINETUNE_DIR = "finetune"
TWINS_DIR = "twins"  # the random arm's seeds
CHECKPOINT_MINUTES = 5.0  # checkpoints of each pre-training run, so that a killed one resumes
EVAL_EVERY_STEPS = 250  # held-out evaluations during pre-training (and one at its end)


@dataclass(frozen=True)
class LineageConfig:
    """What one lineage experiment runs.

    Attributes:
        data_dir: the shared data directory (its tasks' files, its corpora).
        out: the experiment directory.
        lang: "en" or "zh": the tasks, the corpus and the probes of that language.
        budget_minutes: the pre-training minutes of every arm that pre-trains.
        seeds: fine-tuning seeds of every cell (the random arm's weights too).
        tasks: names of TASKS[lang]; None: all.
        arms: names of ARMS.
        probes: probe words (PROBES) of the language; None: DEFAULT_PROBES[lang].
        corpus: pre-training files; None: CORPORA[lang] under data_dir.
        tokenizer: vocab.txt or tokenizer directory; None: one trained on the corpus.
        max_examples: caps every task's training, dev and test parts (a quick look, or a
            test); None: the tasks' own sizes.
    """

    data_dir: Path
    out: Path
    lang: str = DEFAULT_LANG
    budget_minutes: float = DEFAULT_BUDGET_MINUTES
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    tasks: tuple[str, ...] | None = None
    arms: tuple[str, ...] = ARM_NAMES
    probes: tuple[str, ...] | None = None
    corpus: tuple[str, ...] | None = None
    tokenizer: Path | None = None
    max_examples: int | None = None

    def __post_init__(self) -> None:
        if self.lang not in TASKS:
            raise ValueError(f"unknown language {self.lang!r}; choose one of {', '.join(TASKS)}")
        if not self.budget_minutes > 0:
            raise ValueError(f"the budget must be positive, got {self.budget_minutes}")
        check_training_time("the budget", self.budget_minutes * 60)
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and at least one, got {list(self.seeds)}")
        known = [task.name for task in TASKS[self.lang]]
        unknown = sorted(set(self.tasks or ()) - set(known))
        if unknown or (self.tasks is not None and not self.tasks):
            raise ValueError(f"unknown task(s) {unknown} for {self.lang}; choose from {known}")
        if (
            not self.arms
            or len(set(self.arms)) != len(self.arms)
            or set(self.arms) - set(ARM_NAMES)
        ):
            raise ValueError(
                f"arms must be distinct names of {', '.join(ARM_NAMES)}, got {list(self.arms)}"
            )
        for word in self.probes or ():
            if word not in PROBES or PROBES[word].lang != self.lang:
                words = [name for name, probe in PROBES.items() if probe.lang == self.lang]
                raise ValueError(
                    f"no probe {word!r} for {self.lang}; choose from {words or 'none yet'}"
                )
        if self.max_examples is not None and self.max_examples < 2:
            raise ValueError(f"max_examples must be at least 2, got {self.max_examples}")

    # --- what it runs ----------------------------------------------------------------------------

    def selected_arms(self) -> tuple[Arm, ...]:
        """The arms asked for, in the lineage's order."""
        return tuple(arm for arm in ARMS if arm.name in self.arms)

    def selected_tasks(self) -> tuple[LineageTask, ...]:
        """The tasks asked for, their sizes capped by `max_examples`."""
        chosen = [
            task for task in TASKS[self.lang] if self.tasks is None or task.name in self.tasks
        ]
        if self.max_examples is None:
            return tuple(chosen)
        return tuple(
            dataclasses.replace(task, task=_capped(task.task, self.max_examples)) for task in chosen
        )

    def selected_probes(self) -> tuple[str, ...]:
        return DEFAULT_PROBES[self.lang] if self.probes is None else self.probes

    def corpus_files(self) -> list[Path]:
        names = self.corpus or tuple(str(self.data_dir / name) for name in CORPORA[self.lang])
        return [Path(name) for name in names]

    def tokenizer_path(self) -> Path:
        return self.tokenizer or self.out / TOKENIZER_DIR

    def pretrain_dir(self, arm: Arm) -> Path:
        return self.out / PRETRAIN_DIR / arm.name

    def pretrain_run(self, arm: Arm, resume: bool) -> PretrainRun:
        """A NETWORK arm's run: the budget recipe for its network, with this experiment's
        corpus, vocabulary, tokenized corpus and minutes; only the network (and GPT's
        objective) differs between the arms."""
        if arm.pretraining != NETWORK:
            raise ValueError(f"the {arm.name} arm has no network to pre-train")
        return PretrainRun(
            corpus=tuple(self.corpus_files()),
            out=self.pretrain_dir(arm),
            budget=self.budget_minutes * 60,
            tokenizer=self.tokenizer_path(),
            architecture=arm.architecture,
            objective=arm.objective,
            lang=self.lang,
            corpus_cache=self.out / CORPUS_DIR,
            checkpoint_every_minutes=min(CHECKPOINT_MINUTES, self.budget_minutes / 2),
            keep_checkpoints=1,
            eval_every_steps=EVAL_EVERY_STEPS,
            resume=resume,
        )

    def settings(self) -> dict[str, Any]:
        """What every finished step depends on, as JSON values (`flows.config_settings`): the
        fields, but what a later run may add to (seeds, tasks, arms, probes) and where the
        inputs and OUT are, with the budget recipe's values."""
        recipe = budget_recipe(self.budget_minutes * 60)
        resolved = {
            "corpus": self.corpus_files(),
            **{f"recipe.{name}": value for name, value in recipe.to_json().items()},
            "tasks": {task.name: dataclasses.asdict(task.task) for task in TASKS[self.lang]},
        }
        not_settings = ("data_dir", "out", "seeds", "tasks", "arms", "probes")
        return config_settings(self, not_settings, resolved)


def _capped(task: GridTask, cap: int) -> GridTask:
    return dataclasses.replace(
        task,
        max_train_examples=min(task.max_train_examples or cap, cap),
        max_dev_examples=min(task.max_dev_examples or cap, cap),
        max_test_examples=min(task.max_test_examples or cap, cap),
    )
