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
frozen MLM + NSP encoder (`feature_heads.FeatureHeadConfig`). `model_sizes` adds Table 6: the
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
import json
import logging
import math
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.apps.ablation_report import PLOT_FILE, TABLE_FILE, results_tables, write_results
from bertlab.apps.flows import (
    RESULTS_FILE,
    check_settings,
    check_split,
    finetune_and_test,
    holding,
    random_twin,
    seed_dir,
    summary,
    word_vector_model,
)
from bertlab.apps.transfer_data import CORPORA, TransferTask, task_splits
from bertlab.atomic import atomic_directory
from bertlab.config import PRESETS, BertConfig, FinetuneConfig, TaskDataConfig
from bertlab.data.corpus import build_corpus
from bertlab.data.tasks.splits import subsample
from bertlab.feature_heads import FeatureHeadConfig
from bertlab.task_families import Task
from bertlab.tokenization import Tokenizer
from bertlab.tokenizer_training import TokenizerTrainingConfig, train_tokenizer
from bertlab.training.budget import budget_recipe
from bertlab.training.checkpointing import latest_checkpoint
from bertlab.training.finetune import TaskData
from bertlab.training.loop import FINAL_DIR, held_out_split
from bertlab.training.metrics_log import METRICS_FILE, read_metrics
from bertlab.training.pretrain_run import PretrainRun, run_pretraining
from bertlab.training.word_vectors import (
    VECTORS_FILE,
    load_vectors,
)

logger = logging.getLogger(__name__)

LANG = "en"  # the tasks of Tables 5 and 7 are English
DEFAULT_BUDGET_MINUTES = 10.0  # per objective: three objectives pre-train for 30 minutes in all
FINETUNE_LEARNING_RATE = 5e-4  # experiment transfer's, measured for these model sizes
FEATURE_LEARNING_RATE = 1e-3  # only the BiLSTM and the task layer learn: Adam's usual rate
FINETUNE_BATCH_SIZE = 32
CHECKPOINT_MINUTES = 5.0  # pre-training checkpoints, so that an interrupted run resumes
EVAL_EVERY_STEPS = 250  # held-out LM evaluations of each pre-training run
WORD_VECTOR_TOKENS = 10_000_000  # corpus tokens word2vec reads (5 epochs): about what a run sees
TOKENIZER_DIR, CORPUS_DIR, PRETRAIN_DIR = "tokenizer", "corpus", "pretrain"
WORD_VECTORS_DIR, FINETUNE_DIR, SHAPES_DIR = "word-vectors", "finetune", "shapes"

# The rows of Table 5, in the paper's order, and the two baselines without encoder pre-training.
MLM_NSP, MLM, LTR, LTR_BILSTM, WORD_VECTORS, SCRATCH = (
    "mlm+nsp",
    "mlm",
    "ltr",
    "ltr+bilstm",
    "word-vectors",
    "no-pretraining",
)
ROWS = (MLM_NSP, MLM, LTR, LTR_BILSTM, WORD_VECTORS, SCRATCH)
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


@dataclass(frozen=True)
class AblationTask:
    """A column: a registered task, the metric the paper reports for it and the fine-tuning
    budget. `max_*_examples` subsample the carved splits (SQuAD's are large)."""

    name: str
    task: str  # a name in the task registry
    metric: str  # a key of the task's metrics, as BERT reports it
    epochs: int
    max_seq_length: int
    max_train_examples: int | None = None
    max_dev_examples: int | None = None
    max_test_examples: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# The columns: Table 5's SST-2, MRPC and SQuAD and Table 7's CoNLL-2003 (MNLI and QNLI are not in
