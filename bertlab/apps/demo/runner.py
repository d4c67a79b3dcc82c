"""`bertlab demo`: pre-training on text of the task's own kind, in a few minutes, on shipped data.

The situation of most users: a pile of unlabeled text from their domain and a few labels. The demo
(1) trains a WordPiece vocabulary on unlabeled movie reviews (English; hotel, laptop and book
reviews in Chinese), (2) pre-trains a small BERT on them with the budget recipe for `--minutes`,
(3) fills in masked words with it and with the model that ships with bertlab (pre-trained for
much longer on the same kind of text), (4) trains word2vec vectors on the same reviews, the
pre-2018 way to transfer, (5) fine-tunes three models of the same shape on a few labelled
sentences of a sentiment task, several seeds each: the pre-trained BERT, a random encoder whose
embeddings start from the word vectors, and a random encoder from scratch, (6) fine-tunes the
shipped model the same way, and a random twin of its own shape and vocabulary when that differs
from the demo's, (7) draws one sentence's attention, and writes a report with the figures.
`docs/demo.md` says what it measured. Without gensim (an optional package, `bertlab.core.optional`)
step 4 and its row in step 5 are skipped, in one line that says why; the rest runs as before.

Everything the report says comes from OUT/results.json, which this run writes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertlab.apps.demo.config import (
    BASELINES,
    DATA_DIR,
    DEFAULT_MINUTES,
    DEFAULT_OUT,
    DEFAULT_SEEDS,
    EVAL_EXAMPLES,
    NEIGHBOURS,
    NUMBERS,
    PRETRAIN_DIR,
    RECIPES,
    TOP_K,
    WORD_VECTORS,
    DemoRecipe,
)
from bertlab.apps.demo.report import results_table, run_name, write_report
from bertlab.apps.demo.rows import (
    demo_rows,
    demo_task_data,
    describe_shipped,
    finetune_rows,
    majority_share,
    model_config,
    shipped_rows,
)
from bertlab.apps.flows import (
    ONE_CLASS,
    RESULTS_FILE,
    compare,
    concurrent_runs,
    holding,
    one_class_seeds,
    sign_test,
)
from bertlab.core import hub
from bertlab.core.atomic import write_json
from bertlab.core.config import (
    BertConfig,
    check_training_time,
)
from bertlab.core.optional import MissingPackageError
from bertlab.core.outputs import check_outputs
from bertlab.core.replacing import claim, outputs_in, replacing, restore_replaced
from bertlab.core.run_folder import (
    CORPUS_CACHE_DIR,
    FINAL_DIR,
    METRICS_FILE,
    PLAN_FILE,
    TOKENIZER_DIR,
)
from bertlab.core.runtime import default_device
from bertlab.corpus.build import build_corpus
from bertlab.corpus.prepare import held_out_split
from bertlab.tokenizer.training import TokenizerTrainingConfig, train_tokenizer
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.metrics_log import read_metrics
from bertlab.training.pretraining.budget import budget_recipe
from bertlab.training.pretraining.run import PretrainRun
from bertlab.training.pretraining.runner import run_pretraining
from bertlab.training.word2vec.vectors import WordVectorConfig, train_word_vectors
from bertlab.use.inspection import (
    attention_maps,
    fill_mask,
    load_encoder,
    load_for_fill_mask,
    plot_attention,
)

__all__ = ["DATA_DIR", "DEFAULT_MINUTES", "DEFAULT_OUT", "DEFAULT_SEEDS", "RECIPES", "run_demo"]

logger = logging.getLogger(__name__)

DEMO_COMMAND = "demo"  # whose run directory OUT is (`replacing.claim`)
# What a demo writes in OUT, replaced as a whole by the next demo (`replacing.replacing`); the
# corpus cache stays, tokenized again only for another tokenizer.
DEMO_OUTPUTS = (
    TOKENIZER_DIR,
    PRETRAIN_DIR,
    "twins",
    "finetune",
    "attention.png",
    "pretraining.png",
    "finetuning.png",
    "comparison.png",
    RESULTS_FILE,
    "report.md",
)


@dataclass
class DemoResult:
    """What one demo measured (written to OUT/results.json; the report reads only that)."""

    recipe: DemoRecipe
    minutes: float
    tokenization: list[str]
    pretrain: dict[str, Any]
    fill_mask: list[dict[str, Any]]
    word_vectors: dict[str, Any]  # {"skipped": why} when the step could not run
    shipped: dict[str, Any]  # the shipped model: `describe_shipped`
    seeds: tuple[int, ...]
    # a row -> the test accuracy of each seed, for the first len(...) of `seeds`
    scores: dict[str, list[float]]
    timings: dict[str, float]
    one_class: dict[str, list[dict[str, Any]]]  # a row -> `flows.one_class_seeds`
    majority: float  # the test set's commonest label's share: one class's accuracy

    def comparisons(self) -> list[dict[str, Any]]:
        """Each row against the scratch rows of `BASELINES` that ran, over the seeds both have:
        the medians' gap, the larger spread (`flows.compare`) and the paired seeds
        (`flows.sign_test`)."""
        found = []
        for name, baselines in BASELINES.items():
            if name not in self.scores:  # a row that did not run (word vectors without gensim)
                continue
            for baseline in (b for b in baselines if b in self.scores):
                common = min(len(self.scores[name]), len(self.scores[baseline]))
                scores, scratch = self.scores[name][:common], self.scores[baseline][:common]
                comparison = compare(scratch, scores)
                wins, losses, p_value = sign_test(scratch, scores)
                found.append(
                    {
                        "model": name,
                        "baseline": baseline,
                        "seeds": common,
                        "margin": comparison.margin,
                        "spread": comparison.spread,
                        "beats_scratch": comparison.wins,
                        "paired_wins": wins,
                        "paired_losses": losses,
                        "sign_test_p": p_value,
                    }
                )
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "recipe": dataclasses.asdict(self.recipe),
            "minutes": self.minutes,
            "tokenization": self.tokenization,
            "seeds": list(self.seeds),
            "pretrain": self.pretrain,
            "fill_mask": self.fill_mask,
            "word_vectors": self.word_vectors,
            "shipped": self.shipped,
            "scores": self.scores,
            ONE_CLASS: {self.recipe.task: self.one_class},  # as the experiments record it
            "comparisons": self.comparisons(),
            "majority": self.majority,
            "timings": self.timings,
        }


def run_demo(
    out: Path = DEFAULT_OUT,
    minutes: float = DEFAULT_MINUTES,
    lang: str = "en",
    seeds: tuple[int, ...] = DEFAULT_SEEDS,
    show_progress: bool = True,
    say=print,
    recipe: DemoRecipe | None = None,
    model: str | None = None,
) -> DemoResult:
    """Run the steps, printing each as it happens; write OUT/results.json, report.md, figures.

    `recipe` replaces the language's recipe (tests use a tiny one); `model` replaces its shipped
    model (`bertlab:NAME`, a folder or a Hugging Face Hub id), found before anything runs.

    Raises:
        ValueError: an unknown language, minutes that are not positive or over a year, no
            seeds; a model without a masked-LM head; another process writes OUT.
        FileNotFoundError: no such shipped model, folder or Hub model.
    """
    if lang not in RECIPES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(RECIPES)}")
    if not minutes > 0:
        raise ValueError(f"minutes must be positive, got {minutes}")
    check_training_time("minutes", minutes * 60)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {list(seeds)}")
    recipe = recipe or RECIPES[lang]
    name = model or recipe.shipped_model
    shipped = (name, shipped_model_folder(name))
    with holding(Path(out)) as out:  # one process at a time; another is refused with its pid
        if restore_replaced(out):  # a killed demo's: its earlier one comes back first
            logger.warning("%s: put back the earlier demo that an interrupted one replaced", out)
        claim(out, DEMO_COMMAND, (*DEMO_OUTPUTS, CORPUS_CACHE_DIR), _is_demo)  # only the demo's
        check_outputs({"model": shipped[1]}, {}, {"out": outputs_in(out, DEMO_OUTPUTS)})
        # An earlier demo goes only once this one has finished: a failed or interrupted one
        # puts it back (and any command reading it does, after a kill).
        with replacing(out, DEMO_OUTPUTS):
            return _demo(recipe, out, minutes, seeds, shipped, show_progress, say)


def _is_demo(out: Path) -> bool:
    """Whether `out` holds a demo by its layout: results.json with a recipe and scores."""
    try:
        results = json.loads((out / RESULTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(results, dict) and {"recipe", "scores"} <= results.keys()


def shipped_model_folder(name: str) -> Path:
    """The folder of the model set beside the demo's own: `hub.resolve`'s, checked to hold a
    BERT with a masked-LM head (the demo fills in masked words with it).

    Raises:
        FileNotFoundError: no such shipped model, folder or Hub model (one line, from `hub`).
        ValueError: a folder without config.json, or a model without a masked-LM head.
    """
    folder = hub.resolve(name)
    if not (folder / "config.json").is_file():
        raise ValueError(f"{name} is not a model: there is no {folder / 'config.json'}")
    load_for_fill_mask(folder)  # raises, in one line, for a model without a masked-LM head
    return folder


def _demo(
    recipe: DemoRecipe,
    out: Path,
    minutes: float,
    seeds: tuple[int, ...],
    shipped: tuple[str, Path],
    show_progress: bool,
    say,
) -> DemoResult:
    """`run_demo` holding OUT; `shipped` is the shipped model's (name, folder)."""
    timings: dict[str, float] = {}
    clock = _Clock(timings)
    name, shipped_dir = shipped

    say(f"\n== 1. A WordPiece vocabulary of {recipe.vocab_size:,} pieces on {recipe.corpus}")
    tokenizer, pieces = _step_tokenizer(recipe, out, show_progress, say)
    clock.lap("vocabulary")

    say(f"\n== 2. Pre-training a {recipe.num_hidden_layers}-layer BERT on it, {minutes:g} min")
    pretrain_summary = _step_pretrain(recipe, tokenizer, minutes, out, show_progress, say)
    clock.lap("pre-training")

    say(f"\n== 3. Fill-mask: the model of step 2, and {name}")
    predictions = _step_fill_mask(recipe, out / PRETRAIN_DIR / FINAL_DIR, shipped_dir, say)

    say("\n== 4. Word vectors (word2vec, skip-gram) of the same text")
    vectors, neighbours = _step_word_vectors(recipe, tokenizer, out, say)
    clock.lap("word vectors")
    if vectors is None:  # skipped: no time of its own to report
        del timings["word vectors"]

    task_data = demo_task_data(recipe)
    rows = demo_rows(recipe, out, vectors, seeds)
    count = NUMBERS[len(rows)]
    say(f"\n== 5. Fine-tuning on {recipe.task}: {count} models of one shape, seeds {seeds}")
    train, dev, test = len(task_data[1].train), len(task_data[1].dev), len(task_data[2])
    say(f"  {train} training, {dev} dev (best epoch), {test} test")
    rate, batch = recipe.finetune_learning_rate, recipe.finetune_batch_size
    jobs = concurrent_runs(torch.get_num_threads(), default_device().type)
    if jobs > 1:
        say(f"  {jobs} runs at once, one CPU thread each")
    scores = finetune_rows(recipe, task_data, rows, (rate, batch), out, jobs, say)
    clock.lap("fine-tuning")

    about = describe_shipped(name, shipped_dir, recipe, out / PRETRAIN_DIR / FINAL_DIR)
    rows = shipped_rows(recipe, out, shipped_dir, about["same_start"], seeds)
    said = ", ".join(f"{row.name} seeds {row.seeds}" for row in rows)
    if not about["same_start"]:
        rate, batch = recipe.shipped_learning_rate, recipe.shipped_batch_size
    about["learning_rate"], about["batch_size"] = rate, batch
    say(
        f"\n== 6. Fine-tuning {name} ({about['shape']}) at learning rate {rate:g}, batch "
        f"{batch}: {said}"
    )
    scores |= finetune_rows(recipe, task_data, rows, (rate, batch), out, jobs, say)
    clock.lap("fine-tuning the shipped model")

    say("\n== 7. Attention map")
    _step_attention(recipe, out, say)
    clock.lap("attention")
    timings["total"] = sum(timings.values())

    runs = out / "finetune"
    one_class = {
        row: one_class_seeds(runs, run_name(row), seeds[: len(values)])
        for row, values in scores.items()
    }
    result = DemoResult(
        recipe,
        minutes,
        pieces,
        pretrain_summary,
        predictions,
        neighbours,
        about,
        seeds,
        scores,
        timings,
        one_class,
        majority_share(task_data[2]),
    )
    _write_results(result, out, say)
    return result


