"""The flows the apps share: fine-tune and test over seeds, the from-scratch twin, the verdict,
and the run directory's layout and settings.

An app (the demo, an experiment) compares a pre-trained encoder with a twin of the same shape
that starts from random weights, fine-tuned with the same budget and seeds and scored once on a
held-out test split. The run directory holds one folder per model and seed:

    OUT/finetune/<task>/<model>/seed-<S>/    the fine-tuning run (metrics.jsonl, curves.png)
                                    test.json  its metrics on the test split (written last)
    OUT/settings.json                          the settings every finished step was made with
    OUT/results.json                           what the app's table and figures are drawn from
    OUT/.bertlab.lock                          held by the one process running the app (`holding`)

A run whose `test.json` exists is finished and is skipped when the app runs again, so an
interrupted app continues where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import shutil
import statistics
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bertlab.core.atomic import atomic_directory, remove_temporaries, run_lock, write_json
from bertlab.core.config import BertConfig
from bertlab.core.finetune_config import FinetuneConfig
from bertlab.core.run_folder import RESULT_FILE
from bertlab.core.runtime import default_device, resolve_precision, set_seed
from bertlab.core.threads import set_threads
from bertlab.core.wording import Worded
from bertlab.network.bert import BertModel
from bertlab.task_families import Task, run_task
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.finetuning.finetune import ModelSource, TaskData, finetune_task
from bertlab.training.finetuning.one_class import LIKELY_CAUSES, OneClassCollapse
from bertlab.training.pretraining.budget import init_positions
from bertlab.training.word2vec.vectors import (
    VECTORS_FILE,
    WordVectorConfig,
    save_vectors,
    train_word_vectors,
    warm_start,
)

if TYPE_CHECKING:
    from gensim.models.keyedvectors import KeyedVectors

    from bertlab.corpus.format import TokenizedCorpus

TEST_FILE = "test.json"  # a fine-tuning run's metrics on the test split
RESULTS_FILE = "results.json"  # an app's numbers, from which its table and figures are drawn
SETTINGS_FILE = "settings.json"  # the settings every finished step of an app's OUT was made with
SPLIT_FILE = "split.json"  # per task: the split its fine-tuning runs were made on
# results.json: per task and model, the seeds whose best dev predictions were all one class
ONE_CLASS = "one_class"
PREDICTION_BATCH_SIZE = 128


def seed_dir(root: Path, model: str, seed: int) -> Path:
    """The folder of one model's fine-tuning run with one seed: ROOT/<model>/seed-<S>."""
    return root / model / f"seed-{seed}"


def read_test(run_dir: Path) -> dict[str, float]:
    """A finished run's test metrics."""
    return json.loads((run_dir / TEST_FILE).read_text(encoding="utf-8"))


def read_one_class(run_dir: Path) -> OneClassCollapse | None:
    """A fine-tuning run's one-class collapse as its result.json records it; None when its dev
    predictions used several classes, or for a run without result.json."""
    path = run_dir / RESULT_FILE
    if not path.is_file():
        return None
    recorded = json.loads(path.read_text(encoding="utf-8")).get("one_class")
    return OneClassCollapse.from_json(recorded)


def one_class_seeds(root: Path, model: str, seeds: Sequence[int]) -> list[dict[str, Any]]:
    """The seeds of one model's runs under ROOT (`seed_dir`) whose dev predictions were one
    class, as results.json records them: [{"seed": 2, "label": "positive", "share": 0.564}]."""
    found = []
    for seed in seeds:
        collapse = read_one_class(seed_dir(root, model, seed))
        if collapse is not None:
            found.append({"seed": seed} | collapse.to_json())
    return found


