"""`bertlab fill-mask` and `bertlab attention`: look inside any BERT directory."""

from __future__ import annotations

import argparse

from bertlab.cli.common import CommandError

DEFAULT_TOP_K = 5


def add_inspection_commands(subparsers: argparse._SubParsersAction) -> None:
    fill = subparsers.add_parser(
        "fill-mask",
        help="predict the [MASK] tokens of a sentence with a pre-trained model",
        description="Print the top-k tokens and their probabilities at every [MASK] of TEXT. "
        "Needs a model with its masked-LM head (a pre-trained one, e.g. OUT/final of "
        "`bertlab pretrain`, or a Hugging Face BertForPreTraining/BertForMaskedLM directory).",
    )
    fill.add_argument(
        "--model",
        required=True,
        help="model folder (config, weights, vocab) or Hugging Face Hub id",
    )
    fill.add_argument("text", nargs="+", help='text with [MASK], e.g. "the [MASK] sat on the mat"')
    fill.add_argument("--top-k", type=int, default=DEFAULT_TOP_K, help="tokens shown per mask")
    fill.set_defaults(handler=run_fill_mask)

    attention = subparsers.add_parser(
        "attention",
        help="draw the attention maps of one layer for a sentence",
        description="Draw every head of one layer's attention over [CLS] TEXT [SEP] as a PNG "
        "(rows: the attending token, columns: the attended-to token). Works with any BERT "
        "directory, pre-trained or fine-tuned.",
    )
    attention.add_argument(
        "--model", required=True, help="model folder or Hugging Face Hub id (bert-base-uncased)"
    )
    attention.add_argument("--text", required=True, help="the sentence to look at")
    attention.add_argument("--layer", type=int, default=-1, help="1-based; -1 is the last")
    attention.add_argument("--out", required=True, help="PNG file to write")
    attention.set_defaults(handler=run_attention)


def run_fill_mask(args: argparse.Namespace) -> int:
    from bertlab.cli.common import warn
    from bertlab.hub import resolve
    from bertlab.inspection import fill_mask, load_for_fill_mask

    if args.top_k < 1:
        raise CommandError(f"--top-k must be at least 1, got {args.top_k}")
    model, tokenizer = load_for_fill_mask(resolve(args.model))
    results = [fill_mask(model, tokenizer, text, args.top_k) for text in args.text]
    warn(tokenizer.mostly_unknown_warning(args.text))
    for text, predictions in zip(args.text, results, strict=True):
        print(text)
        for number, prediction in enumerate(predictions, 1):
            print(f"  [MASK] {number}:")
            for token, probability in zip(prediction.tokens, prediction.probabilities, strict=True):
                print(f"    {token:<16} {probability:7.2%}")
    return 0


def run_attention(args: argparse.Namespace) -> int:
    from bertlab.cli.common import warn
    from bertlab.hub import resolve
    from bertlab.inspection import attention_maps, load_encoder, plot_attention

    if not args.out.lower().endswith(".png"):
        raise CommandError(f"--out must name a .png file, got {args.out}")
    model, tokenizer = load_encoder(resolve(args.model))
    pieces, attentions = attention_maps(model, tokenizer, args.text, args.layer)
    warn(tokenizer.mostly_unknown_warning([args.text]))
    layer = args.layer if args.layer > 0 else model.config.num_hidden_layers + 1 + args.layer
    path = plot_attention(pieces, attentions, layer, args.text, args.out)
    print(f"wrote {path} (layer {layer}, {attentions.shape[0]} heads, {len(pieces)} tokens)")
    return 0
