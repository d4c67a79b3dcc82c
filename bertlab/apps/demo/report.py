"""The demo's report folder: `report.md` and its figures (every one titled, with axis units).

Everything is drawn from the demo's `results.json` and the runs' own files (`metrics.jsonl`,
`test.json`): the report shows what that run measured and nothing else.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import Any

from bertlab.apps.demo.config import (
    MODELS,
    NUMBERS,
    PRETRAIN_DIR,
    PRETRAINED,
    SCRATCH,
    SHIPPED,
    SHIPPED_SCRATCH,
    WORD_VECTORS,
)
from bertlab.apps.flows import (
    ONE_CLASS,
    RESULTS_FILE,
    one_class_mark,
    one_class_note,
    read_test,
    seed_dir,
)
from bertlab.core.atomic import atomic_file, write_text
from bertlab.core.hub import SHIPPED_PREFIX
from bertlab.core.run_folder import METRICS_FILE
from bertlab.training.metrics_log import plot_curves, read_metrics
from bertlab.training.pretraining.stats import PLATEAU_MARGIN, unigram_plateau

FIGURE_DPI = 110
COLORS = {
    PRETRAINED: "tab:blue",
    WORD_VECTORS: "tab:green",
    SCRATCH: "tab:orange",
    SHIPPED: "tab:purple",
    SHIPPED_SCRATCH: "tab:gray",
}
# The checkout's root, for links from the report to the docs (when they are there).
REPOSITORY = Path(__file__).resolve().parents[3]
HOUR_TABLE = "README.md#does-pre-training-pay-off-on-a-laptop"
BUDGET_DOCS = "docs/budget.md"
DEMO_RESULTS = "docs/demo.md#what-the-default-measured"
PRETRAIN_PANELS = (
    ("mlm_loss", "loss (nats per masked token)", "masked-LM loss"),
    ("mlm_accuracy", "accuracy (share of masked tokens)", "masked-LM accuracy"),
    ("nsp_accuracy", "accuracy (share of pairs)", "next-sentence accuracy"),
    ("learning_rate", "learning rate", "learning rate (one-cycle over the budget)"),
)


def write_report(out: Path) -> Path:
    """Figures first, then `report.md` that shows them, from OUT/results.json."""
    result = json.loads((out / RESULTS_FILE).read_text(encoding="utf-8"))
    records = read_metrics(out / PRETRAIN_DIR / METRICS_FILE)
    plot_curves(
        records,
        PRETRAIN_PANELS,
        out / "pretraining.png",
        f"Pre-training ({result['minutes']:g} min budget)",
        x_key="tokens",
        x_label="tokens seen",
    )
    _save(finetuning_figure(result, out / "finetune"), out / "finetuning.png")
    _save(comparison_figure(result, out / "finetune"), out / "comparison.png")
    recipe = result["recipe"]
    lines = [
        f"# bertlab demo ({recipe['lang']}): pre-training on text of the task's own kind",
        "",
        f"Total time {result['timings']['total'] / 60:.1f} min: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in result["timings"].items() if k != "total")
        + ".",
        "",
        "## 1. Vocabulary",
        "",
        f"A {recipe['vocab_size']:,}-piece WordPiece vocabulary trained on `{recipe['corpus']}` "
        "(unlabeled text of the kind the task is about).",
        f"`{recipe['example_sentence']}` becomes `{' '.join(result['tokenization'])}`.",
        "",
        *_pretraining_section(result),
        *_fill_mask_section(result),
        *_word_vectors_section(result),
        *_finetuning_section(result, out),
        "## 6. Attention",
        "",
        "![attention map](attention.png)",
        "",
        "## Recipe",
        "",
        "```",
        *(f"{key} = {value}" for key, value in recipe.items()),
        "```",
        "",
    ]
    return write_text(out / "report.md", "\n".join(lines))


def _pretraining_section(result: dict[str, Any]) -> list[str]:
    pretrain = result["pretrain"]
    first, last = pretrain.get("first_eval", {}), pretrain.get("eval", {})
    lines = [
        "## 2. Pre-training",
        "",
        f"{pretrain['recipe']}: {pretrain['steps']} steps, {pretrain['tokens']:,} tokens in "
        f"{pretrain['seconds'] / 60:.1f} min on the {pretrain['device']}. Held-out masked-LM "
        f"accuracy {first.get('mlm_accuracy', float('nan')):.1%} at the first evaluation, "
        f"{last.get('mlm_accuracy', float('nan')):.1%} at the end; loss "
        f"{first.get('mlm_loss', float('nan')):.2f} -> {last.get('mlm_loss', float('nan')):.2f}.",
    ]
    level = last.get("mlm_unigram_accuracy")
    if level is not None:
        lines[-1] += (
            f" Predicting each masked piece from word frequencies alone, ignoring the sentence, "
            f"scores {level:.1%} on the same held-out pieces (the unigram level)."
        )
    return [*lines, "", "![pre-training curves](pretraining.png)", ""]


def _fill_mask_section(result: dict[str, Any]) -> list[str]:
    """The two models' top answers side by side, and what the demo's own answers show."""
    shipped = result["shipped"]["name"]
    minutes = f"{result['minutes']:g} min"
    lines = [
        "## 3. Fill-mask (whatever the models predict)",
        "",
        f"| sentence | this demo's model ({minutes}) | `{shipped}` |",
        "|---|---|---|",
    ]
    for item in result["fill_mask"]:
        cells = [
            ", ".join(f"{_code(t)} {p:.0%}" for t, p in item[key])
            for key in ("predictions", "shipped")
        ]
        lines.append(f"| `{item['sentence']}` | {cells[0]} | {cells[1]} |")
    own, theirs = _shared_answers(result, "predictions"), _shared_answers(result, "shipped")
    count = len(result["fill_mask"])
    top_k = len(result["fill_mask"][0]["predictions"]) if count else 0
    if own:
        lines += [
            "",
            f"This demo's model gives the same answers whatever the sentence: "
            f"{', '.join(_code(t) for t in own)} are among its top {top_k} "
            f"for all {count} sentences. That is how a model answers when it has learned which "
            "pieces are frequent and little of what a sentence says: the unigram plateau "
            "(section 2 sets its accuracy beside word frequencies alone).",
        ]
        if len(theirs) < len(own):
            common = f"{len(theirs)} piece{'' if len(theirs) == 1 else 's'}"
            lines[-1] += (
                f" The top answers of `{shipped}` have {common} in common across the sentences: "
                "they change with the words around the [MASK]."
            )
    return [*lines, ""]


def _code(token: str) -> str:
    """A piece as inline code that cannot end a table cell."""
    return "`" + token.replace("|", "\\|") + "`"


def _shared_answers(result: dict[str, Any], key: str) -> list[str]:
    """The pieces among one model's top answers for every fill-mask sentence, in the first
    sentence's order."""
    answers = [[token for token, _ in item[key]] for item in result["fill_mask"]]
    if not answers:
        return []
    return [token for token in answers[0] if all(token in other for other in answers[1:])]


