"""Train a WordPiece vocabulary with BERT's rules on a streamed corpus. No torch import.

The `tokenizers` WordPiece trainer does the learning; the corpus is read line by line, so it may
be larger than memory, in any format a corpus comes in (plain text, JSON Lines, CSV, TSV, Parquet,
a saved dataset, gzipped or not: `bertlab.corpus.sources`), each record's text only.
Training sees exactly the words `Tokenizer` will see (the same normalizer and pre-tokenizer),
and the vocabulary is then fixed up for BERT's rules:

- Every CJK ideograph seen at least `min_ideograph_frequency` times is kept as a whole piece. The
  trainer's alphabet limit would otherwise drop rare ideographs of a Chinese corpus, and BERT's
  basic tokenizer makes each ideograph a word of its own, so pieces such as `##中` or `中国` can
  never be produced: they are removed.
- If the pieces that must be kept (special tokens, alphabet, ideographs) exceed the size asked for,
  the vocabulary is larger than asked and the report says so.

Lines that are not valid UTF-8 are skipped and counted (the report gives the count): one bad line
in a large crawl should not stop a long run, and the count makes a wrongly-encoded corpus obvious.
A corpus without any usable line is an error.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import time
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tokenizers import Tokenizer as BackendTokenizer
from tokenizers.models import WordPiece
from tokenizers.trainers import WordPieceTrainer
from tqdm import tqdm

from bertlab.corpus.sources import CorpusReading, CorpusSource, open_corpus
from bertlab.corpus.text_files import check_mostly_utf8
from bertlab.tokenizer.basic import (
    CJK_RANGES,
    build_normalizer,
    build_pre_tokenizer,
    is_cjk_ideograph,
)
from bertlab.tokenizer.wordpiece import (
    CONTINUING_SUBWORD_PREFIX,
    SPECIAL_TOKENS,
    UNK_TOKEN,
    Tokenizer,
    TokenizerOptions,
)

logger = logging.getLogger(__name__)

# BERT's vocabularies have 21k-120k pieces; no corpus yields a million, and sizes near 2^32 make
# the Rust trainer abort the process.
MAX_VOCAB_SIZE = 1_000_000
LINES_PER_BATCH = 1000  # lines handed to the Rust trainer per call; amortizes Python overhead
BYTES_PER_MEGABYTE = 1 << 20

_IDEOGRAPH_PATTERN = re.compile(
    "[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in CJK_RANGES) + "]"
)


@dataclass(frozen=True)
class TokenizerTrainingConfig:
    """How to train a vocabulary. Defaults follow Google's uncased BERT (30,522 pieces)."""

    vocab_size: int = 30522
    lowercase: bool = True  # uncased: lowercase and strip accents; cased: neither
    handle_chinese_chars: bool = True
    min_frequency: int = 2  # a pair must occur this often to be merged
    limit_alphabet: int = 1000  # most frequent characters kept, not counting CJK ideographs
    min_ideograph_frequency: int = 1  # ideographs seen this often are always whole pieces
    heldout_every: int = 100  # every Nth non-blank line is held out for the report
    max_heldout_lines: int = 10_000

    def __post_init__(self) -> None:
        if self.vocab_size <= len(SPECIAL_TOKENS):
            raise ValueError(f"vocab_size {self.vocab_size} must exceed {len(SPECIAL_TOKENS)}")
        if self.vocab_size > MAX_VOCAB_SIZE:  # larger ones abort inside the `tokenizers` library
            raise ValueError(f"vocab_size {self.vocab_size:,} is over {MAX_VOCAB_SIZE:,}")
        for name in ("min_frequency", "limit_alphabet", "min_ideograph_frequency", "heldout_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")

    @property
    def options(self) -> TokenizerOptions:
        return TokenizerOptions(
            lowercase=self.lowercase,
            strip_accents=self.lowercase,
            handle_chinese_chars=self.handle_chinese_chars,
        )


@dataclass(frozen=True)
class TrainingReport:
    """What training produced, with `[UNK]` rate and pieces per word on held-out lines."""

    requested_vocab_size: int
    vocab_size: int
    num_ideographs: int
    num_dead_pieces_removed: int
    num_training_lines: int
    num_heldout_lines: int
    num_skipped_lines: int  # not valid UTF-8
    num_heldout_words: int
    unk_rate: float  # share of held-out words (pre-tokenized) that became [UNK]
    pieces_per_word: float
    seconds: float

    @property
    def is_size_exceeded(self) -> bool:
        return self.vocab_size > self.requested_vocab_size

    def summary(self) -> list[str]:
        """Human-readable lines for the command line."""
        lines = [
            f"vocabulary size: {self.vocab_size} (asked for {self.requested_vocab_size})",
            f"CJK ideographs kept as whole pieces: {self.num_ideographs}",
            f"training lines: {self.num_training_lines}, held-out lines: {self.num_heldout_lines}",
            f"held-out [UNK] rate: {self.unk_rate:.4%} of {self.num_heldout_words} words",
            f"held-out pieces per word: {self.pieces_per_word:.3f}",
            f"training time: {self.seconds:.1f} s",
        ]
        if self.is_size_exceeded:
            lines.insert(
                1,
                "note: the vocabulary exceeds the size asked for, to keep every "
                "ideograph and character that must stay",
            )
        if self.num_dead_pieces_removed:
            lines.append(
                f"removed {self.num_dead_pieces_removed} pieces BERT's rules never produce"
            )
        if self.num_skipped_lines:
            lines.append(f"skipped {self.num_skipped_lines} lines that are not valid UTF-8")
        return lines