def one_class_runs(
    root: Path, scores: dict[str, dict[str, list]], seeds: Sequence[int]
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """results.json's `ONE_CLASS`: per task and model of `scores` (runs under ROOT/<task>), the
    seeds scored so far (the first ones, in order) whose dev predictions were one class."""
    return {
        task: {
            model: one_class_seeds(root / task, model, seeds[: len(values)])
            for model, values in by_model.items()
        }
        for task, by_model in scores.items()
    }


def finetune_and_test(
    task: Task,
    data: TaskData,
    test: Sequence,
    model_dir: Path,
    config: FinetuneConfig,
    run_dir: Path,
    show_progress: bool,
    keep_model: bool = False,
) -> dict[str, float]:
    """Fine-tune `model_dir` on `data`, score the best epoch's model once on `test`.

    A run whose `test.json` exists is not run again: its metrics are returned. An interrupted
    run (a folder without `test.json`) starts again from nothing.

    Args:
        task: the task.
        data: training and dev examples, and the label names.
        test: the held-out examples, scored once.
        model_dir: the encoder to fine-tune (pre-trained or a `random_twin`).
        config: the fine-tuning settings, with the run's seed.
        run_dir: the run's folder.
        show_progress: progress bars.
        keep_model: keep `run_dir/best`; otherwise only the scores are kept (an experiment's few
            hundred small models are not worth their disk space).

    Returns:
        The task's metrics on `test`, as written to `run_dir/test.json`.
    """
    if (run_dir / TEST_FILE).is_file():
        return read_test(run_dir)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    result = finetune_task(task, data, ModelSource(model_dir), config, run_dir, show_progress)
    model = task.load_head(result.best_dir, None).to(default_device())
    tokenizer = Tokenizer.from_pretrained(result.best_dir)
    precision = resolve_precision("auto", default_device())
    predictions = run_task(task, model, tokenizer, test, PREDICTION_BATCH_SIZE, precision)
    metrics = task.score(predictions, test)
    write_json(run_dir / TEST_FILE, metrics)
    if not keep_model:
        shutil.rmtree(result.best_dir)
    return metrics


# Fine-tuning runs at once on a CPU: one thread each. On 2 cores two short-sequence runs at once
# gave 1.6-1.75x the throughput of one after the other on two threads (one thread keeps ~0.85 of
# two's speed on SST-2 sentences, and no thread waits on another). At most 4: each run holds its
# own torch, model and data (about half a GB).
MAX_CONCURRENT_RUNS = 4


def concurrent_runs(threads: int, device_type: str) -> int:
    """How many independent fine-tuning runs to run at once with `threads` CPU threads: one per
    thread on the CPU (at most MAX_CONCURRENT_RUNS); one on a GPU, which each run fills."""
    if device_type != "cpu":
        return 1
    return max(1, min(MAX_CONCURRENT_RUNS, threads))


def run_concurrently(function: Callable, calls: Sequence[tuple], jobs: int) -> Iterator[Any]:
    """`function(*call)` for each call, the results in the calls' order as each is ready.

    With `jobs` > 1 the calls run in that many worker processes of one CPU thread each
    ("spawn": a fresh interpreter, so `import bertlab` sets the wait policy before torch loads);
    `function` and the calls must pickle. Each result is the same as in this process with one
    thread. An error in a call is raised here, and the calls not yet started are dropped.
    """
    if jobs <= 1 or len(calls) <= 1:
        for call in calls:
            yield function(*call)
        return
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=set_threads, initargs=(1,))
    try:
        futures = [pool.submit(function, *call) for call in calls]
        for future in futures:
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def word_vector_model(
    corpus: TokenizedCorpus,
    shape_dir: Path,
    directory: Path,
    say: Callable[[str], None],
    documents: tuple[int, int] | None = None,
) -> Path:
    """Skip-gram vectors of `corpus`'s pieces at the width of `shape_dir`'s model (its
    `documents`, all when None), saved in `directory` beside that shape's config.json and
    tokenizer: what `random_twin` starts a seed's embedding matrix from (`warm_start`)."""
    hidden = BertConfig.from_json_file(shape_dir / "config.json").hidden_size
    vector_config = WordVectorConfig(vector_size=hidden)
    first, end = documents or (0, corpus.num_documents)
    started = time.perf_counter()
    vectors = train_word_vectors(corpus, vector_config, (first, end))
    say(
        f"   word vectors: {len(vectors):,} pieces x {hidden} ({vector_config.method}, "
        f"{vector_config.epochs} epochs over {end - first:,} documents) in "
        f"{time.perf_counter() - started:.0f} s"
    )
    with atomic_directory(directory) as target:
        shutil.copy2(shape_dir / "config.json", target / "config.json")
        Tokenizer.from_pretrained(shape_dir).save_pretrained(target)
        save_vectors(vectors, target / VECTORS_FILE)
    return directory