def _word_vectors_section(result: dict[str, Any]) -> list[str]:
    vectors = result["word_vectors"]
    if "skipped" in vectors:  # gensim was not installed: why, in one line
        return [
            "## 4. Word vectors of the same text",
            "",
            f"Skipped, with the **{WORD_VECTORS}** row of section 5, because {vectors['skipped']}",
            "",
        ]
    lines = [
        "## 4. Word vectors of the same text",
        "",
        f"word2vec ({vectors['method']}, {vectors['vector_size']} dimensions, "
        f"{vectors['epochs']} epochs) over the same pieces, {vectors['pieces']:,} of them, in "
        f"{vectors['seconds']:.0f} s. Nearest pieces by cosine similarity:",
        "",
    ]
    for word, near in vectors["neighbours"].items():
        lines.append(f"- `{word}`: " + ", ".join(f"`{t}` {score:.2f}" for t, score in near))
    return [*lines, ""]


def _finetuning_section(result: dict[str, Any], out: Path) -> list[str]:
    recipe, shipped = result["recipe"], result["shipped"]
    count = NUMBERS[sum(name in result["scores"] for name in MODELS)].capitalize()
    return [
        f"## 5. Fine-tuning on {recipe['task']}: does pre-training transfer?",
        "",
        f"{count} models of this demo's shape ({shipped['demo_shape']}) and the shipped model "
        f"`{shipped['name']}` ({shipped['shape']}), each fine-tuned with the same budget "
        f"({recipe['finetune_epochs']} epochs, batch {recipe['finetune_batch_size']}) and the "
        f"same seeds, at learning rate {recipe['finetune_learning_rate']:g}"
        f"{_shipped_settings(result)}. The best epoch is picked on a dev split of the training "
        "sentences and scored once on the held-out test slice.",
        *results_table(result),
        "",
        "What each row shows:",
        "",
        *_rows_explained(result, out),
        "",
        *_verdicts(result),
        "",
        "![fine-tuning curves](finetuning.png)",
        "",
        "![test accuracy](comparison.png)",
        "",
    ]