# the shared data). MRPC is reported as accuracy, as in Table 5. The training parts are capped so
# that the whole command with 3 seeds runs in under 2 hours on 2 CPU cores: SST-2 at 8,000 of its
# 48,511 carved sentences, CoNLL-2003 at 5,000 of 10,110 (Table 7's six BiLSTM rows train on it
# too), SQuAD at 2,000 questions; dev and test parts are whole but SQuAD's.
TASKS = (
    AblationTask("sst2", "sst2", "accuracy", epochs=1, max_seq_length=64, max_train_examples=8000),
    AblationTask("mrpc", "mrpc", "accuracy", epochs=3, max_seq_length=128),
    AblationTask(
        "conll2003", "conll2003", "f1", epochs=3, max_seq_length=128, max_train_examples=5000
    ),
    AblationTask(
        "squad",
        "squad",
        "f1",
        epochs=2,
        max_seq_length=256,
        max_train_examples=2000,
        max_dev_examples=300,
        max_test_examples=1000,
    ),
)
# `uncapped`: the training parts of the notebook's first round (about 2 h 35 min on 2 cores),
# where the BiLSTM rows had the data to learn from; SQuAD stays a sample of its 87,599 questions.
UNCAPPED_TRAIN_EXAMPLES = {"sst2": None, "mrpc": None, "conll2003": None, "squad": 3000}


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
    seeds: tuple[int, ...] = (1, 2, 3)
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

    def selected_tasks(self) -> tuple[AblationTask, ...]:
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

    def columns(self) -> tuple[AblationTask, ...]:
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
        return [objective for objective in ("mlm+nsp", "mlm", "clm") if objective in needed]

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
        """What every finished step depends on (tasks, rows, seeds and sizes may be added)."""
        recipe = budget_recipe(self.budget_minutes * 60)
        settings = {
            "budget_minutes": self.budget_minutes,
            "corpus": [str(path.resolve()) for path in self.corpus_files()],
            "model_size": self.shape(),
            "tokenizer": str(self.tokenizer.resolve()) if self.tokenizer else None,
            **{f"recipe.{name}": value for name, value in recipe.to_json().items()},
            "finetune_learning_rate": self.learning_rate,
            "feature_learning_rate": self.feature_learning_rate,
            "finetune_batch_size": FINETUNE_BATCH_SIZE,
            "word_vector_tokens": WORD_VECTOR_TOKENS,
            "tasks": {task.name: task.to_json() for task in self.columns()},
            "max_examples": self.max_examples,
        }
        return json.loads(json.dumps(settings))


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
    for objective in config.objectives():
        say(f"== pre-training {objective} with the budget recipe, {config.budget_minutes:g} min")
        _pretrain(config, objective, None, show_progress, say)
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

    runs = _runs(config, shape_dir, vectors_dir)
    say(f"== fine-tuning {len(runs)} model x task pairs x {len(config.seeds)} seed(s)")
    scores: dict[str, dict[str, list[dict[str, float]]]] = {}
    results: dict[str, Any] = {}
    for run in runs:
        column = next(task for task in config.selected_tasks() if task.name == run.task)
        task, data, test = splits[run.task]
        if run.features is not None:
            task = dataclasses.replace(task, features=run.features)
        metrics = []
        for seed in config.seeds:
            run_dir = seed_dir(config.out / FINETUNE_DIR / run.task, run.name, seed)
            model_dir = run.model_dir if run.twin is None else run.twin(seed)
            finetune_config = FinetuneConfig(
                learning_rate=run.learning_rate,
                batch_size=FINETUNE_BATCH_SIZE,
                num_train_epochs=column.epochs,
                seed=seed,
            )
            metrics.append(
                finetune_and_test(
                    task, data, test, model_dir, finetune_config, run_dir, show_progress
                )
            )
        scores.setdefault(run.task, {})[run.name] = metrics
        values = [m[column.metric] for m in metrics]
        say(f"   {run.name:>24} {run.task}: {column.metric} {summary(values)}")
        timings["total"] = time.perf_counter() - started
        results = _results(config, scores, timings)
        write_results(config.out, results)
    for line in results_tables(results):
        say(line)
    say(f"wrote {config.out / TABLE_FILE}, {config.out / PLOT_FILE}, {config.out / RESULTS_FILE}")
    return results