def random_twin(
    config: BertConfig,
    tokenizer: Tokenizer,
    seed: int,
    position_init: str,
    directory: Path,
    word_vectors: KeyedVectors | None = None,
) -> Path:
    """A randomly initialized encoder of `config`'s shape with `seed`'s weights, and the tokenizer.

    It starts where pre-training started (`position_init` included), so a pre-trained model and
    its twin differ by the pre-training alone. With `word_vectors` (keyed by piece id), the
    embedding matrix starts from them instead (`bertlab.training.word2vec.vectors.warm_start`): the
    word-vector warm start, pre-trained embeddings under a random encoder. Written anew each time
    (in milliseconds).
    """
    set_seed(seed)
    model = BertModel(config)
    init_positions(model.embeddings, position_init, config.initializer_range)
    if word_vectors is not None:
        warm_start(model.embeddings.word_embeddings, word_vectors, config.initializer_range)
    with atomic_directory(directory) as temporary:
        model.save_pretrained(temporary)
        tokenizer.save_pretrained(temporary)
    return directory


# --- the verdict ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """Pre-trained against scratch over seeds: the gap of the medians and the larger seed spread.

    The pre-trained model wins when its median beats scratch's by more than either model's
    spread (max - min over the seeds): a gap inside the seed-to-seed noise is no gain.
    """

    margin: float  # median(pre-trained) - median(scratch)
    spread: float  # the larger of the two models' max - min

    @property
    def wins(self) -> bool:
        return self.margin > self.spread


def compare(scratch: Sequence[float], pretrained: Sequence[float]) -> Comparison:
    """The `Comparison` of two models' scores over the same seeds (`scored` values)."""
    scratch, pretrained = scored(scratch), scored(pretrained)
    margin = statistics.median(pretrained) - statistics.median(scratch)
    spread = max(max(scratch) - min(scratch), max(pretrained) - min(pretrained))
    return Comparison(margin, spread)


def sign_test(baseline: Sequence[float], other: Sequence[float]) -> tuple[int, int, float]:
    """Paired seeds: (seeds where `other` beats `baseline`, seeds where it loses, the two-sided
    exact sign test's p-value over the untied pairs). With 5 seeds, 5 of 5 gives p = 0.0625:
    no number of seeds below 6 can reach 0.05, which is why the verdict is `compare`'s spread
    rule and the sign test is reported beside it.

    Example: [0.70, 0.71, 0.72] against [0.75, 0.74, 0.70] -> (2, 1, 1.0).
    """
    pairs = list(zip(scored(baseline), scored(other), strict=True))
    wins = sum(b > a for a, b in pairs)
    losses = sum(b < a for a, b in pairs)
    untied = wins + losses
    if not untied:
        return wins, losses, 1.0
    tail = sum(math.comb(untied, k) for k in range(min(wins, losses) + 1)) / 2**untied
    return wins, losses, min(1.0, 2 * tail)


def outcome(baseline: Sequence[float], other: Sequence[float]) -> str:
    """ "win" when `other`'s median beats the baseline's by more than the larger seed spread,
    "loss" when it trails by more, else "level" (`compare`)."""
    comparison = compare(baseline, other)
    if comparison.wins:
        return "win"
    if -comparison.margin > comparison.spread:
        return "loss"
    return "level"


def win_loss_level(baseline: Sequence[float], other: Sequence[float]) -> str:
    """`outcome`, then the paired seeds won and lost (`sign_test`). Example: "win 5–0"."""
    wins, losses, _ = sign_test(baseline, other)
    return f"{outcome(baseline, other)} {wins}–{losses}"


def undefined(value: float | None) -> bool:
    """An undefined score: NaN in memory (the Spearman correlation of a constant prediction),
    null once written as JSON (`atomic.json_text`) and read back."""
    return value is None or math.isnan(value)


def scored(values: Sequence[float | None]) -> list[float]:
    """The seeds' scores with an undefined one (`undefined`) counted as 0, the correlation a
    constant prediction carries."""
    return [0.0 if undefined(value) else value for value in values]


def summary(values: Sequence[float | None]) -> str:
    """ "median (min–max)" of the seeds (`scored`), and how many predicted a constant."""
    kept = scored(values)
    text = f"{statistics.median(kept):.3f} ({min(kept):.3f}–{max(kept):.3f})"
    constant = sum(undefined(value) for value in values)
    return text + (f", {constant} constant" if constant else "")


def one_class_mark(results: dict[str, Any], task: str, model: str) -> str:
    """A table cell's mark for the seeds that predicted one class, e.g. ", 2 one class"."""
    runs = results.get(ONE_CLASS, {}).get(task, {}).get(model)
    return f", {len(runs)} one class" if runs else ""


