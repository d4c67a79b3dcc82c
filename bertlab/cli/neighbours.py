"""`bertlab neighbours`: a word's nearest neighbours, static (word2vec, input embeddings) or in
context."""

from __future__ import annotations

import argparse

from bertlab.cli.common import (
    CORPUS_HELP,
    CommandError,
    add_corpus_reading_flags,
    corpus_reading,
)

DEFAULT_VECTOR_SIZE = 100  # word2vec's (Mikolov et al. 2013; gensim's default)


def add_neighbours_commands(subparsers: argparse._SubParsersAction) -> None:
    from bertlab.cli.embed import layer_name
    from bertlab.corpus.sources import LANGS
    from bertlab.network.feature_head_config import SCALAR_MIX_LAYER
    from bertlab.training.word2vec.options import METHODS, WORD_LANGS, WORD_MIN_COUNT
    from bertlab.use.neighbour_options import DEFAULT_LAYER, DEFAULT_TOP_K, MAX_OCCURRENCES

    parser = subparsers.add_parser(
        "neighbours",
        help="nearest neighbours of words: word2vec, a model's input embeddings, or in context",
        description="most_similar for words, from one static vector per word (word2vec "
        "trained on a corpus, or a model's input vectors: a BERT's embeddings, NNLM's C, "
        "AWD-LSTM's embedding, ELMo's token layer) or from a word's contextual vectors (its use "
        "in a sentence against its uses in a reference corpus, from any layer of a BERT, ELMo, "
        "AWD-LSTM or NNLM).",
    )
    sources = parser.add_subparsers(title="vectors", metavar="SOURCE", required=True)

    word2vec = sources.add_parser(
        "word2vec",
        help="skip-gram or CBOW vectors of the corpus's words (gensim), or saved ones",
        description="Train word2vec on the words of --corpus (English: BERT's basic tokenizer, "
        "lower-cased; Chinese: jieba's words) and print each WORD's nearest words by cosine "
        "similarity; or read vectors saved with --save-vectors.",
    )
    add = word2vec.add_argument
    add("words", nargs="*", help="the words to look up")
    add(
        "--analogy",
        nargs=3,
        action="append",
        metavar=("A", "B", "C"),
        help="'A is to B as C is to ?': the words nearest A - B + C (e.g. king man woman); "
        "repeatable",
    )
    add("--corpus", nargs="+", help=f"the corpus to train on: {CORPUS_HELP}")
    add_corpus_reading_flags(word2vec)
    add(
        "--vectors",
        help="a word-vector file instead of --corpus: saved by --save-vectors, or any in "
        "word2vec's binary or text format or GloVe's text format (.gz too)",
    )
    add("--lang", choices=WORD_LANGS, default="en", help="how words are split (default: en)")
    add("--method", choices=list(METHODS), default="skip-gram", help="(default: %(default)s)")
    add("--vector-size", type=int, default=DEFAULT_VECTOR_SIZE, help="(default: %(default)s)")
    add("--epochs", type=int, default=5, help="passes over the corpus (default: %(default)s)")
    add("--min-count", type=int, default=WORD_MIN_COUNT, help="(default: %(default)s)")
    add("--max-words", type=int, help="read at most this many words of the corpus")
    add("--save-vectors", help="write the trained vectors here (word2vec binary format)")
    add("--top-k", type=int, default=DEFAULT_TOP_K, help="(default: %(default)s)")
    word2vec.set_defaults(handler=run_word2vec)

    embeddings = sources.add_parser(
        "embeddings",
        help="rows of a model's input embedding matrix (NNLM: its vectors C)",
        description="The pieces whose static input vectors are nearest each WORD's (a word of "
        "several pieces: the mean of their rows), by cosine similarity: a BERT's input "
        "embeddings, NNLM's vectors C, AWD-LSTM's embedding (tied to its softmax), ELMo's token "
        "layer (its char CNN's output, where it reads characters).",
    )
    embeddings.add_argument("words", nargs="+", help="the words to look up")
    embeddings.add_argument("--model", required=True, help="model folder or Hub id")
    embeddings.add_argument("--top-k", type=int, default=DEFAULT_TOP_K, help="(default: 10)")
    embeddings.set_defaults(handler=run_embedding_neighbours)

    contextual = sources.add_parser(
        "contextual",
        help="a word's vector in given sentences against its uses in a reference corpus",
        description="For each --context sentence using WORD, the uses of WORD in the "
        "--reference corpus whose contextual vectors (a layer's hidden states over the word's "
        "pieces) are nearest: 'bank' by a river and 'bank' of a loan find different uses. "
        "--figure draws all uses in two dimensions.",
    )
    add = contextual.add_argument
    add("word", help="the word")
    add("--model", required=True, help="model folder or Hub id")
    add("--context", action="append", required=True, help="a sentence using WORD (repeatable)")
    add(
        "--reference",
        nargs="+",
        required=True,
        help=f"the corpus whose sentences using WORD are the candidates: {CORPUS_HELP}",
    )
    add_corpus_reading_flags(contextual)
    add(
        "--lang",
        choices=LANGS,
        default="auto",
        help="sentence splitting of the reference (default: by the word)",
    )
    add(
        "--layer",
        type=layer_name,
        default=DEFAULT_LAYER,
        help=f"0 the embeddings, -1 the last layer; {SCALAR_MIX_LAYER}: ELMo's scalar mix "
        "(default: %(default)s)",
    )
    add("--top-k", type=int, default=5, help="(default: %(default)s)")
    add("--max-occurrences", type=int, default=MAX_OCCURRENCES, help="(default: %(default)s)")
    add("--figure", help="a PNG of the uses in two dimensions (the polysemy figure)")
    contextual.set_defaults(handler=run_contextual)


