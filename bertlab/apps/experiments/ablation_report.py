"""The ablation experiment's report, drawn from its `results.json` alone: `table.md` with BERT's
Tables 5, 7 (and 6) in the paper's layout, the verdicts, and `ablation.png`.

Scores are percentages, median (min–max) over the seeds, on test splits carved from the shared
training files. A row is ahead of another when its median leads by more than either row's seed
spread (`flows.compare`); the paired sign test over the seeds is given beside it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bertlab.apps.flows import (
    RESULTS_FILE,
    compare,
    one_class_mark,
    one_class_note,
    scored,
    sign_test,
)
from bertlab.core.atomic import atomic_file, write_json, write_text
from bertlab.core.metrics import as_percent
from bertlab.data.tasks.registry import get_task

TABLE_FILE = "table.md"
PLOT_FILE = "ablation.png"
FIGURE_DPI = 120
# BERT-base's dev-set scores in the paper (Devlin et al. 2018), for the orderings.
PAPER_TABLE5 = {  # Table 5: SST-2 and MRPC accuracy, SQuAD v1.1 F1
    "mlm+nsp": {"sst2": 92.7, "mrpc": 86.7, "squad": 88.5},
    "mlm": {"sst2": 92.6, "mrpc": 86.5, "squad": 87.9},
    "ltr": {"sst2": 92.1, "mrpc": 77.5, "squad": 77.8},
    "ltr+bilstm": {"sst2": 91.6, "mrpc": 75.7, "squad": 84.9},
}
PAPER_TABLE7 = {  # Table 7: CoNLL-2003 dev F1; fine-tuning BERT-base, then its features
    "fine-tuning": 96.4,
    "embeddings": 91.0,
    "second-to-last": 95.6,
    "last": 94.9,
    "sum-last-four": 95.9,
    "concat-last-four": 96.1,
    "scalar-mix": 95.5,
}
# Table 5's comparisons, each (row, the row it is compared with).
TABLE5_PAIRS = (("mlm+nsp", "mlm"), ("mlm", "ltr"), ("ltr+bilstm", "ltr"))
METRIC_NAMES = {"accuracy": "Acc", "f1": "F1"}
TASK_NAMES = {"sst2": "SST-2", "mrpc": "MRPC", "conll2003": "CoNLL-2003", "squad": "SQuAD"}
FEATURE_PREFIX = "features-"
FINE_TUNED = "mlm+nsp"  # the fine-tuning row Table 7 sets the features against


def write_results(out: Path, results: dict[str, Any]) -> None:
    """results.json, table.md and ablation.png from the scores so far (missing cells: –)."""
    write_json(out / RESULTS_FILE, results)
    write_text(out / TABLE_FILE, "\n".join(results_tables(results)) + "\n")
    plot_ablation(results, out / PLOT_FILE)


def values(results: dict[str, Any], task: str, row: str) -> list[float] | None:
    """The reported metric of every seed of one cell, as percentages; None when not run yet."""
    runs = results["scores"].get(task, {}).get(row)
    if not runs:
        return None
    metric = results["tasks"][task]["metric"]
    metric_set = get_task(results["tasks"][task]["task"]).metrics
    return [as_percent(metric_set, value) for value in scored([run[metric] for run in runs])]


def cell(numbers: Sequence[float] | None) -> str:
    """ "median (min–max)" with one decimal, or – for a cell not run yet."""
    if not numbers:
        return "–"
    return f"{statistics.median(numbers):.1f} ({min(numbers):.1f}–{max(numbers):.1f})"


def marked_cell(results: dict[str, Any], task: str, row: str) -> str:
    """`cell` of one task and row, marked when seeds predicted one class (`flows`)."""
    numbers = values(results, task, row)
    return cell(numbers) + (one_class_mark(results, task, row) if numbers else "")


def results_tables(results: dict[str, Any]) -> list[str]:
    """table.md: the pre-training runs, Table 5, the verdicts, Table 7 and Table 6, then the
    seeds that predicted one class."""
    lines = _pretraining_table(results) + [""] + _table5(results) + [""] + _verdicts(results)
    if results["config"]["feature_rows"]:
        lines += [""] + _table7(results)
    if results["config"]["model_sizes"]:
        lines += [""] + _table6(results)
    return lines + one_class_note(results)


def _pretraining_table(results: dict[str, Any]) -> list[str]:
    minutes = results["config"]["budget_minutes"]
    lines = [
        f"Pre-training, each run {minutes:g} minutes with the budget recipe on the same corpus "
        "and vocabulary (held-out figures at the end of the run; a left-to-right model's are "
        "next-token figures over every position, a masked model's over its masked tokens):",
        "",
        "| run | objective | shape | steps | tokens | held-out LM loss | held-out accuracy |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for name, run in results["pretraining"].items():
        shape = results["shapes"][name]
        last = run["last_eval"]
        loss = last.get("mlm_loss", last.get("lm_loss"))
        accuracy = last.get("mlm_accuracy", last.get("lm_accuracy"))
        lines.append(
            f"| {name} | {run['objective']} | {shape['size']} ({shape['layers']}x{shape['hidden']})"
            f" | {run['steps']:,} | {run['tokens'] / 1e6:.1f}M | {_number(loss, '.3f')} | "
            f"{_number(accuracy, '.1%')} |"
        )
    return lines


def _number(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def _header(results: dict[str, Any], tasks: Sequence[str]) -> list[str]:
    names = [
        f"{TASK_NAMES.get(t, t)} ({METRIC_NAMES.get(results['tasks'][t]['metric'], '')})"
        for t in tasks
    ]
    return ["| | " + " | ".join(names) + " |", "|---|" + "---:|" * len(tasks)]


def _table5(results: dict[str, Any]) -> list[str]:
    """BERT Table 5's layout: the pre-training tasks as rows, the tasks as columns."""
    config = results["config"]
    tasks = list(results["tasks"])
    seeds = len(config["seeds"])
    lines = [
        f"**Table 5: the pre-training tasks** (test split, %, median (min–max) of {seeds} seeds; "
        "the paper's BERT-base dev scores for the rows it has in brackets):",
        "",
        *_header(results, tasks),
    ]
    for row in config["rows"]:
        cells = []
        for task in tasks:
            text = marked_cell(results, task, row)
            paper = PAPER_TABLE5.get(row, {}).get(task)
            cells.append(text + (f" [{paper}]" if paper is not None else ""))
        lines.append(f"| {config['row_labels'][row]} | " + " | ".join(cells) + " |")
    return lines + ["", _finetuning_budget(results)]


