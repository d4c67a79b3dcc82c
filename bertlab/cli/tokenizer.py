"""`bertlab tokenizer train|encode`."""

from __future__ import annotations

import argparse

from bertlab.cli.common import (
    CORPUS_HELP,
    CommandError,
    add_corpus_reading_flags,
    corpus_reading,
)


def add_tokenizer_commands(subparsers: argparse._SubParsersAction) -> None:
    """`bertlab tokenizer train|encode`."""
    from bertlab.tokenizer.training import TokenizerTrainingConfig

    parser = subparsers.add_parser(
        "tokenizer",
        help="train a WordPiece vocabulary or look at how text is tokenized",
        description="Train a WordPiece vocabulary on a corpus, or encode text with a tokenizer.",
    )
    parser.set_defaults(handler=lambda args: parser.print_help() or 0)
    commands = parser.add_subparsers(title="tokenizer commands", metavar="COMMAND")

    train = commands.add_parser(
        "train",
        help="train a WordPiece vocabulary on a corpus (plain text, JSON Lines, CSV, TSV, "
        "Parquet, a saved dataset)",
        description="Train a WordPiece vocabulary with BERT's rules. The corpus is streamed "
        "(of JSON Lines, CSV, TSV, Parquet and saved datasets, the text column only); lines "
        "that are not valid UTF-8 are skipped and counted. Ends with a report measured on "
        "held-out lines of the corpus.",
    )
    train.add_argument("corpus", nargs="+", help=CORPUS_HELP)
    add_corpus_reading_flags(train)
    train.add_argument("--vocab-size", type=int, required=True, help="pieces in the vocabulary")
    train.add_argument(
        "--cased", action="store_true", help="keep case and accents (default: uncased)"
    )
    train.add_argument("--out", required=True, help="directory to write the tokenizer into")
    defaults = TokenizerTrainingConfig
    train.add_argument(
        "--min-frequency",
        type=int,
        default=defaults.min_frequency,
        help="how often a pair must occur to be merged",
    )
    train.add_argument(
        "--limit-alphabet",
        type=int,
        default=defaults.limit_alphabet,
        help="most frequent characters kept, CJK ideographs aside",
    )
    train.add_argument(
        "--min-ideograph-frequency",
        type=int,
        default=defaults.min_ideograph_frequency,
        help="CJK ideographs seen this often are always kept as whole pieces",
    )
    train.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    train.set_defaults(handler=run_tokenizer_train)

    encode = commands.add_parser(
        "encode",
        help="show the pieces, ids and segment ids the model will see",
        description="Encode a text (and optionally a second text) as [CLS] A [SEP] B [SEP].",
    )
    encode.add_argument(
        "--tokenizer", required=True, help="vocab.txt, tokenizer folder or Hugging Face Hub id"
    )
    encode.add_argument("text", help="sentence A (-: read it from standard input)")
    encode.add_argument("text_pair", nargs="?", default=None, help="sentence B")
    encode.add_argument("--max-length", type=int, default=None, help="truncate to this length")
    encode.set_defaults(handler=run_tokenizer_encode)


def run_tokenizer_train(args: argparse.Namespace) -> int:
    """Train, then write the directory only once everything succeeded."""
    from pathlib import Path

    from bertlab.core.atomic import run_lock
    from bertlab.core.outputs import check_outputs
    from bertlab.tokenizer.training import TokenizerTrainingConfig, train_tokenizer
    from bertlab.tokenizer.wordpiece import TOKENIZER_FILES

    config = TokenizerTrainingConfig(
        vocab_size=args.vocab_size,
        lowercase=not args.cased,
        min_frequency=args.min_frequency,
        limit_alphabet=args.limit_alphabet,
        min_ideograph_frequency=args.min_ideograph_frequency,
    )
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out {out} exists and is not a directory")
    check_outputs({"the corpus": args.corpus}, {"--out": [out / name for name in TOKENIZER_FILES]})
    with run_lock(out):  # one writer: two runs into one --out would mix their files
        tokenizer, report = train_tokenizer(
            args.corpus, config, not args.no_progress, corpus_reading(args)
        )
        tokenizer.save_pretrained(out)
    for line in report.summary():
        print(line)
    print(f"wrote {out}")
    return 0


def run_tokenizer_encode(args: argparse.Namespace) -> int:
    """Print one row per piece: position, piece, id, segment id and character span."""
    from bertlab.cli.streams import text_argument
    from bertlab.tokenizer.wordpiece import Tokenizer

    tokenizer = Tokenizer.from_pretrained(args.tokenizer)
    text = text_argument(args.text)
    encoding = tokenizer(text, args.text_pair, max_length=args.max_length, return_offsets=True)
    pieces = tokenizer.convert_ids_to_tokens(encoding["input_ids"])
    width = max(len(piece) for piece in pieces)
    print(f"{'pos':>4}  {'piece':<{width}}  {'id':>6}  seg  span")
    rows = zip(
        pieces,
        encoding["input_ids"],
        encoding["token_type_ids"],
        encoding["offset_mapping"],
        strict=True,
    )
    for position, (piece, index, segment, (start, end)) in enumerate(rows):
        print(f"{position:>4}  {piece:<{width}}  {index:>6}  {segment:>3}  {start}-{end}")
    print(f"input_ids: {encoding['input_ids']}")
    print(f"token_type_ids: {encoding['token_type_ids']}")
    return 0