def _write_results(result: DemoResult, out: Path, say) -> None:
    """OUT/results.json, then the report drawn from it; the table and where the report is."""
    results = result.to_json()
    write_json(out / RESULTS_FILE, results)
    write_report(out)
    for line in results_table(results):
        say(line)
    say(f"\nreport: {out / 'report.md'}")


class _Clock:
    """Seconds per step, into `timings`."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings, self.last = timings, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = now - self.last
        self.last = now


# --- the steps ----------------------------------------------------------------------------------


def train_demo_tokenizer(recipe: DemoRecipe, out: Path, show_progress: bool = False):
    """The demo's vocabulary of `recipe.vocab_size` pieces trained on its built-in corpus, saved
    to OUT/tokenizer; returns the tokenizer and the training report."""
    frequency = budget_recipe(60.0).ideograph_frequency(recipe.lang)
    config = TokenizerTrainingConfig(
        vocab_size=recipe.vocab_size, min_ideograph_frequency=frequency
    )
    tokenizer, report = train_tokenizer(
        [DATA_DIR / recipe.corpus], config, show_progress=show_progress
    )
    tokenizer.save_pretrained(out / TOKENIZER_DIR)
    return tokenizer, report


def _step_tokenizer(recipe: DemoRecipe, out: Path, show_progress: bool, say):
    tokenizer, report = train_demo_tokenizer(recipe, out, show_progress)
    for line in report.summary():
        say(f"  {line}")
    pieces = tokenizer.tokenize(recipe.example_sentence)
    say(f"  {recipe.example_sentence!r}\n  -> {' '.join(pieces)}")
    return tokenizer, pieces


def _step_pretrain(
    recipe: DemoRecipe, tokenizer: Tokenizer, minutes: float, out: Path, show_progress: bool, say
) -> dict[str, Any]:
    run_dir = out / PRETRAIN_DIR
    run = PretrainRun(
        corpus=(DATA_DIR / recipe.corpus,),
        out=run_dir,
        budget=minutes * 60,  # the budget recipe's choices for these minutes
        tokenizer=out / TOKENIZER_DIR,
        model_config=model_config(recipe, tokenizer, BertConfig.hidden_dropout_prob),
        lang=recipe.lang,
        corpus_cache=out / CORPUS_CACHE_DIR,
        max_seq_length=recipe.max_seq_length,
        log_every_steps=5,
        eval_every_steps=50,
        eval_examples=EVAL_EXAMPLES,
    )
    say(f"  {run.resolved.description}")
    result = run_pretraining(run, show_progress=show_progress, say=lambda line: None)
    records = read_metrics(run_dir / METRICS_FILE)
    first_eval = next((r for r in records if r["kind"] == "eval"), None)
    plan = json.loads((run_dir / PLAN_FILE).read_text(encoding="utf-8"))
    summary = {
        "recipe": result.recipe,  # as planned for this machine
        "device": plan["device"],  # "CPU", or the GPU's name
        "steps": result.progress.step,
        "tokens": result.progress.tokens,
        "seconds": result.progress.elapsed,
        "eval": result.last_eval or {},
        "first_eval": first_eval or {},
    }
    say(
        f"  {summary['steps']} steps, {summary['tokens']:,} tokens on the {summary['device']}; "
        f"held-out MLM accuracy "
        f"{summary['eval'].get('mlm_accuracy', float('nan')):.1%}, loss "
        f"{summary['eval'].get('mlm_loss', float('nan')):.2f}"
    )
    return summary


def _step_fill_mask(
    recipe: DemoRecipe, model_dir: Path, shipped_dir: Path, say
) -> list[dict[str, Any]]:
    """Each sentence's top answers: the demo's own model's, and the shipped model's beside."""
    models = [load_for_fill_mask(model_dir), load_for_fill_mask(shipped_dir)]
    shown = []
    for sentence in recipe.fill_mask_sentences:
        answers = []
        for model, tokenizer in models:
            prediction = fill_mask(model, tokenizer, sentence, top_k=TOP_K)[0]
            answers.append(list(zip(prediction.tokens, prediction.probabilities, strict=True)))
        say(f"  {sentence}")
        for label, pairs in zip(("this demo's", "shipped"), answers, strict=True):
            say(f"    {label:>11}: " + ", ".join(f"{t} ({p:.1%})" for t, p in pairs))
        shown.append({"sentence": sentence, "predictions": answers[0], "shipped": answers[1]})
    return shown


def _step_word_vectors(recipe: DemoRecipe, tokenizer: Tokenizer, out: Path, say):
    """Skip-gram vectors of the pieces, on the documents pre-training trained on (not its
    held-out ones), and the nearest pieces of a few words.

    Without gensim: no vectors (None) and {"skipped": why}, said in one line; the demo runs on
    without the word-vector row.
    """
    corpus = build_corpus(
        [DATA_DIR / recipe.corpus], tokenizer, out / CORPUS_CACHE_DIR, recipe.lang, False
    )  # built by pre-training: found in its cache
    num_train, _ = held_out_split(corpus.num_documents, EVAL_EXAMPLES)
    config = WordVectorConfig(vector_size=recipe.hidden_size)
    started = time.perf_counter()
    try:
        vectors = train_word_vectors(corpus, config, (0, num_train))
    except MissingPackageError as error:  # gensim is optional (bertlab.core.optional)
        say(f"  skipped, with the {WORD_VECTORS!r} row of step 5: {error}")
        return None, {"skipped": str(error)}
    seconds = time.perf_counter() - started
    say(f"  {len(vectors):,} pieces x {config.vector_size} in {seconds:.0f} s")
    vocab = tokenizer.get_vocab()
    neighbours = {}
    for word in recipe.neighbour_words:
        key = str(vocab.get(word, -1))
        if key not in vectors.key_to_index:
            continue
        similar = vectors.most_similar(key, topn=NEIGHBOURS)
        neighbours[word] = [
            (tokenizer.convert_ids_to_tokens(int(other)), round(float(score), 3))
            for other, score in similar
        ]
        say(f"  {word}: " + ", ".join(f"{t} ({s:.2f})" for t, s in neighbours[word]))
    summary = {
        "method": config.method,
        "vector_size": config.vector_size,
        "epochs": config.epochs,
        "pieces": len(vectors),
        "seconds": seconds,
        "neighbours": neighbours,
    }
    return vectors, summary


def _step_attention(recipe: DemoRecipe, out: Path, say) -> None:
    model_dir = out / PRETRAIN_DIR / FINAL_DIR
    model, tokenizer = load_encoder(model_dir)
    layer = recipe.num_hidden_layers
    pieces, attentions = attention_maps(model, tokenizer, recipe.example_sentence, layer)
    path = plot_attention(pieces, attentions, layer, recipe.example_sentence, out / "attention.png")
    say(f"  wrote {path} (layer {layer}, {attentions.shape[0]} heads)")
