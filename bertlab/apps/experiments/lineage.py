"""`bertlab experiment lineage`: the lectures' models, NNLM -> word2vec -> ELMo -> ULMFiT -> GPT
-> BERT, pre-trained on one corpus with one WordPiece vocabulary for the same minutes each, then
compared on the same tasks and probes.

The arms (`lineage_options.ARMS`): Bengio's NNLM, word2vec, ELMo's biLM, AWD-LSTM (fine-tuned
as ULMFiT's classifier), GPT (a left-to-right BERT, `--objective clm`), BERT (the budget
recipe) and a random BERT of the recipe's shape. Each network is `bertlab pretrain --architecture
A --budget` on the experiment's corpus and vocabulary (`run_pretraining`), word2vec is trained
for the same seconds (`training.word2vec.timed`), the random arm not at all; on a CPU, as many
arms at once as there are threads, one thread each (`_pretrain_at_once`).

Then, for every arm:

- the sense probes: per layer, whether a probe word's senses separate (`lineage_probes`);
- every task's cells (`lineage_finetune.METHODS`): a sentence task fine-tuned in the arm's
  paper's way and read by the shared linear probe; the NER task tagged by the shared BiLSTM
  over the scalar mix of its frozen layers (BERT also fine-tuned whole), each with every seed,
  on the splits `experiment transfer` carves from the tasks' training files.

Both are grids run by `grid.run_grid` (the probes once, with the first seed: they train nothing
but the random arm's weights), so an interrupted experiment continues where it stopped:

    OUT/tokenizer/  OUT/corpus/                   the shared vocabulary and tokenized corpus
    OUT/pretrain/<arm>/                           each arm's pre-training (final/: its model)
    OUT/twins/seed-<S>/                           the random arm's model of each seed
    OUT/probes.json                               the probes' grid
    OUT/finetune/<task>/<method>/<arm>/seed-<S>/  each cell's run and its test.json
    OUT/results.json, report.md, lineage.png      the report (`lineage_report`)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertlab.apps.experiments.grid import Cell, Column, Scores, check_inputs, run_grid
from bertlab.apps.experiments.lineage_config import (
    CORPUS_DIR,
    FINETUNE_DIR,
    TWINS_DIR,
    LineageConfig,
)
from bertlab.apps.experiments.lineage_finetune import METHODS, CellInputs
from bertlab.apps.experiments.lineage_models import (
    FLOP_FORMULAS,
    WORD2VEC_FILE,
    architecture_of,
    load_layers,
    training_flops,
    word2vec_flops,
)
from bertlab.apps.experiments.lineage_options import (
    METHOD_LABELS,
    NETWORK,
    NO_PRETRAINING,
    PAPER_FIGURES,
    WORD2VEC,
    Arm,
    LineageTask,
)
from bertlab.apps.experiments.lineage_probes import probe_word
from bertlab.apps.experiments.lineage_report import write_results
from bertlab.apps.experiments.transfer_data import task_splits
from bertlab.apps.flows import (
    ONE_CLASS,
    RESULTS_FILE,
    check_settings,
    check_split,
    concurrent_runs,
    holding,
    one_class_seeds,
    random_twin,
    run_concurrently,
    seed_dir,
    summary,
)
from bertlab.core.atomic import atomic_directory, write_json
from bertlab.core.config import OBJECTIVE_DATA, BertConfig, read_json_object
from bertlab.core.run_folder import FINAL_DIR, METRICS_FILE
from bertlab.core.runtime import default_device
from bertlab.corpus.build import build_corpus
from bertlab.corpus.prepare import held_out_split
from bertlab.tokenizer.training import TokenizerTrainingConfig, train_tokenizer
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.metrics_log import read_metrics
from bertlab.training.pretraining.budget import budget_recipe
from bertlab.training.pretraining.checkpointing import latest_checkpoint
from bertlab.training.pretraining.runner import run_pretraining
from bertlab.training.word2vec.timed import train_word_vectors_for
from bertlab.training.word2vec.vectors import VECTORS_FILE, WordVectorConfig, save_vectors

logger = logging.getLogger(__name__)

PROBES_FILE = "probes.json"
SHAPE_DIR = "shape"  # the random arm's shape and tokenizer, in OUT/pretrain/<arm>/


# --- the experiment -------------------------------------------------------------------------------


def run_lineage(
    config: LineageConfig, show_progress: bool = True, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Pre-train every arm, run the probes and every task's cells, write the report. One
    process at a time writes OUT (`flows.holding`); another is refused, naming its pid."""
    with holding(config.out):
        return _lineage(config, show_progress, say)


