"""`bertlab experiment ablation`: BERT's ablations side by side, on a budget.

BERT's own evidence for its design (Devlin et al. 2018, Sec. 5): Table 5 pre-trains the same
model on the same data with masked LM and next-sentence prediction, masked LM alone ("No NSP"),
and a left-to-right LM ("LTR & No NSP", GPT's objective), adds a randomly initialized BiLSTM on
top of the left-to-right model while fine-tuning ("+ BiLSTM"), and fine-tunes each on the same
tasks; Table 7 uses the MLM + NSP model without fine-tuning, as fixed features (the embeddings,
one hidden layer, the sum or the concatenation of the top four, a learned weighting of all) read
by a two-layer BiLSTM on CoNLL-2003; Table 6 pre-trains models of several sizes.

This experiment repeats them at a laptop's scale. Each objective pre-trains with the budget recipe
(`run_pretraining` with a `budget`, the same corpus, vocabulary, shape and minutes); the rows are
then fine-tuned with the same fine-tuning budget and seeds on SST-2, MRPC, CoNLL-2003 and SQuAD
(splits carved from the shared training files, as `experiment transfer` does), beside two
baselines that had no encoder pre-training: a random encoder whose embedding matrix starts from
word2vec vectors of the same corpus (the pre-2018 recipe) and a random encoder (`random_twin`).
The feature-based block fine-tunes only the combination, the BiLSTM and the task layer over the
frozen MLM + NSP encoder (`feature_head_config.FeatureHeadConfig`). `model_sizes` adds Table 6: the
MLM + NSP row again at other shapes with the same budget.

Everything lands in one directory, each step skipped when its output is there, so running the same
command again continues an interrupted experiment (`flows.check_settings` refuses one made with
other settings):

    OUT/tokenizer/  OUT/corpus/               the shared vocabulary and tokenized corpus
    OUT/pretrain/<objective>/                 one `bertlab pretrain` run per objective (and size)
    OUT/word-vectors/                         the word2vec vectors and the shape they go into
    OUT/finetune/<task>/<row>/seed-<S>/       each fine-tuning run and its test.json
    OUT/results.json, table.md, ablation.png  the tables in the paper's layout and the plot
"""

from __future__ import annotations

import dataclasses
import logging
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.apps.experiments.ablation_config import (
    CORPUS_DIR,
    FEATURE_LABELS,
    FEATURE_ROW_PREFIX,
    FEATURE_ROWS,
    FEATURE_TASK,
    FINETUNE_BATCH_SIZE,
    FINETUNE_DIR,
    LANG,
    LTR_BILSTM_HEAD,
    OBJECTIVES,
    ROW_LABELS,
    SHAPES_DIR,
    WORD_VECTOR_TOKENS,
    WORD_VECTORS_DIR,
    AblationConfig,
)
from bertlab.apps.experiments.ablation_options import (
    LTR_BILSTM,
    MLM_NSP,
    SCRATCH,
    WORD_VECTORS,
)
from bertlab.apps.experiments.ablation_report import (
    PLOT_FILE,
    TABLE_FILE,
    results_tables,
    write_results,
)
from bertlab.apps.experiments.grid import Cell, Column, GridTask, Scores, check_inputs, run_grid
from bertlab.apps.experiments.transfer_data import task_splits
from bertlab.apps.experiments.transfer_rows import (
    FINETUNE_LEARNING_RATE,  # experiment transfer's rate
)
from bertlab.apps.flows import (
    ONE_CLASS,
    RESULTS_FILE,
    check_settings,
    check_split,
    finetune_and_test,
    holding,
    one_class_runs,
    random_twin,
    seed_dir,
    summary,
    word_vector_model,
)
from bertlab.core.atomic import atomic_directory
from bertlab.core.config import BertConfig
from bertlab.core.finetune_config import FinetuneConfig, TaskDataConfig
from bertlab.core.run_folder import FINAL_DIR, METRICS_FILE
from bertlab.corpus.build import build_corpus
from bertlab.corpus.prepare import held_out_split
from bertlab.network.feature_head_config import FeatureHeadConfig
from bertlab.task_families import Task
from bertlab.tokenizer.training import TokenizerTrainingConfig, train_tokenizer
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.finetuning.finetune import TaskData
from bertlab.training.metrics_log import read_metrics
from bertlab.training.pretraining.budget import budget_recipe
from bertlab.training.pretraining.checkpointing import latest_checkpoint
from bertlab.training.pretraining.runner import run_pretraining
from bertlab.training.word2vec.vectors import (
    VECTORS_FILE,
    load_vectors,
)

logger = logging.getLogger(__name__)


# --- the experiment -------------------------------------------------------------------------------