def _finetuning_budget(results: dict[str, Any]) -> str:
    """What each row was fine-tuned on: the epochs and the training part of every column."""
    config = results["config"]
    parts = []
    for name, task in results["tasks"].items():
        size = task["max_train_examples"]
        examples = "the whole training part" if size is None else f"{size:,} training examples"
        epochs = "epoch" if task["epochs"] == 1 else "epochs"
        parts.append(f"{TASK_NAMES.get(name, name)} {task['epochs']} {epochs} on {examples}")
    return (
        f"Fine-tuning, every row alike: {'; '.join(parts)}; batch {config['finetune_batch_size']}, "
        f"learning rate {config['finetune_learning_rate']:g} "
        f"({config['feature_learning_rate']:g} for the feature-based rows)."
    )


def judge(first: Sequence[float] | None, second: Sequence[float] | None) -> str:
    """Whether `first` is ahead of `second`, level or behind (`flows.compare`), with the gap of
    the medians, the larger spread and the sign test over paired seeds (not while one of the two
    has fewer seeds than the other: results are written after each seed)."""
    if not first or not second:
        return "–"
    comparison = compare(second, first)
    reverse = compare(first, second)
    word = "ahead" if comparison.wins else "behind" if reverse.wins else "level"
    text = f"{word} ({comparison.margin:+.1f} vs spread {comparison.spread:.1f}"
    if len(first) != len(second):
        return text + ")"
    wins, losses, p_value = sign_test(second, first)
    return text + f"; {wins}-{losses} seeds, p {p_value:.2f})"


def paper_direction(first: float | None, second: float | None) -> str:
    if first is None or second is None:
        return "–"
    return f"{'ahead' if first > second else 'behind' if first < second else 'level'} " + (
        f"({first - second:+.1f})"
    )


def _verdicts(results: dict[str, Any]) -> list[str]:
    """Table 5's comparisons (paper and here) and every row against no pre-training."""
    config = results["config"]
    tasks = list(results["tasks"])
    labels = config["row_labels"]
    lines = [
        "**Verdicts** (first row against the second: ahead or behind when the medians differ "
        "by more than either row's seed spread, else level; paired seeds won-lost and the "
        "two-sided sign test):",
        "",
        "| comparison | task | here | paper (BERT-base) |",
        "|---|---|---|---|",
    ]
    pairs = [(a, b) for a, b in TABLE5_PAIRS if a in config["rows"] and b in config["rows"]]
    baseline = "no-pretraining"
    if baseline in config["rows"]:
        pairs += [(row, baseline) for row in config["rows"] if row != baseline]
    for first, second in pairs:
        for task in tasks:
            here = judge(values(results, task, first), values(results, task, second))
            paper = paper_direction(
                PAPER_TABLE5.get(first, {}).get(task), PAPER_TABLE5.get(second, {}).get(task)
            )
            lines.append(f"| {labels[first]} vs {labels[second]} | {task} | {here} | {paper} |")
    return lines


