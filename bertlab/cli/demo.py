"""`bertlab demo`: the main job on data shipped with bertlab, in a few minutes."""

from __future__ import annotations

import argparse

from bertlab.cli.common import CommandError, add_threads_flag


def add_demo_command(subparsers: argparse._SubParsersAction) -> None:
    from bertlab.apps.demo.config import DEFAULT_MINUTES, DEFAULT_OUT, DEFAULT_SEEDS, RECIPES

    parser = subparsers.add_parser(
        "demo",
        help="pre-training on your kind of text, in minutes: vocabulary, pre-training, "
        "fill-mask, word vectors, transfer against scratch beside a model pre-trained for an "
        "hour, attention",
        description="On data shipped with bertlab: train a WordPiece vocabulary on unlabeled "
        "reviews (movie reviews in English; hotel, laptop and book reviews with --lang zh), "
        "pre-train a small BERT on them for --minutes (the budget recipe: packed masked LM), "
        "fill in masked words with it and with the model that ships with bertlab (--model), "
        "train word2vec vectors of the same text, fine-tune three models of one shape on a few "
        "labelled sentiment sentences (the pre-trained BERT, a random encoder with the word "
        "vectors as embeddings, and one from scratch; several seeds each), then the shipped "
        "model and a random twin of its own shape the same way, and draw an attention map. "
        "Writes OUT/report.md with figures and OUT/results.json. docs/demo.md says what the "
        "default runs and measured.",
    )
    parser.add_argument("--out", default=str(DEFAULT_OUT), help=f"(default: {DEFAULT_OUT})")
    parser.add_argument(
        "--minutes",
        type=float,
        default=DEFAULT_MINUTES,
        help=f"pre-training budget in minutes (default: {DEFAULT_MINUTES:g})",
    )
    parser.add_argument("--lang", default="en", choices=list(RECIPES), help="en or zh")
    shipped = ", ".join(f"{recipe.shipped_model} for {lang}" for lang, recipe in RECIPES.items())
    parser.add_argument(
        "--model",
        help="the pre-trained model set beside the demo's own: a shipped name (bertlab:NAME), "
        f"a model folder or a Hugging Face Hub id (default: {shipped})",
    )
    parser.add_argument(
        "--seeds",
        default=",".join(map(str, DEFAULT_SEEDS)),
        help="fine-tuning seeds, comma-separated (default: %(default)s)",
    )
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    add_threads_flag(parser)
    parser.set_defaults(handler=run_demo_command)


def run_demo_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bertlab.apps.demo.runner import run_demo
    from bertlab.cli.logs import hide_run_progress

    try:
        seeds = tuple(int(seed) for seed in args.seeds.split(","))
    except ValueError as error:
        raise CommandError(f"--seeds must be integers separated by commas: {args.seeds}") from error
    if not seeds or len(set(seeds)) != len(seeds):
        raise CommandError(f"--seeds must be distinct integers: {args.seeds}")
    if not args.minutes > 0:
        raise CommandError(f"--minutes must be positive, got {args.minutes}")
    hide_run_progress(args.verbose)  # the demo says what each run gave
    progress = not args.no_progress
    run_demo(Path(args.out), args.minutes, args.lang, seeds, progress, model=args.model)
    return 0