def run_ablation(
    config: AblationConfig, show_progress: bool = True, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """Pre-train every objective, fine-tune every row x task x seed and the feature-based block,
    write results.json, table.md and ablation.png (after every row and task). One process at a
    time writes OUT (`flows.holding`); another is refused, naming its pid."""
    with holding(config.out):
        return _ablation(config, show_progress, say)


def _ablation(
    config: AblationConfig, show_progress: bool = True, say: Callable[[str], None] = print
) -> dict[str, Any]:
    """`run_ablation` holding OUT."""
    _check_inputs(config)
    started = time.perf_counter()
    config.out.mkdir(parents=True, exist_ok=True)
    check_settings(config.out, config.settings())
    tokenizer = _tokenizer(config, say)
    for name in config.objectives():
        say(f"== pre-training {name} with the budget recipe, {config.budget_minutes:g} min")
        _pretrain(config, name, None, show_progress, say)
    for size in config.model_sizes:
        say(f"== pre-training mlm+nsp at {size}, {config.budget_minutes:g} min")
        _pretrain(config, "mlm+nsp", size, show_progress, say)
    shape_dir = _shape_dir(config, tokenizer)
    vectors_dir = None
    if WORD_VECTORS in config.rows:
        vectors_dir = _word_vectors(config, tokenizer, shape_dir, say)
    timings = {"pre-training": time.perf_counter() - started}

    splits = {}
    for task in config.selected_tasks():
        splits[task.name] = ablation_splits(config.data_dir, task)
        _, data, test = splits[task.name]
        check_split(config.out / FINETUNE_DIR / task.name, data.train, data.dev, test)
        sizes = f"{len(data.train):,} training, {len(data.dev):,} dev, {len(test):,} test"
        say(f"   {task.name}: {sizes} examples")

    columns = _columns(config, shape_dir, vectors_dir)
    tasks = [task.name for task in config.selected_tasks()]
    pairs = sum(column.runs_on(task) for column in columns for task in tasks)
    say(f"== fine-tuning {pairs} model x task pairs x {len(config.seeds)} seed(s)")

    def results_of(scores: Scores) -> dict[str, Any]:
        timings["total"] = time.perf_counter() - started
        one_class = one_class_runs(config.out / FINETUNE_DIR, scores, config.seeds)
        return _results(config, scores, timings) | {ONE_CLASS: one_class}

    results = _fine_tune(config, splits, columns, results_of, show_progress, say)
    for line in results_tables(results):
        say(line)
    say(f"wrote {config.out / TABLE_FILE}, {config.out / PLOT_FILE}, {config.out / RESULTS_FILE}")
    return results


def _fine_tune(
    config: AblationConfig,
    splits: dict[str, tuple[Task, TaskData, list]],
    columns: list[_Column],
    results: Callable[[Scores], dict[str, Any]],
    show_progress: bool,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """Every row x task x seed (`grid.run_grid`: each row's tasks in turn, each with all its
    seeds), results.json, table.md and ablation.png written after each run."""
    by_name = {task.name: task for task in config.selected_tasks()}

    def run_cell(cell: Cell) -> dict[str, float]:
        column, spec = cell.column, by_name[cell.task]
        task, data, test = splits[cell.task]
        if column.features is not None:
            task = dataclasses.replace(task, features=column.features)
        run_dir = seed_dir(config.out / FINETUNE_DIR / cell.task, column.name, cell.seed)
        model_dir = column.model_dir if column.twin is None else column.twin(cell.seed)
        finetune_config = FinetuneConfig(
            learning_rate=column.learning_rate,
            batch_size=FINETUNE_BATCH_SIZE,
            num_train_epochs=spec.num_epochs,
            seed=cell.seed,
        )
        return finetune_and_test(
            task, data, test, model_dir, finetune_config, run_dir, show_progress
        )

    def after_cell(cell: Cell, scores: Scores) -> None:
        if cell.seed == config.seeds[-1]:  # a row's task done: its seeds' summary
            metric = by_name[cell.task].metric
            values = [metrics[metric] for metrics in scores[cell.task][cell.column.name]]
            say(f"   {cell.column.name:>24} {cell.task}: {metric} {summary(values)}")

    return run_grid(
        columns,
        list(by_name),
        config.seeds,
        run_cell,
        config.out / RESULTS_FILE,
        results,
        write=lambda written: write_results(config.out, written),
        after_cell=after_cell,
    )


def ablation_splits(data_dir: Path, column: GridTask) -> tuple[Task, TaskData, list]:
    """(task, train and dev, test) carved from the task's training file and subsampled to the
    column's sizes as `experiment transfer` carves them (`transfer_data.task_splits`); SQuAD's
    windows (`squad_max_seq_length`) take the column's length too, which transfer's rows (no
    SQuAD among them) leave at run_squad.py's."""
    task, data, test = task_splits(data_dir, column)
    length = column.input_length
    inputs = TaskDataConfig(max_seq_length=length, squad_max_seq_length=length)
    return dataclasses.replace(task, data=inputs), data, test


def _check_inputs(config: AblationConfig) -> None:
    files = config.corpus_files()  # no task text: the corpus is the user's or the shared one
    tokenizer = [] if config.tokenizer is None else [config.tokenizer]
    check_inputs(config.data_dir, config.selected_tasks(), files, tokenizer)


# --- pre-training ---------------------------------------------------------------------------------


def _tokenizer(config: AblationConfig, say: Callable[[str], None]) -> Tokenizer:
    """The one vocabulary of every row: given, or trained on the corpus as the budget recipe
    trains it (once: a continued experiment finds it in OUT/tokenizer)."""
    path = config.tokenizer_path()
    if config.tokenizer is None and not (path / "vocab.txt").is_file():
        recipe = budget_recipe(config.budget_minutes * 60)
        training = TokenizerTrainingConfig(
            vocab_size=recipe.vocab_size,
            min_ideograph_frequency=recipe.ideograph_frequency(LANG),
        )
        say(f"== a vocabulary of {recipe.vocab_size:,} pieces trained on the corpus")
        tokenizer, _ = train_tokenizer(config.corpus_files(), training, show_progress=False)
        with atomic_directory(path) as temporary:
            tokenizer.save_pretrained(temporary)
    return Tokenizer.from_pretrained(path)


def _pretrain(
    config: AblationConfig,
    objective: str,
    size: str | None,
    show_progress: bool,
    say: Callable[[str], None],
) -> Path:
    """One objective's run into its directory (continued if interrupted, skipped if done)."""
    run_dir = config.pretrain_dir(objective, size)
    if (run_dir / FINAL_DIR / "config.json").is_file():
        return run_dir / FINAL_DIR
    resume = latest_checkpoint(run_dir) is not None
    run = config.pretrain_run(objective, size, resume)
    run_pretraining(run, show_progress=show_progress, say=say)
    return run_dir / FINAL_DIR


def _shape_dir(config: AblationConfig, tokenizer: Tokenizer) -> Path:
    """The MLM + NSP model's shape (config.json) and the tokenizer, without weights: what the
    random twins are built from, bidirectional and with the fine-tuning dropout."""
    directory = config.out / SHAPES_DIR / SCRATCH
    if not (directory / "config.json").is_file():
        final = config.pretrain_dir("mlm+nsp") / FINAL_DIR
        with atomic_directory(directory) as target:
            shutil.copy2(final / "config.json", target / "config.json")
            tokenizer.save_pretrained(target)
    return directory


def _word_vectors(
    config: AblationConfig, tokenizer: Tokenizer, shape_dir: Path, say: Callable[[str], None]
) -> Path:
    """Skip-gram vectors of the vocabulary's pieces on the corpus's first WORD_VECTOR_TOKENS
    tokens (never its held-out documents), beside the shape they start the embeddings of."""
    directory = config.out / WORD_VECTORS_DIR
    if (directory / VECTORS_FILE).is_file():
        return directory
    corpus = build_corpus(
        config.corpus_files(), tokenizer, config.out / CORPUS_DIR, LANG, False
    )  # pre-training's tokenized corpus, found in its cache
    num_train, _ = held_out_split(corpus.num_documents, 1)
    offsets = corpus.sentence_offsets[corpus.document_offsets[: num_train + 1]]
    documents = int((offsets <= WORD_VECTOR_TOKENS).sum()) - 1
    return word_vector_model(corpus, shape_dir, directory, say, (0, max(1, documents)))


def _twin_factory(config: AblationConfig, shape_dir: Path) -> Callable[[int], Path]:
    """seed -> that seed's random encoder of `shape_dir`'s shape (with its word vectors, if
    any), started like pre-training (sinusoidal positions) with the fine-tuning dropout."""

    def twin(seed: int) -> Path:
        shape = BertConfig.from_json_file(shape_dir / "config.json")
        model_config = shape.replace(is_causal=False)
        vectors = None
        if (shape_dir / VECTORS_FILE).is_file():
            vectors = load_vectors(shape_dir / VECTORS_FILE)
        position_init = budget_recipe(config.budget_minutes * 60).position_init
        directory = shape_dir.with_name(f"{shape_dir.name}-seed-{seed}")
        tokenizer = Tokenizer.from_pretrained(shape_dir)
        return random_twin(model_config, tokenizer, seed, position_init, directory, vectors)

    return twin


# --- the runs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Column(Column):
    """One row of the tables (a column of the grid): a model fine-tuned with every seed on the
    tasks it runs on."""

    model_dir: Path | None  # a pre-trained model, or None for a seed's twin
    twin: Callable[[int], Path] | None = None
    features: FeatureHeadConfig | None = None
    learning_rate: float = FINETUNE_LEARNING_RATE  # the config's rate for its kind of row


def size_row(size: str) -> str:
    """Table 6's row of the MLM + NSP model at another shape, e.g. `mlm+nsp@mini`."""
    return f"{MLM_NSP}@{size}"


def _columns(config: AblationConfig, shape_dir: Path, vectors_dir: Path | None) -> list[_Column]:
    """Table 5's rows, each on every task, then Table 7's block on its task, then Table 6's
    sizes on every task."""
    rate = config.learning_rate
    columns = []
    for row in config.rows:
        if row == SCRATCH:
            twin = _twin_factory(config, shape_dir)
            columns.append(_Column(row, None, twin, learning_rate=rate))
        elif row == WORD_VECTORS:
            twin = _twin_factory(config, vectors_dir)
            columns.append(_Column(row, None, twin, learning_rate=rate))
        else:
            final = config.pretrain_dir(OBJECTIVES[row]) / FINAL_DIR
            head = LTR_BILSTM_HEAD if row == LTR_BILSTM else None
            columns.append(_Column(row, final, features=head, learning_rate=rate))
    if config.feature_based:
        final = config.pretrain_dir("mlm+nsp") / FINAL_DIR
        for layers in FEATURE_ROWS:
            head = FeatureHeadConfig(layers=layers, use_bilstm=True)
            name = FEATURE_ROW_PREFIX + layers
            feature_rate = config.feature_learning_rate
            columns.append(_Column(name, final, None, head, feature_rate, tasks=(FEATURE_TASK,)))
    for size in config.model_sizes:
        final = config.pretrain_dir("mlm+nsp", size) / FINAL_DIR
        columns.append(_Column(size_row(size), final, learning_rate=rate))
    return columns


# --- the results ----------------------------------------------------------------------------------


def pretraining_summary(run_dir: Path) -> dict[str, Any]:
    """What one pre-training run did: steps, tokens, minutes and the last held-out evaluation
    (for a left-to-right run its `lm_` figures), with the held-out perplexity exp(LM loss)."""
    records = read_metrics(run_dir / METRICS_FILE)
    trains = [r for r in records if r["kind"] == "train"]
    evals = [r for r in records if r["kind"] == "eval"]
    last = evals[-1] if evals else {}
    loss = last.get("mlm_loss", last.get("lm_loss"))
    return {
        "steps": trains[-1]["step"] if trains else 0,
        "tokens": trains[-1]["tokens"] if trains else 0,
        "minutes": trains[-1]["elapsed_seconds"] / 60 if trains else 0.0,
        "last_eval": last,
        "perplexity": math.exp(loss) if loss is not None else None,
    }


def _results(
    config: AblationConfig, scores: dict[str, dict[str, list[dict]]], timings: dict[str, float]
) -> dict[str, Any]:
    shapes = {}
    runs = [(name, None) for name in config.objectives()]
    runs += [("mlm+nsp", size) for size in config.model_sizes]
    pretraining = {}
    for objective, size in runs:
        run_dir = config.pretrain_dir(objective, size)
        name = run_dir.name
        pretraining[name] = pretraining_summary(run_dir) | {"objective": objective}
        model = BertConfig.from_json_file(run_dir / FINAL_DIR / "config.json")
        shapes[name] = {
            "size": size or config.shape(),
            "layers": model.num_hidden_layers,
            "hidden": model.hidden_size,
            "heads": model.num_attention_heads,
        }
    recipe = budget_recipe(config.budget_minutes * 60)
    return {
        "config": {
            "budget_minutes": config.budget_minutes,
            "seeds": list(config.seeds),
            "rows": list(config.rows),
            "row_labels": ROW_LABELS,
            "feature_rows": list(FEATURE_ROWS) if config.feature_based else [],
            "feature_labels": FEATURE_LABELS,
            "feature_task": FEATURE_TASK,
            "model_size": config.shape(),
            "model_sizes": list(config.model_sizes),
            "corpus": [str(path) for path in config.corpus_files()],
            "tokenizer": str(config.tokenizer) if config.tokenizer else "trained on the corpus",
            "finetune_learning_rate": config.learning_rate,
            "feature_learning_rate": config.feature_learning_rate,
            "finetune_batch_size": FINETUNE_BATCH_SIZE,
            "word_vector_tokens": WORD_VECTOR_TOKENS,
            "max_examples": config.max_examples,
            "recipe": recipe.to_json(),
        },
        "tasks": {task.name: dataclasses.asdict(task) for task in config.selected_tasks()},
        "pretraining": pretraining,
        "shapes": shapes,
        "scores": scores,
        "timings_seconds": timings,
    }