def _check_top_k(top_k: int) -> None:
    if top_k < 1:
        raise CommandError(f"--top-k must be at least 1, got {top_k}")


def run_word2vec(args: argparse.Namespace) -> int:
    import tempfile
    import time
    from pathlib import Path

    from bertlab.core.outputs import check_outputs
    from bertlab.training.word2vec.vectors import (
        WordVectorConfig,
        analogy,
        load_vectors,
        nearest_words,
        save_vectors,
        train_word_level_vectors,
        write_word_corpus,
    )

    _check_top_k(args.top_k)
    if (args.corpus is None) == (args.vectors is None):
        raise CommandError("give --corpus FILES to train on or --vectors FILE (one of the two)")
    if not args.words and not args.analogy:
        raise CommandError("give WORDS to look up or --analogy A B C (or both)")
    reads = {"--corpus": args.corpus, "--vectors": args.vectors}
    check_outputs(reads, {"--save-vectors": args.save_vectors})
    if args.vectors is not None:
        vectors = load_vectors(args.vectors)
    else:
        config = WordVectorConfig(
            vector_size=args.vector_size,
            method=args.method,
            epochs=args.epochs,
            min_count=args.min_count,
        )
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as directory:
            words_file = Path(directory) / "words.txt"
            count = write_word_corpus(
                args.corpus, args.lang, words_file, args.max_words, corpus_reading(args)
            )
            vectors = train_word_level_vectors(words_file, config)
        print(
            f"{config.method} vectors of {len(vectors):,} words (seen at least {config.min_count} "
            f"times in {count:,} words) x {config.vector_size}, {config.epochs} epochs, in "
            f"{time.perf_counter() - started:.0f} s"
        )
        if args.save_vectors:
            save_vectors(vectors, args.save_vectors)
    for word in args.words:
        key = word.lower() if args.lang == "en" else word
        try:
            near = nearest_words(vectors, key, args.top_k)
        except ValueError as error:
            print(f"{word}: {error}")
            continue
        print(f"{word}: " + ", ".join(f"{other} {score:.2f}" for other, score in near))
    for words in args.analogy or ():
        a, b, c = (word.lower() if args.lang == "en" else word for word in words)
        shown = f"{words[0]} - {words[1]} + {words[2]}"
        try:
            near = analogy(vectors, a, b, c, args.top_k)
        except ValueError as error:
            print(f"{shown}: {error}")
            continue
        print(f"{shown}: " + ", ".join(f"{other} {score:.2f}" for other, score in near))
    return 0