@dataclass
class _CorpusReader:
    """Streams the non-blank UTF-8 lines of a corpus's text; holds out every Nth line."""

    sources: Sequence[CorpusSource]
    heldout_every: int
    max_heldout_lines: int
    show_progress: bool
    heldout: list[str] = field(default_factory=list)
    ideographs: collections.Counter = field(default_factory=collections.Counter)
    num_training_lines: int = 0
    num_skipped_lines: int = 0
    _num_lines: int = 0

    def batches(self) -> Iterator[list[str]]:
        total = sum(source.size() for source in self.sources)
        with tqdm(
            total=total / BYTES_PER_MEGABYTE,
            unit="MB",
            bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f} MB",
            desc="reading corpus",
            disable=not self.show_progress,
        ) as progress:
            batch: list[str] = []
            done_bytes = 0
            for source in self.sources:
                lines_before, skipped_before = self._num_lines, self.num_skipped_lines
                for chunk in source.chunks():
                    for line in self._lines(chunk.lines, source.path):
                        batch.append(line)
                        if len(batch) == LINES_PER_BATCH:
                            read = (done_bytes + chunk.position) / BYTES_PER_MEGABYTE
                            progress.update(read - progress.n)
                            yield batch
                            batch = []
                check_mostly_utf8(
                    source.path,
                    self._num_lines - lines_before,
                    self.num_skipped_lines - skipped_before,
                )
                done_bytes += source.size()
                progress.update(done_bytes / BYTES_PER_MEGABYTE - progress.n)
            if batch:
                yield batch

    def _lines(self, raw_lines: list[bytes], path: Path) -> Iterator[str]:
        for raw_line in raw_lines:
            try:
                line = raw_line.decode("utf-8").strip()
            except UnicodeDecodeError:
                self.num_skipped_lines += 1
                continue
            if not line:
                continue
            self._num_lines += 1
            is_heldout = (
                self._num_lines % self.heldout_every == 0
                and len(self.heldout) < self.max_heldout_lines
            )
            if is_heldout:
                self.heldout.append(line)
                continue
            self.num_training_lines += 1
            found = _IDEOGRAPH_PATTERN.findall(line)
            if found:
                # Ideographs are counted here and added as whole pieces afterwards; kept away
                # from the trainer so they do not crowd other characters out of its alphabet.
                self.ideographs.update(found)
                line = _IDEOGRAPH_PATTERN.sub(" ", line)
            yield line
        if self.num_skipped_lines:
            logger.debug("%s: %d lines skipped so far (not UTF-8)", path, self.num_skipped_lines)


