"""A pre-training run's corpus in one call, and the documents it holds out for evaluation.

`prepare_corpus` builds the tokenized corpus in the main process (`build.build_corpus`) while the
others wait (a corpus refused there stops them all, each told why), then opens it in each of
them; it says what the corpus holds (`preflight.preflight_report`), refuses an objective it
cannot train (`check_objective`) and warns when it has too few documents to hold any out. The
last documents are held out (`held_out_split`), the rest trained on
(`bertlab.data.stream.training_stream`).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from bertlab.core.config import PretrainDataConfig
from bertlab.core.runtime import SINGLE_PROCESS, DistributedContext, failing_together
from bertlab.corpus.build import build_corpus
from bertlab.corpus.format import TokenizedCorpus
from bertlab.corpus.preflight import PreflightReport, check_objective, preflight_report
from bertlab.corpus.sources import CorpusReading
from bertlab.tokenizer.wordpiece import Tokenizer

HELD_OUT_FRACTION = 0.02  # documents set aside for evaluation
MAX_HELD_OUT_DOCUMENTS = 200
MIN_TRAIN_DOCUMENTS = 4  # fewer: no held-out split, no evaluation


def held_out_split(num_documents: int, eval_examples: int) -> tuple[int, int]:
    """(training documents, held-out documents): the last documents are held out."""
    if eval_examples == 0 or num_documents < MIN_TRAIN_DOCUMENTS + 2:
        return num_documents, 0
    held_out = min(MAX_HELD_OUT_DOCUMENTS, max(2, round(num_documents * HELD_OUT_FRACTION)))
    return num_documents - held_out, held_out


def prepare_corpus(
    paths: Sequence[str | os.PathLike],
    tokenizer: Tokenizer,
    cache: Path,
    data: PretrainDataConfig,
    eval_examples: int,
    *,
    lang: str = "auto",
    reading: CorpusReading | None = None,
    context: DistributedContext = SINGLE_PROCESS,
    show_progress: bool = True,
    say: Callable[[str], None],
    warn: Callable[[str], None],
) -> tuple[TokenizedCorpus, PreflightReport]:
    """The run's tokenized corpus and its pre-flight report, in every process of the run.

    Args:
        paths: the corpus's files, folders or patterns (`sources.open_corpus`).
        tokenizer: the run's tokenizer.
        cache: the corpus directory (`build_corpus`'s `out_dir`).
        data: the run's data settings: its objective, sequence length and whole-word masking.
        eval_examples: held-out sequences the run evaluates on; 0: none asked for.
        lang: sentence splitting, one of `sources.LANGS`.
        reading: how the files are read; None: each by its suffix.
        context: this process's place in a torchrun job: the main process builds.
        show_progress: a progress bar while the main process tokenizes.
        say: a line of the report (the pre-flight report's lines).
        warn: a warning (none of the held-out documents evaluation asks for).

    Raises:
        ValueError: as `build_corpus` and `preflight_report`, and an objective the corpus cannot
            train (`check_objective`).
    """
    whole_word = data.do_whole_word_mask
    with failing_together(context):  # the others wait; a corpus refused stops them all
        if context.is_main:
            corpus = build_corpus(
                paths, tokenizer, cache, lang, show_progress, whole_word, reading=reading
            )
    with failing_together(context):  # a process that cannot open it stops them all too
        if not context.is_main:
            corpus = build_corpus(paths, tokenizer, cache, lang, False, whole_word, reading=reading)
    report = preflight_report(corpus, tokenizer, data.objective, data.max_seq_length)
    for line in report.summary():
        say(line)
    check_objective(report, data.objective)
    warning = _no_held_out_warning(corpus.num_documents, eval_examples)
    if warning is not None:
        warn(warning)
    return corpus, report


def _no_held_out_warning(num_documents: int, eval_examples: int) -> str | None:
    """Why a run that asks for evaluation gets none: too few documents to hold some out."""
    if not eval_examples or held_out_split(num_documents, eval_examples)[1]:
        return None
    needed = next(n for n in itertools.count(num_documents) if held_out_split(n, eval_examples)[1])
    return (
        f"the corpus has {num_documents} document{'s' if num_documents != 1 else ''}, fewer "
        f"than the {needed} needed to hold some out for evaluation: --eval-every evaluates "
        "nothing and the unigram plateau goes unchecked; give at least "
        f"{needed} documents (a blank line between two)"
    )