def _shipped_settings(result: dict[str, Any]) -> str:
    """The shipped model's own rate and batch, where they differ from the demo's (results of
    older demos have neither)."""
    recipe, shipped = result["recipe"], result["shipped"]
    rate = shipped.get("learning_rate", recipe["finetune_learning_rate"])
    batch = shipped.get("batch_size", recipe["finetune_batch_size"])
    own = [f"{rate:g}"] if rate != recipe["finetune_learning_rate"] else []
    if batch != recipe["finetune_batch_size"]:
        own.append(f"batch {batch}")
    if not own:
        return ""
    if SHIPPED_SCRATCH in result["scores"]:
        who, stable = "the shipped model and its twin", "neither learned one class"
    else:
        who, stable = "the shipped model", "it learned one class in no seed"
    settings = ", ".join(own)
    return f" ({who} at {settings}: the larger model's own settings, measured, at which {stable})"


def _rows_explained(result: dict[str, Any], out: Path) -> list[str]:
    """One plain paragraph per row: what it is and what it can show."""
    pretrain, vectors, shipped = result["pretrain"], result["word_vectors"], result["shipped"]
    last = pretrain.get("eval", {})
    explained = {
        PRETRAINED: f"this demo's own model, pre-trained for {result['minutes']:g} min on the "
        f"{pretrain['device']} ({pretrain['tokens']:,} tokens). {_plateau(last)}",
        WORD_VECTORS: f"not run, because {vectors['skipped']} (section 4)."
        if "skipped" in vectors
        else "the scratch encoder of each seed with its embedding matrix started from "
        f"word2vec vectors of the same reviews, trained in {vectors['seconds']:.0f} s. What "
        "minutes of unlabeled text give reliably is word meanings (the neighbours above: words "
        "used alike lie close), not yet an encoder that reads sentences.",
        SCRATCH: f"this demo's model's random twin ({shipped['demo_shape']}), started as "
        "pre-training started, seed by seed: what the rows above are judged against.",
        SHIPPED: f"`{shipped['name']}` ({shipped['shape']}), {shipped['about']}; fine-tuned "
        f"{_seeds_used(result, SHIPPED)}.",
        SHIPPED_SCRATCH: "the shipped model's random twin (its shape and vocabulary, started as "
        f"this demo's twins are), {_seeds_used(result, SHIPPED_SCRATCH)}: against it, the "
        "shipped model's gap is what its pre-training gave; against this demo's scratch row, "
        "shape and vocabulary differ as well.",
    }
    if shipped["name"].startswith(SHIPPED_PREFIX):
        explained[SHIPPED] += (
            " Why so much longer than this demo: a model must read tens of millions of tokens "
            "to leave the unigram plateau, which takes BERT-mini about an hour on 2 CPU cores; "
            "measured in English, an hour of IMDB reviews beats scratch on SST-2 in every seed "
            "where a few minutes do not ("
            f"{_doc_link(out, HOUR_TABLE, 'the README: does pre-training pay off on a laptop?')}"
            f"; what the budget recipe chooses for each budget: {_doc_link(out, BUDGET_DOCS)})."
        )
    if shipped["same_start"]:
        explained[SHIPPED] += (
            " It has this demo's shape and vocabulary, so the scratch row is its random twin."
        )
    elif SHIPPED_SCRATCH not in result["scores"]:
        explained[SHIPPED] += (
            " Its random twin (its shape and vocabulary from scratch) is not run here, for "
            f"time; against this demo's scratch row it differs in shape and vocabulary as well "
            f"as pre-training (its twin's scores: "
            f"{_doc_link(out, DEMO_RESULTS, 'the demo page: what the default measured')})."
        )
    names = list(result["scores"])
    if "skipped" in vectors and PRETRAINED in names:  # said where the row would stand
        names.insert(names.index(PRETRAINED) + 1, WORD_VECTORS)
    lines = [f"- **{name}**: {explained[name]}" for name in names]
    if any(result.get(ONE_CLASS, {}).get(result["recipe"]["task"], {}).values()):
        lines.append(
            "- **one class**: a seed so marked predicted the same label for every dev "
            "sentence; its accuracy is that label's share of the test sentences, not something "
            "it learned (the seeds and likely causes are under the table)."
        )
    return lines