def _lineage(config: LineageConfig, show_progress: bool, say: Callable[[str], None]) -> dict:
    tasks = config.selected_tasks()
    check_inputs(
        config.data_dir,
        [task.task for task in tasks],
        config.corpus_files(),
        [] if config.tokenizer is None else [config.tokenizer],
    )
    started = time.perf_counter()
    config.out.mkdir(parents=True, exist_ok=True)
    check_settings(config.out, config.settings())
    tokenizer = _tokenizer(config, say)
    _pretrain_at_once(config, tokenizer, show_progress, say)
    models, pretraining = {}, {}
    for arm in config.selected_arms():  # each finds its model when `_pretrain_at_once` made it
        models[arm.name] = PRETRAININGS[arm.pretraining](config, arm, tokenizer, show_progress, say)
        pretraining[arm.name] = _pretraining_summary(config, arm, models[arm.name])
    timings = {"pre-training": time.perf_counter() - started}
    probes = _probes(config, models, tokenizer, say)
    timings["probes"] = time.perf_counter() - started - timings["pre-training"]

    def results_of(scores: Scores) -> dict[str, Any]:
        timings["total"] = time.perf_counter() - started
        found = _results(config, tasks, pretraining, probes, scores, timings)
        return found | {ONE_CLASS: _one_class(config, found["rows"], scores)}

    results = _fine_tune(config, tasks, models, tokenizer, results_of, show_progress, say)
    say(f"wrote {config.out / RESULTS_FILE} and the report beside it")
    return results


def _tokenizer(config: LineageConfig, say: Callable[[str], None]) -> Tokenizer:
    """The one vocabulary of every arm: given, or trained on the corpus as the budget recipe
    trains it (once: a continued experiment finds it in OUT/tokenizer)."""
    path = config.tokenizer_path()
    if config.tokenizer is None and not (path / "vocab.txt").is_file():
        recipe = budget_recipe(config.budget_minutes * 60)
        training = TokenizerTrainingConfig(
            vocab_size=recipe.vocab_size,
            min_ideograph_frequency=recipe.ideograph_frequency(config.lang),
        )
        say(f"== a vocabulary of {recipe.vocab_size:,} pieces trained on the corpus")
        tokenizer, _ = train_tokenizer(config.corpus_files(), training, show_progress=False)
        with atomic_directory(path) as temporary:
            tokenizer.save_pretrained(temporary)
    return Tokenizer.from_pretrained(path)


# --- pre-training ---------------------------------------------------------------------------------


def _pretrain_at_once(
    config: LineageConfig, tokenizer: Tokenizer, show_progress: bool, say: Callable[[str], None]
) -> None:
    """On a CPU with several threads, the arms that pre-train and are not done, as many at once
    as there are threads, one thread each (`flows.run_concurrently`, as the demo fine-tunes).

    Every arm then trains its minutes beside another: equal conditions for all, and on 2 cores
    the pre-training takes three budgets instead of six. With one thread, or on a GPU, nothing
    runs here: the arms pre-train one after the other in this process.
    """
    pending = [arm for arm in config.selected_arms() if not _pretrained(config, arm)]
    jobs = min(concurrent_runs(torch.get_num_threads(), default_device().type), len(pending))
    if jobs < 2:
        return
    build_corpus(  # once, before the arms read it from its cache
        config.corpus_files(), tokenizer, config.out / CORPUS_DIR, config.lang, show_progress
    )
    say(
        f"== pre-training {', '.join(arm.name for arm in pending)}: {jobs} at once, one CPU "
        f"thread each, {config.budget_minutes:g} min each"
    )
    for _ in run_concurrently(_pretrain_alone, [(config, arm) for arm in pending], jobs):
        pass


def _pretrained(config: LineageConfig, arm: Arm) -> bool:
    """Whether the arm needs no pre-training: done (its model in OUT/pretrain/<arm>/final), or
    the random arm (never trained). The one test of it, here and in each arm's pre-training."""
    final = config.pretrain_dir(arm) / FINAL_DIR
    done = {NETWORK: final / "config.json", WORD2VEC: final / VECTORS_FILE}
    return arm.pretraining not in done or done[arm.pretraining].is_file()


