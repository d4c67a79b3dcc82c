"""The rows of the demo's fine-tuning table: which models it fine-tunes, with which seeds, and how.

The demo's model and its two random twins (word vectors, scratch), the shipped model and its twin
(`demo_rows`, `shipped_rows`), each row's seeds fine-tuned on the recipe's task
(`finetune_rows`), and what the report says of the shipped model (`describe_shipped`).
`bertlab.apps.demo.runner` runs the steps and calls these.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bertlab.apps.demo.config import (
    DATA_DIR,
    DEV_FRACTION,
    PRETRAIN_DIR,
    PRETRAINED,
    SCRATCH,
    SHIPPED,
    SHIPPED_SCRATCH,
    WORD_VECTORS,
    DemoRecipe,
)
from bertlab.apps.demo.report import run_name
from bertlab.apps.flows import finetune_and_test, random_twin, run_concurrently, seed_dir
from bertlab.core.config import BertConfig
from bertlab.core.finetune_config import FinetuneConfig, TaskDataConfig
from bertlab.core.run_folder import FINAL_DIR
from bertlab.core.shipped import shipped_model
from bertlab.task_families import Task, make_task
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.finetuning.finetune import TaskData, read_task_data
from bertlab.training.pretraining.budget import BudgetRecipe


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


def demo_task_data(recipe: DemoRecipe) -> tuple[Task, TaskData, list]:
    """The task, its training and dev examples, and the held-out test examples."""
    task = make_task(
        recipe.task, data=TaskDataConfig(max_seq_length=recipe.finetune_max_seq_length)
    )
    data = read_task_data(task, DATA_DIR / recipe.train_file, None, dev_fraction=DEV_FRACTION)
    return task, data, task.read_gold(DATA_DIR / recipe.test_file, data.label_names)


def majority_share(examples: list) -> float:
    """The share of the commonest gold label: the accuracy of a model that learned one class."""
    counts = Counter(example.label for example in examples)
    return max(counts.values()) / len(examples)


@dataclass(frozen=True)
class Row:
    """One row of the table: its seeds, and the folder each seed fine-tunes."""

    name: str
    seeds: tuple[int, ...]
    source: Callable[[int], Path]  # seed -> a model folder


def demo_rows(recipe: DemoRecipe, out: Path, vectors, seeds: tuple[int, ...]) -> list[Row]:
    """The demo's model and its two random twins. The twins start where pre-training started:
    the recipe's positions, BERT's dropout. Without `vectors` (step 4 skipped), no word-vector
    twin."""
    pretrained = out / PRETRAIN_DIR / FINAL_DIR
    tokenizer = Tokenizer.from_pretrained(pretrained)
    config = model_config(recipe, tokenizer, BertConfig.hidden_dropout_prob)

    def twin(name: str, twin_vectors) -> Callable[[int], Path]:
        return lambda seed: random_twin(
            config,
            tokenizer,
            seed,
            BudgetRecipe.position_init,
            out / "twins" / run_name(name) / f"seed-{seed}",
            twin_vectors,
        )

    rows = [
        Row(PRETRAINED, seeds, lambda seed: pretrained),
        Row(WORD_VECTORS, seeds, twin(WORD_VECTORS, vectors)),
        Row(SCRATCH, seeds, twin(SCRATCH, None)),
    ]
    return [row for row in rows if row.name != WORD_VECTORS or vectors is not None]


def shipped_rows(
    recipe: DemoRecipe, out: Path, shipped_dir: Path, same_start: bool, seeds: tuple[int, ...]
) -> list[Row]:
    """The shipped model with the first `recipe.shipped_seeds` seeds, and its random twin (its
    config and vocabulary, the start of the demo's twins) with the first `recipe.twin_seeds`
    unless it starts as the demo's model does or the recipe runs no twin."""
    rows = [Row(SHIPPED, seeds[: recipe.shipped_seeds], lambda seed: shipped_dir)]
    if same_start or not recipe.twin_seeds:  # the demo's scratch row is its twin; or none
        return rows
    config = BertConfig.from_json_file(shipped_dir / "config.json")
    tokenizer = Tokenizer.from_pretrained(shipped_dir)
    return rows + [
        Row(
            SHIPPED_SCRATCH,
            seeds[: min(recipe.twin_seeds, recipe.shipped_seeds)],
            lambda seed: random_twin(
                config,
                tokenizer,
                seed,
                BudgetRecipe.position_init,
                out / "twins" / run_name(SHIPPED_SCRATCH) / f"seed-{seed}",
            ),
        )
    ]


def finetune_rows(
    recipe: DemoRecipe,
    task_data: tuple[Task, TaskData, list],
    rows: list[Row],
    rate_and_batch: tuple[float, int],
    out: Path,
    jobs: int,
    say,
) -> dict[str, list[float]]:
    """Fine-tune every row's seeds with the recipe's settings at `rate_and_batch` (learning
    rate, batch size), `jobs` runs at once (`flows.run_concurrently`); each one's test
    accuracy, said seed by seed as the runs finish in order."""
    task, data, test = task_data
    learning_rate, batch_size = rate_and_batch
    scores: dict[str, list[float]] = {row.name: [] for row in rows}
    cells = [
        (seed, row)
        for seed in dict.fromkeys(seed for row in rows for seed in row.seeds)  # seed by seed
        for row in rows
        if seed in row.seeds
    ]
    calls = []
    for seed, row in cells:  # the starts (random twins) are written here, before any run
        config = FinetuneConfig(
            learning_rate=learning_rate,
            batch_size=batch_size,
            num_train_epochs=recipe.finetune_epochs,
            seed=seed,
        )
        run_dir = seed_dir(out / "finetune", run_name(row.name), seed)
        calls.append((task, data, test, row.source(seed), config, run_dir, False, True))
    results = run_concurrently(finetune_and_test, calls, jobs)
    for (seed, row), metrics in zip(cells, results, strict=True):
        accuracy = metrics[task.primary_metric]
        scores[row.name].append(accuracy)
        say(f"  seed {seed}, {row.name:>22}: test {task.primary_metric} {accuracy:.1%}")
    return scores


def describe_shipped(name: str, folder: Path, recipe: DemoRecipe, demo_dir: Path) -> dict[str, Any]:
    """What the report says of the shipped model: its name, shape and making, and whether it
    starts as the demo's model does (same architecture and vocabulary: then the demo's scratch
    row is its random twin)."""
    config = BertConfig.from_json_file(folder / "config.json")
    demo_config = BertConfig.from_json_file(demo_dir / "config.json")
    vocab = Tokenizer.from_pretrained(folder).get_vocab()
    same_start = architecture(config) == architecture(demo_config) and vocab == (
        Tokenizer.from_pretrained(demo_dir).get_vocab()
    )
    return {
        "name": name,
        "folder": str(folder),
        "shape": f"{config.num_hidden_layers} layers of {config.hidden_size}, "
        f"{config.num_attention_heads} heads, {config.vocab_size:,} pieces",
        "demo_shape": f"{demo_config.num_hidden_layers} layers of {demo_config.hidden_size}, "
        f"{demo_config.num_attention_heads} heads, {demo_config.vocab_size:,} pieces",
        "about": shipped_model(name).about
        if name == recipe.shipped_model
        else "given with --model",
        "same_start": same_start,
    }


def architecture(config: BertConfig) -> dict[str, Any]:
    """The architecture, without the dropout (the twins take BERT's for fine-tuning)."""
    values = config.to_dict()
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        values.pop(key, None)
    return values