def one_class_note(results: dict[str, Any]) -> list[str]:
    """A paragraph naming every seed whose dev predictions were one class, with the likely
    causes; no lines when there is none (or in results.json written before the check)."""
    found = [
        f"{task} {model} seed {run['seed']}: " + OneClassCollapse.from_json(run).describe()
        for task, by_model in results.get(ONE_CLASS, {}).items()
        for model, runs in by_model.items()
        for run in runs
    ]
    if not found:
        return []
    return [
        "",
        f'Seeds that predicted one class (marked "one class"): {"; ".join(found)}. Those '
        f"fine-tunings learned only one class; likely causes: {LIKELY_CAUSES}.",
    ]


# --- settings -------------------------------------------------------------------------------------


@contextmanager
def holding(out: Path) -> Iterator[Path]:
    """An app's run directory, written by this process alone while the block runs (`run_lock`:
    another process is refused, naming its pid), cleared first of what killed writers left.

    Raises:
        ValueError: another process writes `out`.
    """
    with run_lock(out):
        remove_temporaries(out)
        yield out


def config_settings(
    config: Any,
    not_settings: Collection[str],
    resolved: Mapping[str, Any],
    recorded_when_set: Collection[str] = (),
) -> dict[str, Any]:
    """An app's settings (`check_settings`), from its config dataclass, as JSON values.

    Every field is a setting under its own name, but those in `not_settings` (where the inputs and
    OUT are, what a later run may add to); so a new field is a setting without more code.

    Args:
        config: the app's config dataclass.
        not_settings: fields that are no settings, or are recorded under another name in
            `resolved`.
        resolved: what a setting is recorded as, over its field's own value (a path made
            absolute, None made the recipe's), and the settings that are no field (constants).
        recorded_when_set: settings added after the app's first runs, left out while None as
            those runs left them out (`check_settings` reads an absent setting as None).

    A path anywhere in the values is recorded absolute.
    """
    settings = {f.name: getattr(config, f.name) for f in fields(config)}
    settings = {name: value for name, value in settings.items() if name not in not_settings}
    settings |= resolved
    settings = {
        name: value
        for name, value in settings.items()
        if not (name in recorded_when_set and value is None)
    }
    return json.loads(json.dumps(settings, default=_json_path))


def _json_path(value: Any) -> str:
    if isinstance(value, Path):
        return str(value.resolve())
    raise TypeError(f"a setting must be a JSON value or a path, got {value!r}")


def check_settings(out: Path, settings: dict[str, Any]) -> None:
    """Record `settings` in OUT; refuse to continue an app's run made with other ones.

    A run of the same command skips every step whose output is there, which is only right if
    that output was made with the same settings (an earlier fine-tuning rate, vocabulary or
    recipe would otherwise be mixed silently into the new table).

    Raises:
        ValueError: OUT/settings.json holds other settings; the message names each difference.
    """
    settings = json.loads(json.dumps(settings))  # tuples as lists, as read back from the file
    path = out / SETTINGS_FILE
    if not path.is_file():
        write_json(path, settings)
        return
    recorded = json.loads(path.read_text(encoding="utf-8"))
    changed = [
        f"{key} {_shown(recorded, key)} there, {_shown(settings, key)} now"
        for key in sorted(set(recorded) | set(settings))
        if recorded.get(key) != settings.get(key)  # an absent setting is None
    ]
    if changed:
        raise ValueError(
            Worded(
                "{path} holds a run made with other settings ({changed}); use another {out}, "
                "or move that directory away to start again",
                path=out,
                changed="; ".join(changed),
            )
        )


def _shown(settings: dict[str, Any], key: str) -> str:
    """A setting's value in a message; `absent` where an older or newer app did not record it."""
    return repr(settings[key]) if key in settings else "absent"


def check_split(task_dir: Path, train: Sequence, dev: Sequence, test: Sequence) -> None:
    """Record a task's split beside its runs; refuse to continue runs made on another split.

    Finished runs are skipped when an app runs again, which is only right if the data and the
    split rules are still the same: TASK_DIR/split.json holds the sizes and a digest of the
    examples of the three parts.

    Raises:
        ValueError: the recorded split differs from this one.
    """
    digest = hashlib.sha256()
    for part in (train, dev, test):
        digest.update(f"{len(part)}\n".encode())
        for example in part:
            digest.update(f"{example!r}\n".encode())
    split = {"train": len(train), "dev": len(dev), "test": len(test), "sha256": digest.hexdigest()}
    path = task_dir / SPLIT_FILE
    if path.is_file():
        if json.loads(path.read_text(encoding="utf-8")) != split:
            raise ValueError(
                f"the data or split of {task_dir.name} changed since its runs in {task_dir} "
                "were made; move that directory away to fine-tune it again"
            )
        return
    write_json(path, split)