def _pretrain_alone(config: LineageConfig, arm: Arm) -> None:
    """One arm's pre-training in a worker process, its lines marked with the arm's name."""
    tokenizer = Tokenizer.from_pretrained(config.tokenizer_path())

    def say(line: str) -> None:
        print(f"[{arm.name}] {line}", flush=True)

    PRETRAININGS[arm.pretraining](config, arm, tokenizer, False, say)


@dataclass(frozen=True)
class ArmModel:
    """An arm's model: its folder, or for the random arm a shape folder and each seed's twin."""

    directory: Path
    per_seed: Callable[[int], Path] | None = None

    def for_seed(self, seed: int) -> Path:
        return self.directory if self.per_seed is None else self.per_seed(seed)


def _pretrain_network(
    config: LineageConfig, arm: Arm, tokenizer: Tokenizer, show_progress: bool, say
) -> ArmModel:
    """`bertlab pretrain --architecture A --budget` (continued if interrupted, skipped if done)."""
    run_dir = config.pretrain_dir(arm)
    if not _pretrained(config, arm):
        say(f"== pre-training {arm.label} for {config.budget_minutes:g} min")
        resume = latest_checkpoint(run_dir) is not None
        run_pretraining(config.pretrain_run(arm, resume), show_progress=show_progress, say=say)
    return ArmModel(run_dir / FINAL_DIR)


def _pretrain_word2vec(
    config: LineageConfig, arm: Arm, tokenizer: Tokenizer, show_progress: bool, say
) -> ArmModel:
    """Skip-gram vectors of the pieces for the budget's seconds on the corpus's training
    documents (never the held-out ones), beside the tokenizer in OUT/pretrain/<arm>/final."""
    final = config.pretrain_dir(arm) / FINAL_DIR
    if _pretrained(config, arm):
        return ArmModel(final)
    say(f"== training {arm.label} for {config.budget_minutes:g} min")
    corpus = build_corpus(
        config.corpus_files(), tokenizer, config.out / CORPUS_DIR, config.lang, show_progress
    )  # pre-training's tokenized corpus, found in its cache
    num_train, _ = held_out_split(corpus.num_documents, 1)  # pre-training's held-out documents
    vector_config = WordVectorConfig(workers=torch.get_num_threads())  # as the networks compute
    vectors, run = train_word_vectors_for(
        corpus, vector_config, config.budget_minutes * 60, (0, num_train)
    )
    say(
        f"   {len(vectors):,} piece vectors, {run.raw_words:,} pieces read ({run.epochs:.2f} "
        f"passes) in {run.seconds:.0f} s"
    )
    with atomic_directory(final) as target:
        tokenizer.save_pretrained(target)
        save_vectors(vectors, target / VECTORS_FILE)
        write_json(target / WORD2VEC_FILE, {"config": vars(vector_config), "run": run.to_json()})
    return ArmModel(final)


def _no_pretraining(
    config: LineageConfig, arm: Arm, tokenizer: Tokenizer, show_progress: bool, say
) -> ArmModel:
    """The budget recipe's BERT shape at the vocabulary, never trained: each seed fine-tunes
    (and the probes read) its own random twin, started as pre-training starts."""
    recipe = budget_recipe(config.budget_minutes * 60)
    shape = config.pretrain_dir(arm) / SHAPE_DIR
    if not (shape / "config.json").is_file():
        model_config = BertConfig.from_preset(
            recipe.model_size, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id
        )
        with atomic_directory(shape) as target:
            model_config.to_json_file(target / "config.json")
            tokenizer.save_pretrained(target)

    def twin(seed: int) -> Path:
        directory = config.out / TWINS_DIR / f"seed-{seed}"
        if (directory / "config.json").is_file():
            return directory
        model_config = BertConfig.from_json_file(shape / "config.json")
        return random_twin(model_config, tokenizer, seed, recipe.position_init, directory)

    return ArmModel(shape, twin)


# `Arm.pretraining` -> (config, arm, tokenizer, show_progress, say) -> its model.
PRETRAININGS: dict[str, Callable[..., ArmModel]] = {
    NETWORK: _pretrain_network,
    WORD2VEC: _pretrain_word2vec,
    NO_PRETRAINING: _no_pretraining,
}


