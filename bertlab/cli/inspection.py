"""`bertlab fill-mask`, `bertlab nsp` and `bertlab attention`: look inside any BERT directory."""

from __future__ import annotations

import argparse

from bertlab.cli.common import CommandError

DEFAULT_TOP_K = 5
ATTENTION_VIEWS = ("heatmaps", "lines")


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

    nsp = subparsers.add_parser(
        "nsp",
        help="is B the next sentence? the next-sentence head's probability for pairs",
        description="Print the probability that each SECOND sentence follows FIRST, as the "
        "model's next-sentence head judges [CLS] FIRST [SEP] SECOND [SEP] (BERT's Task #2). "
        "Needs a model pre-trained with next-sentence prediction (`bertlab pretrain "
        "--objective mlm+nsp`, Google's BERT); one pre-trained without it is refused, its head "
        "being untrained.",
    )
    nsp.add_argument(
        "--model", required=True, help="model folder or Hugging Face Hub id (bert-base-uncased)"
    )
    nsp.add_argument("first", help="sentence A")
    nsp.add_argument("second", nargs="+", help="one or more candidates for sentence B")
    nsp.set_defaults(handler=run_nsp)

    attention = subparsers.add_parser(
        "attention",
        help="draw the attention maps of a sentence or a pair: one layer, every layer, or lines",
        description="Draw the attention over [CLS] TEXT [SEP] (with --pair, [CLS] TEXT [SEP] "
        "PAIR [SEP]) as a PNG: every head of one layer as heatmaps (rows: the attending token, "
        "columns: the attended-to token), every layer at once (--layer all: a grid, a row per "
        "layer), or the line view (--view lines: each token joined to the tokens it attends "
        "to; --token WORD draws one token's lines only, the lectures' 'it' picture). Works "
        "with any BERT directory, pre-trained or fine-tuned.",
    )
    attention.add_argument(
        "--model", required=True, help="model folder or Hugging Face Hub id (bert-base-uncased)"
    )
    attention.add_argument("--text", required=True, help="the sentence to look at (sentence A)")
    attention.add_argument("--pair", help="sentence B: look at the pair, as NSP and tasks read it")
    attention.add_argument(
        "--layer", default="-1", help="1-based; -1 is the last; 'all': every layer (heatmaps)"
    )
    attention.add_argument(
        "--view",
        choices=ATTENTION_VIEWS,
        default=ATTENTION_VIEWS[0],
        help="heatmaps (default) or lines (one layer)",
    )
    attention.add_argument(
        "--token", help="with --view lines: only this token's lines (its first occurrence)"
    )
    attention.add_argument("--out", required=True, help="PNG file to write")
    attention.set_defaults(handler=run_attention)


def run_fill_mask(args: argparse.Namespace) -> int:
    from bertlab.cli.common import warn
    from bertlab.core.hub import resolve
    from bertlab.use.inspection import fill_mask, load_for_fill_mask

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


def run_nsp(args: argparse.Namespace) -> int:
    from bertlab.cli.common import warn
    from bertlab.core.hub import resolve
    from bertlab.use.inspection import load_for_next_sentence, next_sentence_probabilities

    model, tokenizer = load_for_next_sentence(resolve(args.model))
    probabilities = next_sentence_probabilities(model, tokenizer, args.first, args.second)
    warn(tokenizer.mostly_unknown_warning([args.first, *args.second]))
    print(f"A: {args.first}")
    for second, probability in zip(args.second, probabilities, strict=True):
        print(f"  {probability:7.2%} that B follows A  B: {second}")
    return 0


def run_attention(args: argparse.Namespace) -> int:
    from bertlab.cli.common import warn
    from bertlab.core.hub import resolve
    from bertlab.core.outputs import check_outputs
    from bertlab.use.inspection import (
        all_attention_maps,
        attention_maps,
        load_for_attention,
        plot_attention,
        plot_attention_layers,
        plot_attention_lines,
    )

    if not args.out.lower().endswith(".png"):
        raise CommandError(f"--out must name a .png file, got {args.out}")
    check_outputs({"--model": args.model}, {"--out": args.out})
    every_layer = args.layer == "all"
    layer = 0 if every_layer else _layer_number(args.layer)
    if every_layer and args.view == "lines":
        raise CommandError("--view lines draws one layer: give --layer N, not all")
    if args.token is not None and args.view != "lines":
        raise CommandError("--token picks a token's lines: it needs --view lines")
    model, tokenizer = load_for_attention(resolve(args.model))
    texts = [args.text] if args.pair is None else [args.text, args.pair]
    if every_layer:
        pieces, attentions = all_attention_maps(model, tokenizer, args.text, args.pair)
        warn(tokenizer.mostly_unknown_warning(texts))
        path = plot_attention_layers(pieces, attentions, args.text, args.out)
        layers, heads = attentions.shape[:2]
        print(f"wrote {path} ({layers} layers, {heads} heads, {len(pieces)} tokens)")
        return 0
    pieces, attentions = attention_maps(model, tokenizer, args.text, layer, args.pair)
    warn(tokenizer.mostly_unknown_warning(texts))
    layer = layer if layer > 0 else model.config.num_hidden_layers + 1 + layer
    if args.view == "lines":
        focus = None if args.token is None else _token_position(pieces, args.token, tokenizer)
        path = plot_attention_lines(pieces, attentions, layer, args.text, args.out, focus)
    else:
        path = plot_attention(pieces, attentions, layer, args.text, args.out)
    print(f"wrote {path} (layer {layer}, {attentions.shape[0]} heads, {len(pieces)} tokens)")
    return 0


def _layer_number(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise CommandError(f"--layer must be a layer number or 'all', got {value!r}") from None


def _token_position(pieces: list[str], token: str, tokenizer) -> int:
    """The index of `token`'s first piece among `pieces` (the token as the tokenizer splits it)."""
    wanted = tokenizer.tokenize(token)
    for start in range(len(pieces) - len(wanted) + 1):
        if wanted and pieces[start : start + len(wanted)] == wanted:
            return start
    raise CommandError(f"--token {token!r} is not in the text (its pieces: {' '.join(pieces)})")
