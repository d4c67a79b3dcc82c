"""The model card of a pre-trained model (OUT/final/README.md): the corpus, the recipe and what
the run measured, written by `run_pretraining`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bertlab.core.model_card import ModelCard
from bertlab.core.runtime import PrecisionChoice
from bertlab.corpus.preflight import PreflightReport
from bertlab.corpus.prepare import held_out_split
from bertlab.training.pretraining.loop import PretrainResult
from bertlab.training.pretraining.run import ResolvedRun
from bertlab.training.pretraining.stats import PLATEAU_DOCS, unigram_plateau


def pretraining_card(
    run: ResolvedRun,
    corpus_meta: dict[str, Any],
    report: PreflightReport,
    model_config: Any,
    num_parameters: int,
    result: PretrainResult,
    world_size: int,
) -> ModelCard:
    """The model card of OUT/final: the corpus, the recipe and what this run measured."""
    loop, choices = run.loop, run.choices
    progress = result.progress
    shape = run.network.shape_words(model_config, num_parameters)
    start = "from scratch" if choices.init_from is None else f"continued from `{choices.init_from}`"
    files = ", ".join(
        f"`{Path(f['path']).name}` ({f['bytes']:,} bytes)" for f in corpus_meta.get("files", ())
    )
    langs = sorted(set(corpus_meta.get("langs", ())))
    _, held_out = held_out_split(report.num_documents, loop.eval_examples)
    tokenizer = choices.tokenizer or choices.init_from
    vocabulary = f"`{tokenizer}`" if tokenizer is not None else "trained on the corpus by bertlab"
    metrics: dict[str, Any] = {
        "steps": progress.step,
        "tokens trained on": progress.tokens,
        "training minutes": progress.elapsed / 60,
    }
    metrics |= {f"held-out {name}": value for name, value in (result.last_eval or {}).items()}
    note = "Measured by this run; held-out figures are on the held-out documents, at the run's "
    note += "own masking rate."
    plateau = unigram_plateau(result.last_eval or {}, progress.tokens, loop.plateau_min_tokens)
    if result.last_eval:
        metrics["still on the unigram plateau"] = plateau is not None
    if plateau is not None:
        note += (
            f" **Warning: this model is still on the unigram plateau** (held-out accuracy "
            f"{plateau[0]:.1%} vs {plateau[1]:.1%} for word frequencies alone, after "
            f"{progress.tokens:,} tokens): it has learned little beyond word frequencies and "
            f"tends to fine-tune to the majority class ({PLATEAU_DOCS})."
        )
    what = run.objective.card_summary(shape)
    uses = run.objective.uses
    return ModelCard(
        title=f"{Path(choices.out).name}: a {run.network.title} pre-trained with bertlab",
        summary=f"{what}, pre-trained {start} by `bertlab pretrain` on the corpus below.",
        pipeline_tag=uses.pipeline_tag,
        intended_use="A starting point for fine-tuning on a task (`bertlab finetune --model "
        f"DIR`), for feature extraction and for looking inside. What it can do: "
        f"{uses.commands}. It has seen only the corpus below, for the time below: judge it by "
        "the held-out numbers, and fine-tune and test it before relying on it.",
        data=[
            f"corpus: {files}",
            f"{report.num_documents:,} documents, {report.num_sentences:,} sentences, "
            f"{report.num_tokens:,} tokens (language: {', '.join(langs) or 'unknown'})",
            f"held out for evaluation: the last {held_out:,} documents",
            f"vocabulary: {model_config.vocab_size:,} pieces, {vocabulary}",
        ],
        recipe=_pretraining_recipe(run, model_config, world_size, result.precision),
        metrics=metrics,
        metrics_note=note,
        how_to_use=[
            "# DIR: this folder, or its Hub id once uploaded; transformers loads it as well",
            uses.example,
            "bertlab finetune --task sst2 --train train.tsv --dev-fraction 0.1 --model DIR "
            "--out runs/sst2",
        ],
        base_model=None if choices.init_from is None else str(choices.init_from),
        language=langs,
    )


def _pretraining_recipe(
    run: ResolvedRun,
    model_config: Any,
    world_size: int,
    precision: PrecisionChoice | None,
) -> dict:
    data, loop = run.data, run.loop
    recipe = {
        "architecture": run.network.name,
        "objective": run.objective.name,
        "sequence length": data.max_seq_length,
        "masking rate": data.mlm_probability,
        "whole-word masking": data.do_whole_word_mask,
        "packed sequences": data.pack_sequences,
        "global batch (sequences)": loop.batch_size * world_size,
        "peak learning rate": loop.learning_rate,
        "schedule": f"{loop.schedule}, warmup {loop.warmup_proportion:g} of the run",
        "weight decay": loop.weight_decay,
        "dropout while pre-training": run.network.dropout_words(model_config),
        "precision": loop.precision if precision is None else str(precision),
        "seed": loop.seed,
        "processes": world_size,
    }
    if run.final_dropout is not None:
        recipe["dropout written for fine-tuning"] = run.final_dropout
    recipe |= run.objective.recipe_rows(run.settings)
    if run.choices.budget is not None:
        minutes = run.choices.budget / 60
        recipe = {"budget recipe": f"{minutes:g} min: {run.description}"} | recipe
        if run.plan is not None:
            recipe["budget recipe planned"] = "; ".join(run.plan.lines())
    return recipe