def ablation_splits(data_dir: Path, column: AblationTask) -> tuple[Task, TaskData, list]:
    """(task, train and dev, test) carved from the task's training file as `experiment
    transfer` carves them (`transfer_data.task_splits`), then subsampled to the column's sizes."""
    row = TransferTask(
        column.name,
        column.task,
        epochs=column.epochs,
        max_seq_length=column.max_seq_length,
        max_train_examples=column.max_train_examples,
    )
    task, data, test = task_splits(data_dir, row)
    length = column.max_seq_length
    inputs = TaskDataConfig(max_seq_length=length, squad_max_seq_length=length)
    task = dataclasses.replace(task, data=inputs)
    dev = subsample_list(data.dev, column.max_dev_examples)
    test = subsample_list(test, column.max_test_examples)
    return task, TaskData(data.train, dev, data.label_names), test


def subsample_list(examples: list, size: int | None) -> list:
    """The first `size` of a fixed shuffle (`splits.subsample`), kept in file order."""
    if size is None or size >= len(examples):
        return examples
    kept = {id(example) for example in subsample(examples, size)}
    return [example for example in examples if id(example) in kept]


def _check_inputs(config: AblationConfig) -> None:
    missing = [str(path) for path in config.corpus_files() if not path.is_file()]
    for column in config.selected_tasks():
        row = TransferTask(column.name, column.task)
        if not (config.data_dir / row.path).is_file():
            missing.append(str(config.data_dir / row.path))
    if config.tokenizer is not None and not config.tokenizer.exists():
        missing.append(str(config.tokenizer))
    if missing:
        raise FileNotFoundError(f"missing input file(s): {', '.join(missing)}")


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
class _Run:
    """One (model, task) pair of the tables: fine-tuned with every seed."""

    name: str  # the row, as results.json keys it
    task: str
    model_dir: Path | None  # a pre-trained model, or None for a seed's twin
    twin: Callable[[int], Path] | None = None
    features: FeatureHeadConfig | None = None
    learning_rate: float = FINETUNE_LEARNING_RATE  # the config's rate for its kind of row


def size_row(size: str) -> str:
    """Table 6's row of the MLM + NSP model at another shape, e.g. `mlm+nsp@mini`."""
    return f"{MLM_NSP}@{size}"


def _runs(config: AblationConfig, shape_dir: Path, vectors_dir: Path | None) -> list[_Run]:
    """Table 5's rows task by task, then Table 7's block, then Table 6's sizes."""
    rate = config.learning_rate
    runs = []
    for row in config.rows:
        for column in config.selected_tasks():
            if row == SCRATCH:
                twin = _twin_factory(config, shape_dir)
                runs.append(_Run(row, column.name, None, twin, learning_rate=rate))
            elif row == WORD_VECTORS:
                twin = _twin_factory(config, vectors_dir)
                runs.append(_Run(row, column.name, None, twin, learning_rate=rate))
            else:
                final = config.pretrain_dir(OBJECTIVES[row]) / FINAL_DIR
                head = LTR_BILSTM_HEAD if row == LTR_BILSTM else None
                runs.append(_Run(row, column.name, final, features=head, learning_rate=rate))
    if config.feature_based:
        final = config.pretrain_dir("mlm+nsp") / FINAL_DIR
        for layers in FEATURE_ROWS:
            head = FeatureHeadConfig(layers=layers, use_bilstm=True)
            name = FEATURE_ROW_PREFIX + layers
            runs.append(_Run(name, FEATURE_TASK, final, None, head, config.feature_learning_rate))
    for size in config.model_sizes:
        final = config.pretrain_dir("mlm+nsp", size) / FINAL_DIR
        for column in config.selected_tasks():
            runs.append(_Run(size_row(size), column.name, final, learning_rate=rate))
    return runs


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
    runs = [(objective, None) for objective in config.objectives()]
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
        "tasks": {task.name: task.to_json() for task in config.selected_tasks()},
        "pretraining": pretraining,
        "shapes": shapes,
        "scores": scores,
        "timings_seconds": timings,
    }