def _pretraining_summary(config: LineageConfig, arm: Arm, model: ArmModel) -> dict[str, Any]:
    """What an arm's pre-training read and computed: tokens, FLOPs (and their formula),
    minutes, steps, and for a left-to-right model the held-out perplexity per piece of its last
    evaluation (None where it has none)."""
    empty = {"tokens": 0, "flops": 0.0, "minutes": 0.0}
    summaries = {NETWORK: _network_summary, WORD2VEC: _word2vec_summary}
    found = (
        summaries[arm.pretraining](config, arm, model) if arm.pretraining in summaries else empty
    )
    return {"perplexity": None, "formula": None, "steps": None} | found


def _network_summary(config: LineageConfig, arm: Arm, model: ArmModel) -> dict[str, Any]:
    run_dir = config.pretrain_dir(arm)
    records = read_metrics(run_dir / METRICS_FILE)
    trains = [r for r in records if r["kind"] == "train"]
    evals = [r for r in records if r["kind"] == "eval"]
    tokens = trains[-1]["tokens"] if trains else 0
    data = config.pretrain_run(arm, False).resolved.data
    share = 1.0 if OBJECTIVE_DATA[data.objective].is_causal else data.mlm_probability
    return {
        "steps": trains[-1]["step"] if trains else 0,
        "tokens": tokens,
        "minutes": trains[-1]["elapsed_seconds"] / 60 if trains else 0.0,
        "flops": training_flops(model.directory, tokens, share, data.max_seq_length),
        "formula": FLOP_FORMULAS[architecture_of(model.directory)],
        "perplexity": (evals[-1] if evals else {}).get("lm_perplexity"),
    }


def _word2vec_summary(config: LineageConfig, arm: Arm, model: ArmModel) -> dict[str, Any]:
    recorded = read_json_object(model.directory / WORD2VEC_FILE)
    vector, run = recorded["config"], recorded["run"]
    return {
        "tokens": run["raw_words"],
        "minutes": run["seconds"] / 60,
        "flops": word2vec_flops(
            run["trained_words"], vector["vector_size"], vector["negative"], vector["window"]
        ),
        "formula": FLOP_FORMULAS["word2vec"],
    }


# --- the probes -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ArmColumn(Column):
    """A column of the grids: an arm and its model."""

    arm: Arm
    model: ArmModel


def _probes(
    config: LineageConfig, models: dict[str, ArmModel], tokenizer: Tokenizer, say
) -> dict[str, Any]:
    """Every arm's layers on every probe word (`lineage_probes.probe_word`): a grid of one seed,
    the first (the random arm's weights), in OUT/probes.json."""
    words = list(config.selected_probes())
    if not words:
        return {}
    seed = config.seeds[0]
    columns = [
        _ArmColumn(arm.name, arm=arm, model=models[arm.name]) for arm in config.selected_arms()
    ]
    say(f"== the probes: {', '.join(words)} in {len(columns)} arms' layers")

    def run_cell(cell: Cell) -> dict[str, Any]:
        arm = cell.column.arm
        reader = load_layers(arm.reading, cell.column.model.for_seed(cell.seed))
        found = probe_word(reader, tokenizer, cell.task)
        top = found["layers"][-1]
        say(
            f"   {arm.name:>9} {cell.task}: top layer within - across "
            f"{top['within_minus_across']:+.3f} [{top['low']:+.3f}, {top['high']:+.3f}], "
            f"nearest sense {top['nearest_neighbour_accuracy']:.2f} (chance {found['chance']:.2f})"
        )
        return found

    written = run_grid(
        columns,
        words,
        [seed],
        run_cell,
        config.out / PROBES_FILE,
        lambda scores: {"config": {"seeds": [seed]}, "scores": scores},
    )
    return written["scores"]


# --- the tasks ------------------------------------------------------------------------------------


def row_name(task: LineageTask, method: str) -> str:
    """A row of results.json's scores: a task measured one way, e.g. `sst2-1k:probe`."""
    return f"{task.name}:{method}"