def run_embedding_neighbours(args: argparse.Namespace) -> int:
    from bertlab.core.hub import resolve
    from bertlab.use.inspection import load_encoder
    from bertlab.use.neighbours import embedding_neighbours

    _check_top_k(args.top_k)
    model, tokenizer = load_encoder(resolve(args.model))
    for word in args.words:
        try:
            near = embedding_neighbours(model, tokenizer, word, args.top_k)
        except ValueError as error:
            print(f"{word}: {error}")
            continue
        pieces = " ".join(tokenizer.tokenize(word))
        print(f"{word} ({pieces}): " + ", ".join(f"{p} {s:.2f}" for p, s in near))
    return 0


def run_contextual(args: argparse.Namespace) -> int:
    import numpy as np

    from bertlab.cli.common import warn
    from bertlab.core.hub import resolve
    from bertlab.core.outputs import check_outputs
    from bertlab.corpus.sources import corpus_lines, open_corpus
    from bertlab.tokenizer.basic import is_cjk_ideograph
    from bertlab.use.inspection import load_encoder
    from bertlab.use.neighbours import (
        contextual_neighbours,
        plot_polysemy,
        reference_sentences,
        word_vectors_in,
    )

    _check_top_k(args.top_k)
    if args.figure is not None and not args.figure.lower().endswith(".png"):
        raise CommandError(f"--figure must name a .png file, got {args.figure}")
    reads = {"--model": args.model, "--reference": args.reference}
    check_outputs(reads, {"--figure": args.figure})
    lang = args.lang
    if lang == "auto":
        lang = "zh" if any(is_cjk_ideograph(c) for c in args.word) else "en"
    model, tokenizer = load_encoder(resolve(args.model))
    queries = []
    for sentence in args.context:
        found = word_vectors_in(model, tokenizer, [sentence], args.word, args.layer)
        if not found:
            raise CommandError(f"--context {sentence!r} does not use {args.word!r}")
        queries.append(found[0])
    warn(tokenizer.mostly_unknown_warning(args.context))
    lines = corpus_lines(open_corpus(args.reference, corpus_reading(args)))
    sentences = reference_sentences(lines, args.word, lang, args.max_occurrences)
    references = word_vectors_in(model, tokenizer, sentences, args.word, args.layer)
    print(f"{args.word!r}: {len(references):,} uses in the reference, layer {args.layer}")
    if len(queries) > 1:
        units = np.stack([q.vector / np.linalg.norm(q.vector) for q in queries])
        similarity = units @ units.T
        pairs = [
            f"{i + 1}-{j + 1} {similarity[i, j]:.2f}"
            for i in range(len(queries))
            for j in range(i + 1, len(queries))
        ]
        print(
            "cosine between its vectors in the given sentences: "
            + ", ".join(pairs)
            + " (one static vector per word: 1.00)"
        )
    for number, result in enumerate(contextual_neighbours(queries, references, args.top_k), 1):
        print(f"{number}. {result.query.sentence}")
        for score, occurrence in result.neighbours:
            print(f"   {score:.2f}  {_around(occurrence)}")
    if args.figure is not None:
        path = plot_polysemy(args.word, queries, references, args.figure, args.layer)
        print(f"wrote {path}")
    return 0


def _around(occurrence, width: int = 60) -> str:
    """The sentence around the word, at most about `width` characters on each side."""
    text = occurrence.sentence
    start = max(0, occurrence.start - width)
    end = min(len(text), occurrence.end + width)
    word = text[occurrence.start : occurrence.end]
    before, after = text[start : occurrence.start], text[occurrence.end : end]
    return f"{'…' if start else ''}{before}[{word}]{after}{'…' if end < len(text) else ''}"
