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
import logging
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.apps.demo_report import results_table, write_report
from bertlab.apps.flows import RESULTS_FILE, finetune_and_test, random_twin, seed_dir
from bertlab.atomic import write_json
from bertlab.config import BertConfig, FinetuneConfig, TaskDataConfig
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
from bertlab.training.budget import FINETUNE_DROPOUT
from bertlab.training.finetune import read_task_data
from bertlab.training.metrics_log import METRICS_FILE, read_metrics
from bertlab.training.pretrain_run import PretrainRun, run_pretraining

logger = logging.getLogger(__name__)

DATA_DIR = Path(__file__).resolve().parents[1] / "demo_data"
DEFAULT_OUT = Path("runs") / "demo"
DEFAULT_MINUTES = 2.5
DEFAULT_SEEDS = (1, 2, 3)
DEV_FRACTION = 0.1  # of the labelled sentences, held out to pick the best epoch
MODELS = ("pre-trained", "from scratch")  # the two models compared, as the report names them


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

    def to_json(self) -> dict[str, Any]:
        """What results.json holds; the report is drawn from it alone."""
        return {
            "recipe": dataclasses.asdict(self.recipe),
            "minutes": self.minutes,
            "tokenization": self.tokenization,
            "seeds": list(self.seeds),
            "pretrain": self.pretrain,
            "fill_mask": self.fill_mask,
            "scores": self.scores,
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
    write_json(out / RESULTS_FILE, result.to_json())
    write_report(out)
    for line in results_table(result.to_json()):
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
    run = PretrainRun(
        corpus=(DATA_DIR / recipe.corpus,),
        out=run_dir,
        max_time=minutes * 60,
        tokenizer=out / "tokenizer",
        model_config=model_config(recipe, tokenizer, dropout=0.0),
        finetune_dropout=FINETUNE_DROPOUT,  # fine-tuning uses BERT's dropout again
        lang=recipe.lang,
        corpus_cache=out / "corpus",
        max_seq_length=recipe.max_seq_length,
        mlm_probability=recipe.mlm_probability,
        learning_rate=recipe.pretrain_learning_rate,
        warmup_fraction=recipe.warmup_fraction,
        schedule="one-cycle",
        batch_size=recipe.pretrain_batch_size,
        log_every_steps=5,
        eval_every_steps=50,
        eval_examples=256,
    )
    result = run_pretraining(run, show_progress=show_progress, say=lambda line: say(f"  {line}"))
    summary = {
        "steps": result.progress.step,
        "tokens": result.progress.tokens,
        "seconds": result.progress.elapsed,
        "eval": result.last_eval or {},
    }
    first_eval = next(
        (r for r in read_metrics(run_dir / METRICS_FILE) if r["kind"] == "eval"), None
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
    scores: dict[str, list[float]] = {name: [] for name in MODELS}
    for seed in seeds:
        for name in MODELS:
            source_dir = pretrained
            if name == "from scratch":
                config = model_config(recipe, tokenizer, FINETUNE_DROPOUT)
                twin_dir = out / "scratch-init" / f"seed-{seed}"
                source_dir = random_twin(config, tokenizer, seed, "normal", twin_dir)
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


def run_name(model: str) -> str:
    """The folder of a model's fine-tuning runs: "from scratch" -> "from-scratch"."""
    return model.replace(" ", "-")


def _step_attention(recipe: DemoRecipe, out: Path, say) -> None:
    model_dir = out / "pretrain" / "final"
    model, tokenizer = load_encoder(model_dir)
    layer = recipe.num_hidden_layers
    pieces, attentions = attention_maps(model, tokenizer, recipe.example_sentence, layer)
    path = plot_attention(pieces, attentions, layer, recipe.example_sentence, out / "attention.png")
    say(f"  wrote {path} (layer {layer}, {attentions.shape[0]} heads)")
