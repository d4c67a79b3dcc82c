"""`bertlab embed`: the hidden states of chosen layers for a file of texts (feature extraction)."""

from __future__ import annotations

import argparse

from bertlab.cli.common import CommandError


def layer_name(value: str) -> int | str:
    """A `--layers`/`--layer` value: a hidden state's number, or the scalar mix's name."""
    from bertlab.network.feature_head_config import SCALAR_MIX_LAYER

    if value == SCALAR_MIX_LAYER:
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"a layer is a number (0 the embeddings, -1 the last) or {SCALAR_MIX_LAYER!r}, "
            f"not {value!r}"
        ) from None


def add_embed_command(subparsers: argparse._SubParsersAction) -> None:
    from bertlab.network.feature_head_config import SCALAR_MIX_LAYER
    from bertlab.use.feature_options import FORMATS, PAIR_SEPARATOR, POOLINGS

    embed = subparsers.add_parser(
        "embed",
        help="write the hidden states of chosen layers for each text (feature extraction)",
        description="Run a model (a BERT, NNLM, ELMo's biLM, an AWD-LSTM) over texts (one per "
        "line of --input, or --text; a pair as "
        f"'A{PAIR_SEPARATOR}B', as Google's extract_features.py) and write the hidden states "
        "of --layers, one row per piece, per word or per text, to OUT/features.npy (or "
        ".safetensors: a float32 array of shape (rows, layers, hidden)), OUT/index.jsonl (per "
        "text: its rows start..end and their pieces or words) and OUT/features.json.",
    )
    add = embed.add_argument
    add("--model", required=True, help="model folder or Hugging Face Hub id")
    add("--input", help="a text file, one text (or 'A ||| B' pair) per line")
    add("--text", action="append", help="a text to embed (repeatable); instead of --input")
    add(
        "--layers",
        nargs="+",
        type=layer_name,
        default=None,
        help="hidden states to keep: 0 the embeddings, k layer k, -1 the last; for ELMo's "
        f"biLM also {SCALAR_MIX_LAYER}, its scalar mix (a fine-tuned ELMo's learned one, else the "
        "layers' average); layers of one run share a width (default: -1, the last; NNLM: 0, "
        f"its vectors; ELMo: {SCALAR_MIX_LAYER}. Google's extract_features.py: -1 -2 -3 -4)",
    )
    add(
        "--pooling",
        default="pieces",
        choices=POOLINGS,
        help="one row per piece ([CLS] and [SEP] included), per word (its first piece, or the "
        "mean of its pieces) or per text ([CLS], the mean of its pieces, the last piece: a "
        "left-to-right model's sentence vector, or the pooler's output: the last layer only); "
        "a left-to-right model refuses cls and pooler (default: %(default)s)",
    )
    add("--format", default="npy", choices=FORMATS, help="(default: %(default)s)")
    add("--batch-size", type=int, default=32, help="texts per forward pass (default: 32)")
    add("--max-seq-length", type=int, help="pieces per input at most (default: the model's)")
    add("--out", required=True, help="output directory")
    embed.set_defaults(handler=run_embed)


def run_embed(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bertlab.cli.common import warn
    from bertlab.core.hub import resolve
    from bertlab.core.outputs import check_outputs
    from bertlab.corpus.text_files import read_lines
    from bertlab.network.architectures import folder_architecture
    from bertlab.use.feature_options import PAIR_SEPARATOR
    from bertlab.use.features import extract_features, save_features
    from bertlab.use.inspection import load_encoder

    if (args.input is None) == (args.text is None):
        raise CommandError("give --input FILE or --text TEXT (not both)")
    if args.batch_size < 1:
        raise CommandError(f"--batch-size must be positive, got {args.batch_size}")
    check_outputs({"--model": args.model, "--input": args.input}, {"--out": args.out})
    if args.input is not None:
        path = Path(args.input)
        if not path.is_file():
            raise CommandError(f"--input {path} does not exist")
        # Every line or none: a line left out would be missing from the features unsaid.
        lines = list(read_lines([path], do_skip_not_utf8=False))
    else:
        lines = args.text
    texts = [
        tuple(line.split(PAIR_SEPARATOR, 1)) if PAIR_SEPARATOR in line else line for line in lines
    ]
    if not texts:
        raise CommandError("no text to embed")
    directory = resolve(args.model)
    model, tokenizer = load_encoder(directory)
    layers = args.layers or folder_architecture(directory).embed_layers
    features = extract_features(
        model, tokenizer, texts, layers, args.pooling, args.batch_size, args.max_seq_length
    )
    warn(tokenizer.mostly_unknown_warning(texts))
    path = save_features(features, args.out, args.format, {"model": str(args.model)})
    rows, num_layers, hidden = features.vectors.shape
    print(
        f"wrote {path}: {rows:,} rows ({args.pooling}) x {num_layers} layer(s) x {hidden} for "
        f"{len(texts):,} text(s), and {Path(args.out) / 'index.jsonl'}"
    )
    return 0