def _fine_tune(
    config: LineageConfig,
    tasks: tuple[LineageTask, ...],
    models: dict[str, ArmModel],
    tokenizer: Tokenizer,
    results: Callable[[Scores], dict[str, Any]],
    show_progress: bool,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Every arm x task row x seed (`grid.run_grid`: per row and seed every arm, so that the
    arms compare as early as possible), the report written after each cell."""
    rows = {row_name(task, method): (task, method) for task in tasks for method in task.methods}
    splits = {}
    for task in tasks:
        splits[task.name] = task_splits(config.data_dir, task.task)
        _, data, test = splits[task.name]
        check_split(config.out / FINETUNE_DIR / task.name, data.train, data.dev, test)
        say(
            f"   {task.name}: {len(data.train):,} training, {len(data.dev):,} dev, "
            f"{len(test):,} test examples"
        )
    columns = [
        _ArmColumn(
            arm.name,
            arm=arm,
            model=models[arm.name],
            tasks=tuple(name for name, (_, method) in rows.items() if method not in arm.skips),
        )
        for arm in config.selected_arms()
    ]
    say(f"== {len(rows)} task row(s) x {len(columns)} arm(s) x {len(config.seeds)} seed(s)")

    def run_cell(cell: Cell) -> dict[str, float]:
        task, method = rows[cell.task]
        grid_task, data, test = splits[task.name]
        inputs = CellInputs(
            arm=cell.column.arm,
            model_dir=cell.column.model.for_seed(cell.seed),
            row=task.task,
            task=grid_task,
            data=data,
            test=test,
            tokenizer=tokenizer,
            seed=cell.seed,
            run_dir=seed_dir(
                config.out / FINETUNE_DIR / task.name / method, cell.column.name, cell.seed
            ),
            show_progress=show_progress,
        )
        return METHODS[method](inputs)

    def after_cell(cell: Cell, scores: Scores) -> None:
        task, method = rows[cell.task]
        metric = splits[task.name][0].primary_metric
        values = [run[metric] for run in scores[cell.task][cell.column.name]]
        say(f"   {cell.column.name:>9} {cell.task}: {metric} {summary(values)}")

    order = ("task", "seed", "column")
    return run_grid(
        columns,
        list(rows),
        config.seeds,
        run_cell,
        config.out / RESULTS_FILE,
        results,
        order=order,
        write=lambda written: write_results(config.out, written),
        after_cell=after_cell,
    )


# --- the results ----------------------------------------------------------------------------------


def _one_class(
    config: LineageConfig, rows: dict[str, Any], scores: Scores
) -> dict[str, dict[str, list]]:
    """Per row and arm, the seeds scored so far whose best dev predictions were one class (the
    runs of bertlab's fine-tuning record it: `flows.one_class_seeds`)."""
    return {
        name: {
            arm: one_class_seeds(
                config.out / FINETUNE_DIR / rows[name]["task"] / rows[name]["method"],
                arm,
                config.seeds[: len(values)],
            )
            for arm, values in by_arm.items()
        }
        for name, by_arm in scores.items()
    }


def _results(
    config: LineageConfig,
    tasks: tuple[LineageTask, ...],
    pretraining: dict[str, Any],
    probes: dict[str, Any],
    scores: Scores,
    timings: dict[str, float],
) -> dict[str, Any]:
    recipe = budget_recipe(config.budget_minutes * 60)
    rows = {}
    for task in tasks:
        metric = task.task.spec.metrics
        for method in task.methods:
            rows[row_name(task, method)] = {
                "task": task.name,
                "method": method,
                "method_label": METHOD_LABELS[method],
                "metric_set": metric,
                "budget": task.task.to_json(),
                "arms": [arm.name for arm in config.selected_arms() if method not in arm.skips],
                "paper": {
                    arm: {"value": value, "source": source}
                    for arm, (value, source) in PAPER_FIGURES.get((task.name, method), {}).items()
                },
            }
    return {
        "config": {
            "lang": config.lang,
            "budget_minutes": config.budget_minutes,
            "seeds": list(config.seeds),
            "arms": list(config.arms),
            "probes": list(config.selected_probes()),
            "corpus": [str(path) for path in config.corpus_files()],
            "tokenizer": str(config.tokenizer) if config.tokenizer else "trained on the corpus",
            "max_examples": config.max_examples,
            "recipe": recipe.to_json(),
        },
        "arms": {
            arm.name: {
                "label": arm.label,
                "paper": arm.paper,
                "is_control": arm.is_control,
                "is_baseline": arm.is_baseline,
            }
            for arm in config.selected_arms()
        },
        "rows": rows,
        "pretraining": pretraining,
        "probes": probes,
        "scores": scores,
        "timings_seconds": timings,
    }