def train_tokenizer(
    corpus_paths: Sequence[str | os.PathLike],
    config: TokenizerTrainingConfig,
    show_progress: bool = True,
    reading: CorpusReading | None = None,
) -> tuple[Tokenizer, TrainingReport]:
    """Train a WordPiece vocabulary on `corpus_paths` and measure it on held-out lines.

    Nothing is written: save the returned tokenizer with `save_pretrained`.

    Args:
        corpus_paths: files, folders or patterns (`bertlab.corpus.sources`).
        config: how to train.
        show_progress: a progress bar over the bytes read.
        reading: the format and the text's column; None: each file by its suffix, "text".

    Raises:
        FileNotFoundError: a corpus file does not exist.
        ValueError: a binary, broken gzip or mostly non-UTF-8 file, a file that does not fit its
            format (`bertlab.corpus.sources`), or no non-blank UTF-8 line to train on.
    """
    started = time.perf_counter()
    sources = open_corpus(corpus_paths, reading)  # refused here, before training starts
    options = config.options
    backend = BackendTokenizer(WordPiece(unk_token=UNK_TOKEN))
    backend.normalizer = build_normalizer(options.lowercase, options.is_stripping_accents)
    backend.pre_tokenizer = build_pre_tokenizer(options.handle_chinese_chars)
    trainer = WordPieceTrainer(
        vocab_size=config.vocab_size,
        min_frequency=config.min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        limit_alphabet=config.limit_alphabet,
        continuing_subword_prefix=CONTINUING_SUBWORD_PREFIX,
        show_progress=show_progress,
    )
    reader = _CorpusReader(sources, config.heldout_every, config.max_heldout_lines, show_progress)
    backend.train_from_iterator(reader.batches(), trainer)
    if reader.num_training_lines == 0:
        names = ", ".join(str(source.path) for source in sources)
        raise ValueError(
            f"corpus is empty: no non-blank UTF-8 line to train on in {names}"
            + (
                f" ({reader.num_skipped_lines} lines were not UTF-8)"
                if reader.num_skipped_lines
                else ""
            )
        )
    trained = sorted(backend.get_vocab().items(), key=lambda item: item[1])
    ideographs = (
        [
            unicodedata.normalize("NFC", char)
            for char, count in reader.ideographs.most_common()
            if count >= config.min_ideograph_frequency
        ]
        if options.handle_chinese_chars
        else []
    )
    pieces, num_dead = finalize_vocab(
        [token for token, _ in trained], ideographs, config.vocab_size
    )
    tokenizer = Tokenizer({token: index for index, token in enumerate(pieces)}, options)
    num_words, num_pieces, num_unk = measure_heldout(tokenizer, reader.heldout)
    report = TrainingReport(
        requested_vocab_size=config.vocab_size,
        vocab_size=len(pieces),
        num_ideographs=sum(1 for piece in pieces if len(piece) == 1 and is_cjk_ideograph(piece)),
        num_dead_pieces_removed=num_dead,
        num_training_lines=reader.num_training_lines,
        num_heldout_lines=len(reader.heldout),
        num_skipped_lines=reader.num_skipped_lines,
        num_heldout_words=num_words,
        unk_rate=num_unk / num_words if num_words else 0.0,
        pieces_per_word=num_pieces / num_words if num_words else 0.0,
        seconds=time.perf_counter() - started,
    )
    if report.is_size_exceeded:
        logger.warning(
            "vocabulary has %d pieces, more than the %d asked for: the alphabet and ideographs "
            "that must stay do not fit",
            report.vocab_size,
            config.vocab_size,
        )
    return tokenizer, report


def _is_dead_piece(piece: str) -> bool:
    # BERT's basic tokenizer makes each ideograph a word of its own, so a piece holding an
    # ideograph is reachable only as that single character at the start of a word.
    word = piece.removeprefix(CONTINUING_SUBWORD_PREFIX)
    has_ideograph = any(is_cjk_ideograph(char) for char in word)
    return has_ideograph and (piece != word or len(word) > 1)


def finalize_vocab(
    trained: Sequence[str], ideographs: Sequence[str], vocab_size: int
) -> tuple[list[str], int]:
    """Drop dead ideograph pieces, add missing ideographs, and trim the latest merges to fit.

    Example: `finalize_vocab(["[PAD]", ..., "中", "##中", "a", "ab"], ["国"], 9)` keeps `中`,
    drops `##中` and adds `国`, trimming `ab` if it does not fit.

    Args:
        trained: pieces in trainer order (special tokens, alphabet, then merges as learned).
        ideographs: ideographs that must be whole pieces.
        vocab_size: the size asked for.

    Returns:
        The final pieces (ids are positions) and how many dead pieces were removed.
    """
    alive = [piece for piece in trained if not _is_dead_piece(piece)]
    num_dead = len(trained) - len(alive)
    present = set(alive)
    missing = [char for char in dict.fromkeys(ideographs) if char not in present]
    excess = len(alive) + len(missing) - vocab_size
    if excess > 0:
        # The trainer lists merges in the order learned: drop the last (least frequent) ones.
        keep = [True] * len(alive)
        for index in range(len(alive) - 1, -1, -1):
            if excess == 0:
                break
            piece = alive[index]
            is_merge = len(piece.removeprefix(CONTINUING_SUBWORD_PREFIX)) > 1
            if is_merge and piece not in SPECIAL_TOKENS:
                keep[index] = False
                excess -= 1
        alive = [piece for piece, is_kept in zip(alive, keep, strict=True) if is_kept]
    return alive + missing, num_dead


def measure_heldout(tokenizer: Tokenizer, lines: Sequence[str]) -> tuple[int, int, int]:
    """Count words, pieces and [UNK] pieces of `lines` (each [UNK] stands for one word)."""
    num_words = num_pieces = num_unk = 0
    unk_id = tokenizer.unk_token_id
    for encoding in tokenizer.backend.encode_batch(list(lines), add_special_tokens=False):
        num_words += len({word for word in encoding.word_ids if word is not None})
        num_pieces += len(encoding.ids)
        num_unk += encoding.ids.count(unk_id)
    return num_words, num_pieces, num_unk
