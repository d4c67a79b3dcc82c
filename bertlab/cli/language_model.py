"""`bertlab generate` and `bertlab score-text`: a pre-trained model as a language model."""

from __future__ import annotations

import argparse

from bertlab.cli.common import CommandError


def add_language_model_commands(subparsers: argparse._SubParsersAction) -> None:
    from bertlab.use.generation_options import DEFAULT_MAX_NEW_TOKENS, DEFAULT_TOP_K

    generate = subparsers.add_parser(
        "generate",
        help="continue a text with a left-to-right model (a BERT pre-trained with --objective "
        "clm, NNLM, AWD-LSTM, ELMo's forward LM)",
        description="Sample the next pieces one at a time from a left-to-right model's "
        "distribution (divided by --temperature, among the --top-k most probable) until the end "
        "of the sentence or --max-new-tokens. The same --seed gives the same text.",
    )
    add = generate.add_argument
    add(
        "--model",
        required=True,
        help="a left-to-right model folder: OUT/final of `bertlab pretrain --objective clm` or "
        "of `--architecture nnlm|elmo|awd-lstm` (ELMo: its forward LM)",
    )
    add("prompt", nargs="?", default="", help="the beginning of the text (default: none)")
    add("--max-new-tokens", type=int, default=DEFAULT_MAX_NEW_TOKENS, help="(default: %(default)s)")
    add("--temperature", type=float, default=1.0, help="(default: %(default)s)")
    add("--top-k", type=int, default=DEFAULT_TOP_K, help="0: the whole vocabulary (default: 50)")
    add("--samples", type=int, default=1, help="texts to sample, seeds SEED.. (default: 1)")
    add("--seed", type=int, default=0, help="(default: %(default)s)")
    generate.set_defaults(handler=run_generate)

    score = subparsers.add_parser(
        "score-text",
        help="how probable is each sentence: log-probability (causal) or pseudo-log-likelihood",
        description="Score each sentence under a pre-trained model and rank them, most probable "
        "first: a left-to-right model (a BERT pre-trained with --objective clm, NNLM, AWD-LSTM, "
        "ELMo's forward LM) gives the log-probability of its pieces and of its end; a masked "
        "model the pseudo-log-likelihood (Salazar et al. 2020: each piece masked in turn, the "
        "log-probability of the piece summed). Both in nats; higher is more probable.",
    )
    score.add_argument(
        "--model",
        required=True,
        help="a pre-trained model folder or Hub id (a BERT, or the OUT/final of `bertlab "
        "pretrain --architecture nnlm|elmo|awd-lstm`)",
    )
    score.add_argument("text", nargs="+", help="the sentences to score")
    score.add_argument("--pieces", action="store_true", help="also print every piece's score")
    score.set_defaults(handler=run_score_text)


def run_generate(args: argparse.Namespace) -> int:
    from bertlab.cli.common import warn
    from bertlab.core.hub import resolve
    from bertlab.use.inspection import load_with_lm_head
    from bertlab.use.language_model import generate

    if args.samples < 1:
        raise CommandError(f"--samples must be positive, got {args.samples}")
    model, tokenizer = load_with_lm_head(resolve(args.model))
    top_k = args.top_k or None
    for number in range(args.samples):
        text = generate(
            model,
            tokenizer,
            args.prompt,
            args.max_new_tokens,
            args.temperature,
            top_k,
            args.seed + number,
        )
        if number == 0:  # once the prompt is known to be usable
            warn(tokenizer.mostly_unknown_warning([args.prompt]))
        print(text)
    return 0


def run_score_text(args: argparse.Namespace) -> int:
    from bertlab.cli.common import warn
    from bertlab.core.hub import resolve
    from bertlab.use.inspection import load_with_lm_head
    from bertlab.use.language_model import score_texts

    model, tokenizer = load_with_lm_head(resolve(args.model))
    scores = score_texts(model, tokenizer, args.text)
    warn(tokenizer.mostly_unknown_warning(args.text))
    kind = scores[0].kind
    print(
        f"{kind} in nats ({'left-to-right' if model.config.is_causal else 'masked'} model), "
        "most probable first:"
    )
    # A text of [UNK]s only is scored as a run of one piece: not ranked among the others.
    ranked = sorted((s for s in scores if not s.is_all_unknown), key=lambda s: -s.total)
    unranked = [score for score in scores if score.is_all_unknown]
    for rank, score in enumerate(ranked, 1):
        _print_score(f"{rank}.", score, args.pieces)
    if unranked:
        print(
            "not ranked (every piece is [UNK] for this model's vocabulary: the score is that of "
            "a run of [UNK]s, whatever the text says):"
        )
        for score in unranked:
            _print_score("-", score, args.pieces)
    return 0


def _print_score(rank: str, score, is_showing_pieces: bool) -> None:
    """A sentence's line (and, if asked, one with its pieces' scores); `score`: SentenceScore."""
    print(
        f"{rank} {score.total:9.2f}  ({len(score.log_probs)} pieces, "
        f"perplexity {score.perplexity:,.1f})  {score.text}"
    )
    if is_showing_pieces:
        print(
            "     "
            + "  ".join(f"{p} {v:.2f}" for p, v in zip(score.pieces, score.log_probs, strict=True))
        )
