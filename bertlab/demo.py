"""`bertlab demo`: BERT's whole story in a few minutes on data shipped in `bertlab/demo_data/`.

(1) train a WordPiece vocabulary on a Wikipedia slice, (2) pre-train a small BERT with MLM + NSP
for a time budget, (3) fill in masked words with it, (4) fine-tune it on a few labels of a
sentiment task, and a same-size model from scratch with the same budget, several seeds each,
scored on a held-out split, (5) draw one sentence's attention. Everything lands in a report
folder: `report.md`, figures, and the models.

The recipe is tuned for a budget of minutes on a laptop CPU; `docs/demo.md` says why each
setting was chosen and what it measured.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.budget import FINETUNE_DROPOUT, restore_finetune_dropout
from bertlab.config import BertConfig, FinetuneConfig, PretrainConfig, PretrainDataConfig
from bertlab.data.corpus import build_corpus, preflight_report
from bertlab.inspection import (
    attention_maps,
    fill_mask,
    load_encoder,
    load_for_fill_mask,
    plot_attention,
)
from bertlab.modeling import BertForPreTraining, BertModel
from bertlab.tokenization import Tokenizer
from bertlab.tokenizer_training import TokenizerTrainingConfig, train_tokenizer
from bertlab.training.finetune import ModelSource, finetune_task, read_task_data
from bertlab.training.loop import pretrain
from bertlab.training.metrics_log import read_metrics
from bertlab.training.runtime import default_device, resolve_precision, set_seed
from bertlab.training.task_inference import make_task, run_task

logger = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parent / "demo_data"
DEFAULT_OUT = Path("runs") / "demo"
DEFAULT_MINUTES = 2.5
DEFAULT_SEEDS = (1, 2, 3)
DEV_FRACTION = 0.1  # of the labelled sentences, held out to pick the best epoch
TEST_FILE = "test.json"  # each fine-tuning run's metrics on the held-out test slice
RESULTS_FILE = "results.json"  # the demo's numbers, from which its table and figures are drawn


@dataclass(frozen=True)
class DemoRecipe:
    """What the demo runs on and with, for one language."""

    lang: str
    corpus: str
    task: str
    train_file: str
    test_file: str
    vocab_size: int
    example_sentence: str
    fill_mask_sentences: tuple[str, ...]
    finetune_max_seq_length: int
    # The architecture: BERT-Tiny's shape (Turc et al. 2019), 2 layers of 128. At a budget of
    # minutes, a small model that sees more tokens learns more than a larger one that sees few.
    num_hidden_layers: int = 2
    hidden_size: int = 128
    num_attention_heads: int = 2
    intermediate_size: int = 512
    max_seq_length: int = 128
    mlm_probability: float = 0.2  # Wettig et al. 2023: more than 15% helps short training
    pretrain_batch_size: int = 32
    pretrain_learning_rate: float = 1e-3  # small models and short runs take a high peak rate
    warmup_fraction: float = 0.1
    finetune_learning_rate: float = 1e-3  # measured: 2e-4 x 3 epochs stayed at the majority
    finetune_epochs: int = 4
    finetune_batch_size: int = 32


RECIPES = {
    "en": DemoRecipe(
        lang="en",
        corpus="enwiki_slice.txt.gz",
        task="sst2",
        train_file="sst2_train.tsv",
        test_file="sst2_test.tsv",
        vocab_size=8000,
        example_sentence="The unbelievably charming film was shot in Kathmandu.",
        fill_mask_sentences=(
            "The city is the [MASK] of the province.",
            "He was born in [MASK] and studied at the university.",
            "The album was [MASK] in 1998.",
        ),
        finetune_max_seq_length=64,
    ),
    "zh": DemoRecipe(
        lang="zh",
        corpus="zhwiki_slice.txt.gz",
        task="chnsenticorp",
        train_file="chnsenticorp_train.tsv",
        test_file="chnsenticorp_test.tsv",
        vocab_size=8000,
        example_sentence="这家酒店的服务非常周到，房间也很干净。",
        fill_mask_sentences=("北京是中国的[MASK]都。", "他出生于上[MASK]。", "这是一部[MASK]影。"),
        finetune_max_seq_length=128,
    ),
}


@dataclass
class DemoResult:
    recipe: DemoRecipe
    minutes: float
    tokenization: list[str]
    pretrain: dict[str, Any]
    fill_mask: list[dict[str, Any]]
    seeds: tuple[int, ...]
    scores: dict[str, list[float]]  # "pre-trained" / "from scratch" -> test accuracy per seed
    timings: dict[str, float]


def run_demo(
    out: Path = DEFAULT_OUT,
    minutes: float = DEFAULT_MINUTES,
    lang: str = "en",
    seeds: tuple[int, ...] = DEFAULT_SEEDS,
    show_progress: bool = True,
    say=print,
    recipe: DemoRecipe | None = None,
) -> DemoResult:
    """Run the five steps, printing each as it happens; write `out/report.md` and figures.

    `recipe` replaces the language's recipe (tests use a tiny one).
    """
    if lang not in RECIPES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(RECIPES)}")
    if not minutes > 0:
        raise ValueError(f"minutes must be positive, got {minutes}")
    recipe = recipe or RECIPES[lang]
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    started = time.perf_counter()

    say(f"\n== 1. WordPiece vocabulary of {recipe.vocab_size:,} pieces on {recipe.corpus}")
    tokenizer, pieces = _step_tokenizer(recipe, out, show_progress, say)
    timings["tokenizer"] = time.perf_counter() - started

    say(f"\n== 2. Pre-training a {recipe.num_hidden_layers}-layer BERT, MLM + NSP, {minutes:g} min")
    pretrain_summary = _step_pretrain(recipe, tokenizer, minutes, out, show_progress, say)
    timings["pre-training"] = time.perf_counter() - started - sum(timings.values())

    say("\n== 3. Fill-mask with the pre-trained model")
    predictions = _step_fill_mask(recipe, out / "pretrain" / "final", say)

    say(f"\n== 4. Fine-tuning on {recipe.task}: pre-trained vs from scratch, seeds {seeds}")
    scores = _step_finetune(recipe, out, seeds, show_progress, say)
    timings["fine-tuning"] = time.perf_counter() - started - sum(timings.values())

    say("\n== 5. Attention map")
    _step_attention(recipe, out, say)
    timings["total"] = time.perf_counter() - started

    result = DemoResult(
        recipe, minutes, pieces, pretrain_summary, predictions, seeds, scores, timings
    )
    from bertlab.demo_report import write_report

    write_report(result, out)
    for line in results_table(result):
        say(line)
    say(f"\nreport: {out / 'report.md'}")
    return result


# --- the steps ----------------------------------------------------------------------------------


def _step_tokenizer(recipe: DemoRecipe, out: Path, show_progress: bool, say):
    config = TokenizerTrainingConfig(vocab_size=recipe.vocab_size)
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
    data_config = PretrainDataConfig(
        max_seq_length=recipe.max_seq_length,
        mlm_probability=recipe.mlm_probability,
        max_predictions_per_seq=round(recipe.max_seq_length * recipe.mlm_probability),
    )
    config = PretrainConfig(
        learning_rate=recipe.pretrain_learning_rate,
        warmup_fraction=recipe.warmup_fraction,
        schedule="one-cycle",
        batch_size=recipe.pretrain_batch_size,
        max_time=minutes * 60,
        log_every_steps=5,
        eval_every_steps=50,
        eval_examples=256,
    )
    corpus = build_corpus(
        [DATA_DIR / recipe.corpus], tokenizer, out / "corpus", recipe.lang, show_progress
    )
    report = preflight_report(corpus, tokenizer, data_config.objective, recipe.max_seq_length)
    say(f"  {report.summary()[0]}")
    set_seed(config.seed)
    model = BertForPreTraining(model_config(recipe, tokenizer, dropout=0.0))
    result = pretrain(
        model, tokenizer, corpus, data_config, config, run_dir, show_progress=show_progress
    )
    restore_finetune_dropout(result.final_dir)  # fine-tuning uses BERT's dropout again
    summary = {
        "steps": result.progress.step,
        "tokens": result.progress.tokens,
        "seconds": result.progress.elapsed,
        "eval": result.last_eval or {},
    }
    first_eval = next(
        (r for r in read_metrics(run_dir / "metrics.jsonl") if r["kind"] == "eval"), None
    )
    summary["first_eval"] = first_eval or {}
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
        prediction = fill_mask(model, tokenizer, sentence, top_k=5)[0]
        pairs = list(zip(prediction.tokens, prediction.probabilities, strict=True))
        say(f"  {sentence}\n    " + ", ".join(f"{t} ({p:.1%})" for t, p in pairs))
        shown.append({"sentence": sentence, "predictions": pairs})
    return shown


def _step_finetune(
    recipe: DemoRecipe, out: Path, seeds: tuple[int, ...], show_progress: bool, say
) -> dict[str, list[float]]:
    from bertlab.config import TaskDataConfig

    task = make_task(
        recipe.task, data=TaskDataConfig(max_seq_length=recipe.finetune_max_seq_length)
    )
    data = read_task_data(task, DATA_DIR / recipe.train_file, None, dev_fraction=DEV_FRACTION)
    test = task.read_gold(DATA_DIR / recipe.test_file, data.label_names)
    say(f"  {len(data.train)} training, {len(data.dev)} dev (best epoch), {len(test)} test")
    pretrained = out / "pretrain" / "final"
    tokenizer = Tokenizer.from_pretrained(pretrained)
    precision = resolve_precision("auto", default_device())
    scores: dict[str, list[float]] = {"pre-trained": [], "from scratch": []}
    for seed in seeds:
        for name in scores:
            source_dir = pretrained
            if name == "from scratch":
                source_dir = _random_encoder(recipe, tokenizer, seed, out / "scratch-init")
            config = FinetuneConfig(
                learning_rate=recipe.finetune_learning_rate,
                batch_size=recipe.finetune_batch_size,
                num_train_epochs=recipe.finetune_epochs,
                seed=seed,
            )
            run_dir = out / "finetune" / name.replace(" ", "-") / f"seed-{seed}"
            result = finetune_task(
                task, data, ModelSource(source_dir), config, run_dir, show_progress
            )
            model = task.load_head(result.best_dir, None).to(default_device())
            predictions = run_task(task, model, tokenizer, test, 128, precision)
            metrics = task.score(predictions, test)
            (run_dir / TEST_FILE).write_text(json.dumps(metrics, indent=2) + "\n")
            accuracy = metrics[task.primary_metric]
            scores[name].append(accuracy)
            say(f"  seed {seed}, {name:>12}: test {task.primary_metric} {accuracy:.1%}")
    return scores


def _random_encoder(recipe: DemoRecipe, tokenizer: Tokenizer, seed: int, directory: Path) -> Path:
    """A randomly initialized encoder of the pre-trained model's shape (seeded)."""
    set_seed(seed)
    BertModel(model_config(recipe, tokenizer, FINETUNE_DROPOUT)).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def _step_attention(recipe: DemoRecipe, out: Path, say) -> None:
    model_dir = out / "pretrain" / "final"
    model, tokenizer = load_encoder(model_dir)
    layer = recipe.num_hidden_layers
    pieces, attentions = attention_maps(model, tokenizer, recipe.example_sentence, layer)
    path = plot_attention(pieces, attentions, layer, recipe.example_sentence, out / "attention.png")
    say(f"  wrote {path} (layer {layer}, {attentions.shape[0]} heads)")


def results_table(result: DemoResult) -> list[str]:
    """The final table: test accuracy median and range over the seeds, per model."""
    lines = [
        "",
        f"| {result.recipe.task} test accuracy | median | min | max | seeds |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, values in result.scores.items():
        lines.append(
            f"| {name} | {statistics.median(values):.1%} | {min(values):.1%} | "
            f"{max(values):.1%} | {len(values)} |"
        )
    return lines


def recipe_dict(recipe: DemoRecipe) -> dict[str, Any]:
    return dataclasses.asdict(recipe)