def _seeds_used(result: dict[str, Any], name: str) -> str:
    """ "with all 5 seeds", or "with the first 3 of the 5 seeds"."""
    used, total = len(result["scores"].get(name, [])), len(result["seeds"])
    return (
        f"with all {total} seeds"
        if used == total
        else f"with the first {used} of the {total} seeds"
    )


def _plateau(last_eval: dict[str, float]) -> str:
    """What the demo model's last held-out evaluation says of the unigram plateau."""
    accuracy, level = last_eval.get("mlm_accuracy"), last_eval.get("mlm_unigram_accuracy")
    if accuracy is None or level is None:
        return ""
    if unigram_plateau(last_eval, 0, 0) is not None:  # judged now, whatever it has read
        return (
            f"Its held-out masked-LM accuracy ({accuracy:.1%}) is within "
            f"{100 * PLATEAU_MARGIN:.0f} points of word frequencies alone ({level:.1%}): it is "
            "on the unigram plateau. A model of a few minutes predicts only the frequent pieces "
            "(its fill-mask answers above) and maps every sentence to much the same vector, "
            "which fine-tuning must first undo; it can do worse than scratch."
        )
    return (
        f"Its held-out masked-LM accuracy ({accuracy:.1%}) is more than "
        f"{100 * PLATEAU_MARGIN:.0f} points above word frequencies alone ({level:.1%}): it has "
        "begun to leave the unigram plateau."
    )


def _doc_link(out: Path, target: str, text: str | None = None) -> str:
    """A link from the report in OUT to a file of the checkout (`README.md#heading`), or its
    name when bertlab runs from an installed package."""
    file, _, heading = target.partition("#")
    if not (REPOSITORY / file).is_file():
        return f"bertlab's {target}"
    relative = os.path.relpath(REPOSITORY / file, Path(out).resolve())
    return f"[{text or target}]({Path(relative).as_posix()}{'#' + heading if heading else ''})"


def run_name(model: str) -> str:
    """The folder of a model's fine-tuning runs: "from scratch" -> "from-scratch"."""
    return model.replace(" ", "-")


