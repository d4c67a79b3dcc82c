"""`bertlab convert`: a Google BERT checkpoint folder (TensorFlow) into the Hugging Face layout."""

from __future__ import annotations

import argparse
from pathlib import Path

from bertlab.cli.common import CommandError


def add_convert_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "convert",
        help="convert Google's original BERT checkpoint (TensorFlow) into a model folder",
        description="Read a folder of google-research/bert's releases (bert_config.json, "
        "vocab.txt, bert_model.ckpt.*; e.g. uncased_L-12_H-768_A-12 or the small BERTs such as "
        "uncased_L-2_H-128_A-2) and write it once in the Hugging Face layout (config.json, "
        "model.safetensors, tokenizer files), which every --model reads without TensorFlow. "
        "Reading the checkpoint needs TensorFlow: pip install 'bertlab[tf]'.",
    )
    parser.add_argument("folder", help="the Google checkpoint folder")
    parser.add_argument("--out", required=True, help="the model folder to write")
    parser.add_argument(
        "--lowercase",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the tokenizer lowercases (uncased models) or not (default: from the vocabulary: "
        "uncased when it has no capitalized pieces)",
    )
    parser.set_defaults(handler=run_convert)


def run_convert(args: argparse.Namespace) -> int:
    from bertlab.network.tf_checkpoint import convert_google_folder

    out = Path(args.out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CommandError(f"--out {out} exists and is not an empty folder")
    try:
        convert_google_folder(args.folder, out, args.lowercase)
    except ImportError as error:
        raise CommandError(str(error)) from error
    print(f"wrote {out}; use it as --model {out}")
    return 0
