"""`bertlab demo`: pre-training on text of the task's own kind, in a few minutes, on shipped data.

The situation of most users: a pile of unlabeled text from their domain and a few labels. The demo
(1) trains a WordPiece vocabulary on unlabeled movie reviews (English; hotel, laptop and book
reviews in Chinese), (2) pre-trains a small BERT on them with the budget recipe for `--minutes`,
(3) fills in masked words with it, (4) trains word2vec vectors on the same reviews, the pre-2018
way to transfer, (5) fine-tunes three models of the same shape on a few labelled sentences of a
sentiment task, several seeds each: the pre-trained BERT, a random encoder whose embeddings start
from the word vectors, and a random encoder from scratch, (6) draws one sentence's attention,
and writes a report with the figures. `docs/demo.md` says what it measured.

Everything the report says comes from OUT/results.json, which this run writes.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.apps.demo_report import results_table, run_name, write_report
from bertlab.apps.flows import (
    ONE_CLASS,
    RESULTS_FILE,
    compare,
    finetune_and_test,
    holding,
    one_class_seeds,
    random_twin,
    seed_dir,
    sign_test,
)
from bertlab.atomic import write_json
from bertlab.config import BertConfig, FinetuneConfig, TaskDataConfig
from bertlab.data.corpus import build_corpus
from bertlab.inspection import (
    attention_maps,
    fill_mask,
    load_encoder,
    load_for_fill_mask,
    plot_attention,
)
from bertlab.task_families import make_task
from bertlab.tokenization import Tokenizer
from bertlab.tokenizer_training import TokenizerTrainingConfig, train_tokenizer
from bertlab.training.budget import BudgetRecipe, budget_recipe
from bertlab.training.finetune import read_task_data
from bertlab.training.loop import held_out_split
from bertlab.training.metrics_log import METRICS_FILE, read_metrics
from bertlab.training.pretrain_run import PretrainRun, run_pretraining
from bertlab.training.word_vectors import WordVectorConfig, train_word_vectors

logger = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parents[1] / "demo_data"
DEFAULT_OUT = Path("runs") / "demo"
DEFAULT_MINUTES = 3.0  # of pre-training: the whole demo stays within 8 minutes on 2 cores
DEFAULT_SEEDS = (1, 2, 3, 4, 5)
DEV_FRACTION = 0.1  # of the labelled sentences, held out to pick the best epoch
EVAL_EXAMPLES = 256  # held-out sequences of pre-training
NEIGHBOURS = 5  # word-vector neighbours shown per word
TOP_K = 5  # fill-mask candidates shown per sentence
PRETRAINED, WORD_VECTORS, SCRATCH = "pre-trained", "word vectors", "from scratch"
MODELS = (PRETRAINED, WORD_VECTORS, SCRATCH)  # the rows of the report, as it names them


@dataclass(frozen=True)
class DemoRecipe:
    """What the demo runs on and with, for one language.

    Pre-training follows the budget recipe for the demo's minutes (`bertlab.training.budget`:
    packed masked LM at its masking rate, sinusoidal positions, no dropout, one-cycle at its peak
    rate); the shape is BERT-Tiny's (Turc et al. 2019), the recipe's below half an hour.
    """

    lang: str
    corpus: str  # unlabeled in-domain text in demo_data/
    task: str
    train_file: str
    test_file: str
    example_sentence: str
    fill_mask_sentences: tuple[str, ...]
    neighbour_words: tuple[str, ...]
    finetune_max_seq_length: int
    vocab_size: int = BudgetRecipe.vocab_size
    num_hidden_layers: int = 2
    hidden_size: int = 128
    num_attention_heads: int = 2
    intermediate_size: int = 512
    max_seq_length: int = BudgetRecipe.max_seq_length
    finetune_learning_rate: float = 1e-3  # measured: 2e-4 x 3 epochs stayed at the majority
    finetune_epochs: int = 4
    finetune_batch_size: int = 32


RECIPES = {
    "en": DemoRecipe(
        lang="en",
        corpus="imdb_reviews_slice.txt.gz",
        task="sst2",
        train_file="sst2_train.tsv",
        test_file="sst2_test.tsv",
        example_sentence="The unbelievably charming film was shot in Kathmandu.",
        fill_mask_sentences=(
            "The movie was [MASK].",
            "I have never seen such a [MASK] film.",
            "The acting was [MASK] and the plot made no sense.",
            "This is one of the best [MASK] I have ever seen.",
            "The music was beautiful and the [MASK] was great.",
        ),
        neighbour_words=("great", "terrible", "boring", "actor", "funny"),
        finetune_max_seq_length=64,
    ),
    "zh": DemoRecipe(
        lang="zh",
        corpus="chnsenticorp_unlabeled.txt.gz",
        task="chnsenticorp",
        train_file="chnsenticorp_train.tsv",
        test_file="chnsenticorp_test.tsv",
        example_sentence="这家酒店的服务非常周到，房间也很干净。",
        fill_mask_sentences=(
            "这家酒店的服务很[MASK]。",
            "房间很干净，价格也很便[MASK]。",
            "这本书写得太[MASK]了。",
            "电脑的[MASK]量很好，运行速度也快。",
            "我再也不会住这家[MASK]店了。",
        ),
        neighbour_words=("好", "差", "脏", "书", "贵"),
        # Reviews of 75 characters (median), a quarter over 156: 96 keeps most of them whole
        # and the 15 fine-tuning runs within the demo's 8 minutes.
        finetune_max_seq_length=96,
    ),
}


@dataclass
class DemoResult:
    """What one demo measured (written to OUT/results.json; the report reads only that)."""

    recipe: DemoRecipe
    minutes: float
    tokenization: list[str]
    pretrain: dict[str, Any]
    fill_mask: list[dict[str, Any]]
    word_vectors: dict[str, Any]
    seeds: tuple[int, ...]
    scores: dict[str, list[float]]  # MODELS -> the test accuracy of each seed
    timings: dict[str, float]
    one_class: dict[str, list[dict[str, Any]]]  # MODELS -> `flows.one_class_seeds`

    def comparisons(self) -> dict[str, dict[str, Any]]:
        """Each model against scratch: the medians' gap, the larger spread, the paired seeds."""
        scratch = self.scores[SCRATCH]
        found = {}
        for name in (PRETRAINED, WORD_VECTORS):
            comparison = compare(scratch, self.scores[name])
            wins, losses, p_value = sign_test(scratch, self.scores[name])
            found[name] = {
                "margin": comparison.margin,
                "spread": comparison.spread,
                "beats_scratch": comparison.wins,
                "paired_wins": wins,
                "paired_losses": losses,
                "sign_test_p": p_value,
            }
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
            "scores": self.scores,
            ONE_CLASS: {self.recipe.task: self.one_class},  # as the experiments record it
            "comparisons": self.comparisons(),
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
) -> DemoResult:
    """Run the steps, printing each as it happens; write OUT/results.json, report.md, figures.

    `recipe` replaces the language's recipe (tests use a tiny one).

    Raises:
        ValueError: an unknown language, minutes that are not positive, no seeds; another
            process writes OUT.
    """
    if lang not in RECIPES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(RECIPES)}")
    if not minutes > 0:
        raise ValueError(f"minutes must be positive, got {minutes}")
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {list(seeds)}")
    recipe = recipe or RECIPES[lang]
    with holding(Path(out)) as out:  # one process at a time; another is refused with its pid
        return _demo(recipe, out, minutes, seeds, show_progress, say)


