"""`bertlab experiment compare`: transfer experiments side by side.

Two runs of `bertlab experiment transfer` that differ in one choice (the pre-training objective,
say: `--pretrain-objective electra` against the budget recipe's masked LM) fine-tune the same
columns on the same tasks and seeds. This puts them in one report: a row per task and column,
a cell per run, each later run judged against the first (`flows.win_loss_level`); then per
column, how many tasks each later run won, drew and lost; then what each run's pre-training read
per arm: tokens, tokens per second and its last held-out scores.
Drawn from the runs' `results.json` and their pre-training logs alone; nothing is retrained.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bertlab.apps.experiments.transfer_config import arm_pretrain_dir
from bertlab.apps.experiments.transfer_options import GENERAL
from bertlab.apps.flows import RESULTS_FILE, outcome, summary, win_loss_level
from bertlab.core.run_folder import METRICS_FILE
from bertlab.training.metrics_log import read_metrics

# Held-out scores of the last evaluation worth a column, in this order, where a run logged them.
EVAL_SCORES = {
    "mlm_accuracy": "MLM accuracy",
    "rtd_accuracy": "replaced-token accuracy",
    "rtd_auc": "replaced-token AUC",
}


def load_run(directory: Path) -> dict[str, Any]:
    """A transfer experiment's results.json, with its pre-training per arm added under
    `pretraining` (`pretraining_summary`).

    Raises:
        FileNotFoundError: the directory has no results.json yet.
        ValueError: it is not a transfer experiment's.
    """
    path = Path(directory) / RESULTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found: is {directory} a transfer experiment?")
    results = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(results, dict) or not {"config", "scores", "metrics"} <= set(results):
        raise ValueError(f"{path} is not the results of `bertlab experiment transfer`")
    arms = results["config"].get("arms") or [GENERAL]
    run_dirs = {arm: Path(directory) / arm_pretrain_dir(arm) for arm in arms}
    results["pretraining"] = {
        arm: pretraining_summary(run_dir)
        for arm, run_dir in run_dirs.items()
        if (run_dir / METRICS_FILE).is_file()
    }
    return results


def pretraining_summary(run_dir: Path) -> dict[str, Any]:
    """What a pre-training run read: steps, tokens and training seconds of its last logged step,
    tokens per second over the run, and its last held-out evaluation."""
    records = read_metrics(run_dir / METRICS_FILE)
    train = [record for record in records if record["kind"] == "train"]
    evals = [record for record in records if record["kind"] == "eval"]
    last = train[-1] if train else {"step": 0, "tokens": 0, "elapsed_seconds": 0.0}
    seconds = last["elapsed_seconds"]
    return {
        "steps": last["step"],
        "tokens": last["tokens"],
        "seconds": seconds,
        "tokens_per_second": last["tokens"] / seconds if seconds else None,
        "last_eval": evals[-1] if evals else {},
    }


def comparison_table(runs: dict[str, dict[str, Any]]) -> list[str]:
    """A row per task and column (the first run's columns, in its order), a cell per run:
    median (min–max) of the seeds, and for each later run its verdict against the first run's
    same cell. Cells a run has not scored yet read "–"."""
    labels = list(runs)
    first = runs[labels[0]]
    seeds = {label: results["config"]["seeds"] for label, results in runs.items()}
    seed_text = "; ".join(f"{label}: {', '.join(map(str, run))}" for label, run in seeds.items())
    lines = [
        f"Test scores, median (min–max) over seeds ({seed_text}); against {labels[0]}: win or "
        "loss when the median differs by more than the larger seed spread, else level, and the "
        "paired seeds won–lost.",
        "",
        "| task (metric) | model | " + " | ".join(labels) + " |",
        "|---|---|" + "---:|" * len(labels),
    ]
    for task, metric in first["metrics"].items():
        for column in first["config"]["points"]:
            cells = []
            for label in labels:
                values = runs[label]["scores"].get(task, {}).get(column)
                if not values:
                    cells.append("–")
                    continue
                cell = summary(values)
                pair = _judged(first, runs[label], task, column) if label != labels[0] else None
                if pair:
                    cell += f", {win_loss_level(*pair)}"
                cells.append(cell)
            lines.append(f"| {task} ({metric}) | {column} | " + " | ".join(cells) + " |")
    return lines


def tally_table(runs: dict[str, dict[str, Any]]) -> list[str]:
    """A row per column (the first run's, in its order), a cell per later run: how many tasks it
    won, drew and lost against the first run's same cells (`flows.outcome`), of the tasks both
    have scored with the same number of seeds; "–" where there is none yet."""
    labels = list(runs)
    first = runs[labels[0]]
    lines = [
        "| model | "
        + " | ".join(f"{label} against {labels[0]}: won, level, lost" for label in labels[1:])
        + " |",
        "|---|" + "---|" * (len(labels) - 1),
    ]
    for column in first["config"]["points"]:
        cells = []
        for label in labels[1:]:
            judged = (_judged(first, runs[label], task, column) for task in first["metrics"])
            counts = Counter(outcome(*pair) for pair in judged if pair)
            total = sum(counts.values())
            cells.append(
                f"{counts['win']}, {counts['level']}, {counts['loss']} of {total} tasks"
                if total
                else "–"
            )
        lines.append(f"| {column} | " + " | ".join(cells) + " |")
    return lines


def _judged(
    first: dict[str, Any], other: dict[str, Any], task: str, column: str
) -> tuple[list[float], list[float]] | None:
    """The first run's and another run's seeds in one cell, when both have scored it with the
    same number of seeds (which the verdicts pair); None otherwise."""
    base = first["scores"].get(task, {}).get(column)
    values = other["scores"].get(task, {}).get(column)
    if base and values and len(base) == len(values):
        return base, values
    return None


def pretraining_table(runs: dict[str, dict[str, Any]]) -> list[str]:
    """A row per run and arm: the pre-training objective, steps, tokens, training minutes,
    tokens per second and the last held-out scores it logged (EVAL_SCORES)."""
    evals = [arm["last_eval"] for run in runs.values() for arm in run["pretraining"].values()]
    scores = [key for key in EVAL_SCORES if any(key in last for last in evals)]
    lines = [
        "| run | arm | objective | steps | tokens | minutes | tokens/s | "
        + " | ".join(EVAL_SCORES[key] for key in scores)
        + (" |" if scores else "|"),
        "|---|---|---|---:|---:|---:|---:|" + "---:|" * len(scores),
    ]
    for label, results in runs.items():
        objective = results["config"].get("pretrain_objective", "–")
        for arm, run in results["pretraining"].items():
            speed = run["tokens_per_second"]
            cells = [
                label,
                arm,
                objective,
                f"{run['steps']:,}",
                f"{run['tokens']:,}",
                f"{run['seconds'] / 60:.1f}",
                f"{speed:,.0f}" if speed else "–",
                *(
                    f"{run['last_eval'][key]:.3f}" if key in run["last_eval"] else "–"
                    for key in scores
                ),
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def compare_runs(directories: Sequence[Path], labels: Sequence[str] | None = None) -> list[str]:
    """The report of `bertlab experiment compare` as markdown lines: the scores' table, the
    tally of its verdicts per model, then the pre-training table. Runs are labelled by `labels`,
    else by their pre-training objective.

    Raises:
        ValueError: fewer than two runs, labels that do not match them one to one, or runs
            over different tasks.
    """
    if len(directories) < 2:
        raise ValueError("compare needs at least two experiment directories")
    loaded = [load_run(Path(directory)) for directory in directories]
    tasks = [sorted(results["metrics"]) for results in loaded]
    if any(names != tasks[0] for names in tasks):
        raise ValueError(
            "the experiments scored different tasks: "
            + "; ".join(
                f"{directory}: {', '.join(names)}"
                for directory, names in zip(directories, tasks, strict=True)
            )
        )
    if labels is None:
        labels = [results["config"].get("pretrain_objective") or "?" for results in loaded]
    if len(labels) != len(loaded):
        raise ValueError(f"{len(labels)} labels for {len(loaded)} experiments")
    if len(set(labels)) != len(labels):
        raise ValueError(
            f"the runs' labels repeat ({', '.join(labels)}): name each run with --labels"
        )
    runs = dict(zip(labels, loaded, strict=True))
    tally = f"Tasks won, level and lost per model, judged as above against {labels[0]}:"
    heading = "Pre-training per run and arm (its last logged step and held-out evaluation):"
    return [
        *comparison_table(runs),
        "",
        tally,
        "",
        *tally_table(runs),
        "",
        heading,
        "",
        *pretraining_table(runs),
    ]