def _table7(results: dict[str, Any]) -> list[str]:
    """BERT Table 7's layout: fine-tuning, then the feature-based rows, on CoNLL-2003."""
    config = results["config"]
    task = config["feature_task"]
    fine_tuned = values(results, task, FINE_TUNED)
    lines = [
        "**Table 7: fine-tuning against features** (CoNLL-2003 entity F1, %, test split; the "
        "feature-based rows read the frozen MLM + NSP encoder through a two-layer BiLSTM; "
        "verdicts against fine-tuning):",
        "",
        "| system | F1 here | against fine-tuning | paper (BERT-base, dev F1) |",
        "|---|---:|---|---:|",
        f"| Fine-tuning: {config['row_labels'][FINE_TUNED]} | "
        f"{marked_cell(results, task, FINE_TUNED)} | | "
        f"{PAPER_TABLE7['fine-tuning']} |",
    ]
    for layers in config["feature_rows"]:
        numbers = values(results, task, FEATURE_PREFIX + layers)
        lines.append(
            f"| Feature-based: {config['feature_labels'][layers]} | "
            f"{marked_cell(results, task, FEATURE_PREFIX + layers)} | "
            f"{judge(numbers, fine_tuned)} | {PAPER_TABLE7[layers]} |"
        )
    return lines


def _table6(results: dict[str, Any]) -> list[str]:
    """BERT Table 6's layout: the MLM + NSP model at several shapes, the same budget."""
    config = results["config"]
    tasks = list(results["tasks"])
    names = [f"{TASK_NAMES.get(t, t)}" for t in tasks]
    lines = [
        "**Table 6: model size** (MLM + NSP, the same minutes for every shape; held-out LM "
        "perplexity exp(masked-LM loss) at the end of pre-training):",
        "",
        "| #L | #H | #A | tokens | LM (ppl) | " + " | ".join(names) + " |",
        "|---:|---:|---:|---:|---:|" + "---:|" * len(tasks),
    ]
    rows = [("mlm-nsp", "mlm+nsp")]
    rows += [(f"mlm-nsp-{size}", f"mlm+nsp@{size}") for size in config["model_sizes"]]
    for run_name, row in rows:
        shape = results["shapes"].get(run_name)
        run = results["pretraining"].get(run_name)
        if shape is None or run is None:
            continue
        cells = [marked_cell(results, task, row) for task in tasks]
        lines.append(
            f"| {shape['layers']} | {shape['hidden']} | {shape['heads']} | "
            f"{run['tokens'] / 1e6:.1f}M | {_number(run['perplexity'], '.1f')} | "
            + " | ".join(cells)
            + " |"
        )
    return lines


def plot_ablation(results: dict[str, Any], path: Path) -> Path:
    """One panel per task (Table 5's rows and Table 6's sizes as bars, median with min-max)
    and one for Table 7's block."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    config = results["config"]
    panels = [(task, _task_bars(results, task)) for task in results["tasks"]]
    if config["feature_rows"]:
        panels.append(("Table 7: CoNLL-2003 features", _feature_bars(results)))
    columns = min(3, len(panels))
    rows = math.ceil(len(panels) / columns)
    figure, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.6 * rows), squeeze=False)
    for axis, (title, bars) in zip(axes.flat, panels, strict=False):
        done = [(label, numbers) for label, numbers in bars if numbers]
        medians = [statistics.median(numbers) for _, numbers in done]
        low = [m - min(n) for m, (_, n) in zip(medians, done, strict=True)]
        high = [max(n) - m for m, (_, n) in zip(medians, done, strict=True)]
        axis.bar(range(len(done)), medians, yerr=[low, high], capsize=3, alpha=0.8)
        axis.set_xticks(range(len(done)), [label for label, _ in done], rotation=40, ha="right")
        axis.tick_params(axis="x", labelsize=7)
        bottom = min((min(n) for _, n in done), default=0.0)
        axis.set_ylim(max(0.0, bottom - 5.0), None)
        axis.set_title(TASK_NAMES.get(title, title), fontsize=10)
        axis.set_ylabel("%", fontsize=8)
        axis.grid(alpha=0.3, axis="y")
    for axis in list(axes.flat)[len(panels) :]:
        axis.axis("off")
    seeds = len(config["seeds"])
    figure.suptitle(
        f"BERT's ablations at {config['budget_minutes']:g} minutes of pre-training each "
        f"(test split, median and min-max of {seeds} seeds)"
    )
    figure.tight_layout()
    with atomic_file(path) as temporary:
        figure.savefig(temporary, dpi=FIGURE_DPI)
    plt.close(figure)
    return path


def _task_bars(results: dict[str, Any], task: str) -> list[tuple[str, list[float] | None]]:
    config = results["config"]
    bars = [
        (_short(config["row_labels"][row]), values(results, task, row)) for row in config["rows"]
    ]
    bars += [
        (f"MLM+NSP {size}", values(results, task, f"mlm+nsp@{size}"))
        for size in config["model_sizes"]
    ]
    return bars


def _feature_bars(results: dict[str, Any]) -> list[tuple[str, list[float] | None]]:
    config = results["config"]
    task = config["feature_task"]
    bars = [("fine-tuning", values(results, task, FINE_TUNED))]
    bars += [
        (layers, values(results, task, FEATURE_PREFIX + layers))
        for layers in config["feature_rows"]
    ]
    return bars


def _short(label: str) -> str:
    """A row label without its parenthesis, for the plot's ticks."""
    return label.split(" (")[0]