def _demo(
    recipe: DemoRecipe,
    out: Path,
    minutes: float,
    seeds: tuple[int, ...],
    show_progress: bool,
    say,
) -> DemoResult:
    """`run_demo` holding OUT."""
    timings: dict[str, float] = {}
    clock = _Clock(timings)

    say(f"\n== 1. A WordPiece vocabulary of {recipe.vocab_size:,} pieces on {recipe.corpus}")
    tokenizer, pieces = _step_tokenizer(recipe, out, show_progress, say)
    clock.lap("vocabulary")

    say(f"\n== 2. Pre-training a {recipe.num_hidden_layers}-layer BERT on it, {minutes:g} min")
    pretrain_summary = _step_pretrain(recipe, tokenizer, minutes, out, show_progress, say)
    clock.lap("pre-training")

    say("\n== 3. Fill-mask with the pre-trained model")
    predictions = _step_fill_mask(recipe, out / "pretrain" / "final", say)

    say("\n== 4. Word vectors (word2vec, skip-gram) of the same text")
    vectors, neighbours = _step_word_vectors(recipe, tokenizer, out, say)
    clock.lap("word vectors")

    say(f"\n== 5. Fine-tuning on {recipe.task}: three models of one shape, seeds {seeds}")
    scores = _step_finetune(recipe, out, vectors, seeds, show_progress, say)
    clock.lap("fine-tuning")

    say("\n== 6. Attention map")
    _step_attention(recipe, out, say)
    clock.lap("attention")
    timings["total"] = sum(timings.values())

    runs = out / "finetune"
    one_class = {name: one_class_seeds(runs, run_name(name), seeds) for name in MODELS}
    result = DemoResult(
        recipe,
        minutes,
        pieces,
        pretrain_summary,
        predictions,
        neighbours,
        seeds,
        scores,
        timings,
        one_class,
    )
    results = result.to_json()
    write_json(out / RESULTS_FILE, results)
    write_report(out)
    for line in results_table(results):
        say(line)
    say(f"\nreport: {out / 'report.md'}")
    return result