def results_table(result: dict[str, Any]) -> list[str]:
    """The final table: test accuracy median and range over the seeds, per model (and how
    many of them predicted one class), then the seeds that predicted one class."""
    task = result["recipe"]["task"]
    lines = [
        "",
        f"| {task} test accuracy | median | min | max | seeds |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, values in result["scores"].items():
        lines.append(
            f"| {name} | {statistics.median(values):.1%} | {min(values):.1%} | "
            f"{max(values):.1%} | {len(values)}{one_class_mark(result, task, name)} |"
        )
    if "majority" in result:  # absent from the results of older demos
        lines += [
            "",
            f"A model that predicts the commonest label for every sentence scores "
            f"{result['majority']:.1%}.",
        ]
    return lines + one_class_note(result)


def _verdicts(result: dict[str, Any]) -> list[str]:
    """What the numbers show, no more: per row and scratch row it is judged against, the
    medians' gap against the seeds' spread (the rule), and the paired seeds with the exact sign
    test beside it."""
    lines = []
    for found in result["comparisons"]:
        name, baseline = found["model"], found["baseline"]
        gap, spread = 100 * found["margin"], 100 * found["spread"]  # percentage points
        against = _against(name, baseline, result["shipped"]["same_start"])
        paired = (
            f"paired by seed it is ahead in {found['paired_wins']} of {found['seeds']} "
            f"(sign test p = {found['sign_test_p']:.3f})"
        )
        if found["beats_scratch"]:
            verdict = (
                f"**{name}** beats {against}: its median is {gap:.1f} points higher, more than "
                f"the spread between seeds ({spread:.1f}); {paired}."
            )
        elif gap > 0:
            verdict = (
                f"**{name}** against {against}: the median is {gap:.1f} points higher, but that "
                f"is within the spread between seeds ({spread:.1f}), so no gain is established; "
                f"{paired}."
            )
        elif gap == 0:
            verdict = f"**{name}** does not beat {against}: the medians are equal; {paired}."
        else:
            verdict = (
                f"**{name}** does not beat {against} at this budget: its median is {-gap:.1f} "
                f"points lower (seed spread {spread:.1f}); {paired}."
            )
        lines += [f"- {verdict}"]
    return lines


def _against(name: str, baseline: str, same_start: bool) -> str:
    """The scratch row a verdict names: the shipped model has two when its shape differs."""
    if baseline == SHIPPED_SCRATCH:
        return "scratch of its own shape"
    if name == SHIPPED and not same_start:
        return "this demo's scratch (another shape and vocabulary)"
    return "scratch"


def _save(figure, path: Path) -> None:
    from matplotlib import pyplot as plt

    with atomic_file(path) as temporary:
        figure.savefig(temporary, dpi=FIGURE_DPI)
    plt.close(figure)


def finetuning_figure(result: dict[str, Any], runs: Path):
    """Each row's training loss and dev accuracy per epoch, one line per seed, from the runs'
    records in RUNS (OUT/finetune)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.ticker import MaxNLocator

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for name, scores in result["scores"].items():
        color = COLORS[name]
        for number, seed in enumerate(result["seeds"][: len(scores)]):
            run_dir = seed_dir(runs, run_name(name), seed)
            records = read_metrics(run_dir / METRICS_FILE)
            train = [r for r in records if r["kind"] == "train"]
            evals = [r for r in records if r["kind"] == "eval"]
            label = name if number == 0 else None
            axes[0].plot(
                [r["step"] for r in train],
                [r["loss"] for r in train],
                color=color,
                alpha=0.6,
                label=label,
            )
            axes[1].plot(
                [r["epoch"] for r in evals],
                [r["accuracy"] for r in evals],
                color=color,
                marker="o",
                alpha=0.6,
                label=label,
            )
    axes[0].set(title="training loss", xlabel="optimizer step", ylabel="loss (nats)")
    axes[1].set(title="dev accuracy after each epoch", xlabel="epoch", ylabel="accuracy")
    axes[1].xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole
    for axis in axes:
        axis.grid(alpha=0.3)
        axis.legend()
    figure.suptitle(f"Fine-tuning on {result['recipe']['task']}, one line per seed")
    figure.tight_layout()
    return figure


def comparison_figure(result: dict[str, Any], runs: Path):
    """Each row's test accuracy (median, range, seeds), drawn from the runs' own `test.json`
    files in RUNS, above the share of the commonest class."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    figure, axis = plt.subplots(figsize=(1.6 * len(result["scores"]) + 1, 3.6))
    names = list(result["scores"])
    metric = "accuracy"
    for index, name in enumerate(names):
        seeds = result["seeds"][: len(result["scores"][name])]
        values = [read_test(seed_dir(runs, run_name(name), seed))[metric] for seed in seeds]
        median = statistics.median(values)
        axis.bar(
            index,
            median,
            color=COLORS[name],
            alpha=0.7,
            yerr=[[median - min(values)], [max(values) - median]],
            capsize=6,
        )
        axis.scatter([index] * len(values), values, color="black", zorder=3, s=12)
    axis.set_xticks(range(len(names)), [name.replace(" ", "\n", 1) for name in names])
    majority = result.get("majority")  # absent from the results of older demos
    if majority is not None:
        axis.axhline(majority, color="gray", linestyle="--", linewidth=1)
        axis.annotate(
            f"one class: {majority:.1%}",
            (len(names) - 0.5, majority),
            xytext=(0, 3),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize=8,
            color="gray",
        )
    # Two classes: chance is 0.5, so the axis starts there unless a seed fell below it.
    low = min(min(v) for v in result["scores"].values())
    axis.set_ylim(min(0.5, low - 0.02), 1.0)
    axis.set(
        title=f"{result['recipe']['task']} test accuracy (median, range, seeds)",
        ylabel="accuracy (share of sentences)",
    )
    axis.grid(alpha=0.3, axis="y")
    figure.tight_layout()
    return figure