class _Clock:
    """Seconds per step, into `timings`."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings, self.last = timings, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.timings[name] = now - self.last
        self.last = now


# --- the steps ----------------------------------------------------------------------------------


def _step_tokenizer(recipe: DemoRecipe, out: Path, show_progress: bool, say):
    frequency = budget_recipe(60.0).ideograph_frequency(recipe.lang)
    config = TokenizerTrainingConfig(
        vocab_size=recipe.vocab_size, min_ideograph_frequency=frequency
    )
    tokenizer, report = train_tokenizer(
        [DATA_DIR / recipe.corpus], config, show_progress=show_progress
    )
    tokenizer.save_pretrained(out / "tokenizer")
    for line in report.summary():
        say(f"  {line}")
    pieces = tokenizer.tokenize(recipe.example_sentence)
    say(f"  {recipe.example_sentence!r}\n  -> {' '.join(pieces)}")
    return tokenizer, pieces


def model_config(recipe: DemoRecipe, tokenizer: Tokenizer, dropout: float) -> BertConfig:
    return BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=recipe.hidden_size,
        num_hidden_layers=recipe.num_hidden_layers,
        num_attention_heads=recipe.num_attention_heads,
        intermediate_size=recipe.intermediate_size,
        max_position_embeddings=max(recipe.max_seq_length, recipe.finetune_max_seq_length),
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
        pad_token_id=tokenizer.pad_token_id,
    )


def _step_pretrain(
    recipe: DemoRecipe, tokenizer: Tokenizer, minutes: float, out: Path, show_progress: bool, say
) -> dict[str, Any]:
    run_dir = out / "pretrain"
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run = PretrainRun(
        corpus=(DATA_DIR / recipe.corpus,),
        out=run_dir,
        budget=minutes * 60,  # the budget recipe's choices for these minutes
        tokenizer=out / "tokenizer",
        model_config=model_config(recipe, tokenizer, BertConfig.hidden_dropout_prob),
        lang=recipe.lang,
        corpus_cache=out / "corpus",
        max_seq_length=recipe.max_seq_length,
        log_every_steps=5,
        eval_every_steps=50,
        eval_examples=EVAL_EXAMPLES,
    )
    say(f"  {run.describe()}")
    result = run_pretraining(run, show_progress=show_progress, say=lambda line: None)
    records = read_metrics(run_dir / METRICS_FILE)
    first_eval = next((r for r in records if r["kind"] == "eval"), None)
    summary = {
        "recipe": run.describe(),
        "steps": result.progress.step,
        "tokens": result.progress.tokens,
        "seconds": result.progress.elapsed,
        "eval": result.last_eval or {},
        "first_eval": first_eval or {},
    }
    say(
        f"  {summary['steps']} steps, {summary['tokens']:,} tokens; held-out MLM accuracy "
        f"{summary['eval'].get('mlm_accuracy', float('nan')):.1%}, loss "
        f"{summary['eval'].get('mlm_loss', float('nan')):.2f}"
    )
    return summary


def _step_fill_mask(recipe: DemoRecipe, model_dir: Path, say) -> list[dict[str, Any]]:
    model, tokenizer = load_for_fill_mask(model_dir)
    shown = []
    for sentence in recipe.fill_mask_sentences:
        prediction = fill_mask(model, tokenizer, sentence, top_k=TOP_K)[0]
        pairs = list(zip(prediction.tokens, prediction.probabilities, strict=True))
        say(f"  {sentence}\n    " + ", ".join(f"{t} ({p:.1%})" for t, p in pairs))
        shown.append({"sentence": sentence, "predictions": pairs})
    return shown


def _step_word_vectors(recipe: DemoRecipe, tokenizer: Tokenizer, out: Path, say):
    """Skip-gram vectors of the pieces, on the documents pre-training trained on (not its
    held-out ones), and the nearest pieces of a few words."""
    corpus = build_corpus(
        [DATA_DIR / recipe.corpus], tokenizer, out / "corpus", recipe.lang, False
    )  # built by pre-training: found in its cache
    num_train, _ = held_out_split(corpus.num_documents, EVAL_EXAMPLES)
    config = WordVectorConfig(vector_size=recipe.hidden_size)
    started = time.perf_counter()
    vectors = train_word_vectors(corpus, config, (0, num_train))
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


def _step_finetune(
    recipe: DemoRecipe,
    out: Path,
    vectors,
    seeds: tuple[int, ...],
    show_progress: bool,
    say,
) -> dict[str, list[float]]:
    task = make_task(
        recipe.task, data=TaskDataConfig(max_seq_length=recipe.finetune_max_seq_length)
    )
    data = read_task_data(task, DATA_DIR / recipe.train_file, None, dev_fraction=DEV_FRACTION)
    test = task.read_gold(DATA_DIR / recipe.test_file, data.label_names)
    say(f"  {len(data.train)} training, {len(data.dev)} dev (best epoch), {len(test)} test")
    pretrained = out / "pretrain" / "final"
    tokenizer = Tokenizer.from_pretrained(pretrained)
    if (out / "finetune").exists():
        shutil.rmtree(out / "finetune")  # an earlier demo's runs, of an earlier model
    # The twins start where pre-training started: the recipe's positions, BERT's dropout.
    twin_config = model_config(recipe, tokenizer, BertConfig.hidden_dropout_prob)
    position_init = BudgetRecipe.position_init
    scores: dict[str, list[float]] = {name: [] for name in MODELS}
    for seed in seeds:
        for name in MODELS:
            source_dir = pretrained
            if name != PRETRAINED:
                twin_vectors = vectors if name == WORD_VECTORS else None
                twin_dir = out / "twins" / run_name(name) / f"seed-{seed}"
                source_dir = random_twin(
                    twin_config, tokenizer, seed, position_init, twin_dir, twin_vectors
                )
            config = FinetuneConfig(
                learning_rate=recipe.finetune_learning_rate,
                batch_size=recipe.finetune_batch_size,
                num_train_epochs=recipe.finetune_epochs,
                seed=seed,
            )
            run_dir = seed_dir(out / "finetune", run_name(name), seed)
            metrics = finetune_and_test(
                task, data, test, source_dir, config, run_dir, show_progress, keep_model=True
            )
            accuracy = metrics[task.primary_metric]
            scores[name].append(accuracy)
            say(f"  seed {seed}, {name:>12}: test {task.primary_metric} {accuracy:.1%}")
    return scores


def _step_attention(recipe: DemoRecipe, out: Path, say) -> None:
    model_dir = out / "pretrain" / "final"
    model, tokenizer = load_encoder(model_dir)
    layer = recipe.num_hidden_layers
    pieces, attentions = attention_maps(model, tokenizer, recipe.example_sentence, layer)
    path = plot_attention(pieces, attentions, layer, recipe.example_sentence, out / "attention.png")
    say(f"  wrote {path} (layer {layer}, {attentions.shape[0]} heads)")
