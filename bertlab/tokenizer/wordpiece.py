"""WordPiece tokenization with BERT's rules, on the `tokenizers` library. No torch import.

Google's reference (google-research/bert `tokenization.py`, kept in `transformers` as
`BertTokenizerLegacy`) tokenizes in two stages:

1. Basic tokenization (`bertlab.tokenizer.basic`): clean, normalize, split on whitespace and
   isolate punctuation (and CJK ideographs), with character classes from Python's `unicodedata`
   so that it agrees with the reference.
2. WordPiece (here): greedy longest-match-first over the vocabulary, word-internal pieces prefixed
   `##`; a word longer than 100 characters, or one that cannot be covered, becomes `[UNK]`.

`Tokenizer` wraps the `tokenizers` pipeline with BERT's special tokens, pairs, truncation and
padding, and reads and writes the Hugging Face files. The golden tests compare it with the
reference.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenizers import AddedToken, decoders, processors
from tokenizers import Tokenizer as BackendTokenizer
from tokenizers.models import WordPiece

from bertlab.core import hub
from bertlab.core.atomic import atomic_files
from bertlab.tokenizer.basic import build_normalizer, build_pre_tokenizer, character_classes
from bertlab.tokenizer.fast import ChunkCache, encode_parallel

VOCAB_FILE = "vocab.txt"
TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
TOKENIZER_FILES = (VOCAB_FILE, TOKENIZER_FILE, CONFIG_FILE)  # what `save_pretrained` writes

PAD_TOKEN = "[PAD]"
UNK_TOKEN = "[UNK]"
CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"
# Order in which a freshly trained vocabulary lists them (ids 0..4).
SPECIAL_TOKENS = (PAD_TOKEN, UNK_TOKEN, CLS_TOKEN, SEP_TOKEN, MASK_TOKEN)

CONTINUING_SUBWORD_PREFIX = "##"  # google-research/bert WordpieceTokenizer
MAX_INPUT_CHARS_PER_WORD = 100  # google-research/bert WordpieceTokenizer: longer words -> [UNK]
MODEL_MAX_LENGTH = 512  # BERT paper, Appendix A.2: sequences of at most 512 tokens
NUM_SPECIAL_TOKENS_SINGLE = 2  # [CLS] A [SEP]
NUM_SPECIAL_TOKENS_PAIR = 3  # [CLS] A [SEP] B [SEP]
PAIR_SEGMENT_ID = 1  # token_type_ids of sentence B (BERT paper Sec. 3, segment embeddings)
# An input is "mostly [UNK]" from half of its pieces on (special tokens aside): the model then
# reads more unknown pieces than known ones, typically a text in a language the vocabulary does
# not cover (Chinese text for an English model is ~90% [UNK]). Warned about by the commands.
MOSTLY_UNKNOWN_SHARE = 0.5
# Lone surrogates: what Python makes of bytes that are not UTF-8 in argv, or in a stream read
# with errors="surrogateescape" (PEP 383); no tokenizer can encode them.
_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_QUOTED_CHARS = 60  # how much of a bad text an error message quotes


def check_fits_vocabulary(tokenizer: Tokenizer, vocab_size: int) -> None:
    """Every id `tokenizer` can give must have a row in a model of `vocab_size` pieces.

    Raises:
        ValueError: the tokenizer has more pieces than the model's vocabulary.
    """
    if tokenizer.vocab_size > vocab_size:
        raise ValueError(
            f"the tokenizer has {tokenizer.vocab_size:,} pieces but the model's vocabulary only "
            f"{vocab_size:,}: use the model's own tokenizer"
        )


def read_vocab_file(path: str | os.PathLike) -> dict[str, int]:
    """Read a `vocab.txt` (one piece per line, id = line number) as the reference does.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file is empty, not UTF-8, or repeats a piece (naming both lines).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"vocabulary file not found: {path}")
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.readlines()
    except UnicodeDecodeError as error:
        raise ValueError(f"vocabulary file {path} is not UTF-8: {error}") from error
    # Reference `load_vocab`: strip the newline only. The reference lets a repeated piece keep
    # its last line, which leaves an id past the vocabulary's size (and the embedding matrix).
    vocab: dict[str, int] = {}
    for index, line in enumerate(lines):
        piece = line.rstrip("\n")
        if piece in vocab and piece:
            raise ValueError(
                f"{path}:{index + 1}: the piece {piece!r} repeats line {vocab[piece] + 1}; "
                "every piece of a vocabulary must be on one line only"
            )
        vocab[piece] = index
    if not vocab or vocab.keys() == {""}:
        raise ValueError(f"vocabulary file {path} is empty")
    if len(vocab) != len(lines):  # blank lines: the reference maps "" to the last of them
        raise ValueError(f"{path}: {len(lines) - len(vocab) + 1} blank lines; a piece per line")
    return vocab


@dataclass(frozen=True)
class TokenizerOptions:
    """BERT's basic-tokenizer switches; defaults are Google's uncased BERT.

    `strip_accents=None` follows `lowercase`, as in the reference.
    """

    lowercase: bool = True
    strip_accents: bool | None = None
    handle_chinese_chars: bool = True
    model_max_length: int = MODEL_MAX_LENGTH

    @property
    def is_stripping_accents(self) -> bool:
        return self.lowercase if self.strip_accents is None else self.strip_accents

    def to_hf_config(self) -> dict:
        """`tokenizer_config.json` keys understood by `transformers.BertTokenizer(Fast)`."""
        return {
            "tokenizer_class": "BertTokenizer",
            "do_lower_case": self.lowercase,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self.handle_chinese_chars,
            "model_max_length": self.model_max_length,
            "unk_token": UNK_TOKEN,
            "sep_token": SEP_TOKEN,
            "pad_token": PAD_TOKEN,
            "cls_token": CLS_TOKEN,
            "mask_token": MASK_TOKEN,
            "clean_up_tokenization_spaces": True,
        }


Encoding = dict  # input_ids, token_type_ids, attention_mask[, offset_mapping]: lists (of lists)
ENCODING_KEYS = ("input_ids", "token_type_ids", "attention_mask")  # HF names
OFFSETS_KEY = "offset_mapping"


def check_utf8(texts: Sequence[str], what: str = "the text") -> None:
    """Refuse a text that holds bytes that are not UTF-8 (as lone surrogates, PEP 383).

    Example: check_utf8(["\\udce8abc"]) -> ValueError: the text '\\xe8abc' is not UTF-8 (at
    character 1); convert it first (e.g. iconv -t utf-8).

    Raises:
        ValueError: naming `what`, the text (on one line, bad bytes as `\\xNN`) and its first
            bad character.
    """
    for text in texts:
        found = _SURROGATE.search(text) if isinstance(text, str) else None
        if found is not None:
            shown = "".join(map(_shown, text[:MAX_QUOTED_CHARS]))
            shown += "…" if len(text) > MAX_QUOTED_CHARS else ""
            raise ValueError(
                f"{what} '{shown}' is not UTF-8 (at character {found.start() + 1}); convert it "
                "first (e.g. iconv -t utf-8)"
            )


def _shown(character: str) -> str:
    """`character` as an error message shows it: `\\xe8` for the byte that a surrogateescape'd
    character stands for, escaped when not printable (a line break, NUL), else itself."""
    code = ord(character)
    if 0xDC80 <= code <= 0xDCFF:
        return f"\\x{code - 0xDC00:02x}"
    return character if character.isprintable() else repr(character)[1:-1]


class Tokenizer:
    """BERT's WordPiece tokenizer: Google's rules exactly, encoded fast by `tokenizers`.

    Example:
        >>> tok = Tokenizer.from_pretrained("vocab.txt")
        >>> tok.tokenize("unaffable")
        ['un', '##aff', '##able']
        >>> tok("Hello", "world")["token_type_ids"]
        [0, 0, 0, 1, 1]
    """

    def __init__(self, vocab: Mapping[str, int], options: TokenizerOptions | None = None) -> None:
        """Args:
        vocab: piece -> id; must contain [PAD] [UNK] [CLS] [SEP] [MASK].
        options: casing and CJK switches; Google's uncased BERT when None.

        Raises:
            ValueError: the vocabulary lacks a special token.
        """
        missing = [token for token in SPECIAL_TOKENS if token not in vocab]
        if missing:
            raise ValueError(f"vocabulary lacks the special tokens {', '.join(missing)}")
        self.options = options or TokenizerOptions()
        self._vocab = dict(vocab)
        self._ids_to_tokens = {index: token for token, index in self._vocab.items()}
        self._backend = self._build_backend()
        classes = character_classes()
        self._chunk_cache = ChunkCache(
            self._backend, classes.split_differs, classes.whitespace_chars
        )

    def _build_backend(self) -> BackendTokenizer:
        options = self.options
        backend = BackendTokenizer(
            WordPiece(
                vocab=self._vocab,
                unk_token=UNK_TOKEN,
                max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
                continuing_subword_prefix=CONTINUING_SUBWORD_PREFIX,
            )
        )
        backend.normalizer = build_normalizer(options.lowercase, options.is_stripping_accents)
        backend.pre_tokenizer = build_pre_tokenizer(options.handle_chinese_chars)
        backend.post_processor = processors.TemplateProcessing(
            single=f"{CLS_TOKEN}:0 $A:0 {SEP_TOKEN}:0",
            pair=f"{CLS_TOKEN}:0 $A:0 {SEP_TOKEN}:0 "
            f"$B:{PAIR_SEGMENT_ID} {SEP_TOKEN}:{PAIR_SEGMENT_ID}",
            special_tokens=[(CLS_TOKEN, self.cls_token_id), (SEP_TOKEN, self.sep_token_id)],
        )
        backend.decoder = decoders.WordPiece(prefix=CONTINUING_SUBWORD_PREFIX)
        # The reference matches special tokens in the raw text, case-sensitively, before any
        # normalization, and never splits them.
        backend.add_special_tokens(
            [AddedToken(token, special=True, normalized=False) for token in SPECIAL_TOKENS]
        )
        return backend

    # --- loading and saving ---------------------------------------------------------------

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike,
        *,
        lowercase: bool | None = None,
        strip_accents: bool | None = None,
        handle_chinese_chars: bool | None = None,
        revision: str | None = None,
    ) -> Tokenizer:
        """Load a `vocab.txt`, a directory written by bertlab or `transformers`, or a Hugging
        Face Hub model's tokenizer by id (`bert-base-uncased`; its tokenizer files only).

        A directory needs `vocab.txt` or `tokenizer.json`; switches come from its
        `tokenizer_config.json` (or the `tokenizer.json` normalizer) unless given here.
        `revision` is the Hub revision of an id (None: `main`).

        Raises:
            FileNotFoundError: no vocabulary at `path` (or no such Hub model).
            ValueError: empty vocabulary, or one lacking a special token.
        """
        path = hub.resolve(path, revision, with_weights=False)
        settings: dict = {}
        if path.is_dir():
            vocab, settings = _read_directory(path)
        else:
            vocab = read_vocab_file(path)
        given = {
            "lowercase": lowercase,
            "strip_accents": strip_accents,
            "handle_chinese_chars": handle_chinese_chars,
        }
        settings.update({key: value for key, value in given.items() if value is not None})
        return cls(vocab, TokenizerOptions(**settings))

    def save_pretrained(self, directory: str | os.PathLike) -> Path:
        """Write `vocab.txt`, `tokenizer.json` and `tokenizer_config.json` into `directory`.

        The directory loads in `transformers.BertTokenizer` and `BertTokenizerFast`.
        """
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        ordered = sorted(self._vocab.items(), key=lambda item: item[1])
        if [index for _, index in ordered] != list(range(len(ordered))):
            raise ValueError("vocabulary ids are not 0..N-1; cannot write it as vocab.txt")
        # All three files or none: a failure leaves no half-written set.
        paths = [directory / name for name in TOKENIZER_FILES]
        with atomic_files(paths) as (vocab, backend, config):
            vocab.write_text("".join(token + "\n" for token, _ in ordered), encoding="utf-8")
            self._backend.save(str(backend))
            options = json.dumps(self.options.to_hf_config(), indent=2, ensure_ascii=False)
            config.write_text(options + "\n", encoding="utf-8")
        return directory

    # --- vocabulary -----------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    def get_vocab(self) -> dict[str, int]:
        return dict(self._vocab)

    @property
    def pad_token_id(self) -> int:
        return self._vocab[PAD_TOKEN]

    @property
    def unk_token_id(self) -> int:
        return self._vocab[UNK_TOKEN]

    @property
    def cls_token_id(self) -> int:
        return self._vocab[CLS_TOKEN]

    @property
    def sep_token_id(self) -> int:
        return self._vocab[SEP_TOKEN]

    @property
    def mask_token_id(self) -> int:
        return self._vocab[MASK_TOKEN]

    @property
    def special_token_ids(self) -> set[int]:
        return {self._vocab[token] for token in SPECIAL_TOKENS}

    def convert_tokens_to_ids(self, tokens: str | Sequence[str]) -> int | list[int]:
        """Pieces to ids; unknown pieces map to `[UNK]`'s id."""
        if isinstance(tokens, str):
            return self._vocab.get(tokens, self.unk_token_id)
        return [self._vocab.get(token, self.unk_token_id) for token in tokens]

    def convert_ids_to_tokens(self, ids: int | Sequence[int]) -> str | list[str]:
        """Ids to pieces; ids outside the vocabulary map to `[UNK]`."""
        if isinstance(ids, int):
            return self._ids_to_tokens.get(ids, UNK_TOKEN)
        return [self._ids_to_tokens.get(index, UNK_TOKEN) for index in ids]

    @property
    def backend(self) -> BackendTokenizer:
        """The underlying `tokenizers.Tokenizer` (e.g. for `word_ids`); do not reconfigure it."""
        return self._backend

    # --- encoding -------------------------------------------------------------------------

    def tokenize(self, text: str) -> list[str]:
        """Word pieces of `text`, no [CLS]/[SEP]: `"unaffable" -> ["un", "##aff", "##able"]`."""
        try:
            return self._backend.encode(text, add_special_tokens=False).tokens
        except TypeError:  # the backend's words for a text that is not UTF-8
            check_utf8([text])
            raise

    def __call__(
        self,
        text: str | Sequence[str] | Sequence[tuple[str, str]],
        text_pair: str | Sequence[str] | None = None,
        max_length: int | None = None,
        truncation: bool = True,
        padding: bool = False,
        return_offsets: bool = False,
    ) -> Encoding:
        """Encode one text (or pair) as `[CLS] A [SEP] (B [SEP])`, or a batch of them.

        Args:
            text: a string, a list of strings, or a list of (A, B) pairs.
            text_pair: sentence B (a string, or a list matching `text`).
            max_length: length limit including special tokens; `model_max_length` when None.
            truncation: cut the longer side first until the limit is met.
            padding: pad a batch to its longest sequence with `[PAD]` (attention_mask 0).
            return_offsets: add `offset_mapping`, (start, end) character spans into the input
                text for every piece; special tokens get (0, 0).

        Returns:
            dict with `input_ids`, `token_type_ids`, `attention_mask` (and `offset_mapping`):
            lists of int for a single input, lists of lists for a batch.

        Raises:
            ValueError: inconsistent batch, or `max_length` shorter than the special tokens.
        """
        is_batch = not isinstance(text, str)
        inputs = _as_inputs(text, text_pair)
        has_pair = any(isinstance(item, tuple) for item in inputs)
        budget = None
        if truncation:
            limit = self.options.model_max_length if max_length is None else max_length
            needed = NUM_SPECIAL_TOKENS_PAIR if has_pair else NUM_SPECIAL_TOKENS_SINGLE
            if limit < needed:
                raise ValueError(
                    f"max_length {limit} leaves no room for the {needed} special tokens"
                )
            budget = limit - needed
        # Encode every side without special tokens in one batch, then truncate and add
        # [CLS]/[SEP] here: the library's "longest_first" splits an odd excess differently.
        firsts = [item[0] if isinstance(item, tuple) else item for item in inputs]
        seconds = [item[1] for item in inputs if isinstance(item, tuple)]
        try:
            encodings = iter(self._encode_sides(firsts + seconds, return_offsets))
        except TypeError:  # the backend's words for a text that is not UTF-8
            check_utf8(firsts + seconds)
            raise
        sides = [next(encodings) for _ in firsts]
        pair_sides = {
            index: next(encodings) for index, item in enumerate(inputs) if isinstance(item, tuple)
        }
        rows = [
            self._assemble(side, pair_sides.get(index), budget, return_offsets)
            for index, side in enumerate(sides)
        ]
        keys = [*ENCODING_KEYS, OFFSETS_KEY] if return_offsets else list(ENCODING_KEYS)
        result: Encoding = {key: [row[key] for row in rows] for key in keys}
        if padding and rows:
            _pad_in_place(result, self.pad_token_id)
        return result if is_batch else {key: value[0] for key, value in result.items()}

    def unknown_share(self, texts: Sequence[str] | Sequence[tuple[str, str]]) -> float:
        """The share of [UNK] among the pieces of `texts` (texts or pairs), special tokens such
        as [MASK] aside; 0.0 when they have no pieces.

        Raises:
            ValueError: a text that is not UTF-8 (`check_utf8`).
        """
        special = self.special_token_ids - {self.unk_token_id}
        pieces = [
            index
            for ids in self(list(texts), truncation=False)["input_ids"]
            for index in ids
            if index not in special
        ]
        return pieces.count(self.unk_token_id) / len(pieces) if pieces else 0.0

    def mostly_unknown_warning(
        self, texts: Sequence[str] | Sequence[tuple[str, str]]
    ) -> str | None:
        """A warning for inputs whose pieces are mostly [UNK] (`MOSTLY_UNKNOWN_SHARE`), else
        None: the model reads them as a run of one piece, whatever they say.

        Raises:
            ValueError: a text that is not UTF-8 (`check_utf8`).
        """
        share = self.unknown_share(texts)
        if share < MOSTLY_UNKNOWN_SHARE:
            return None
        return (
            f"{share:.0%} of the input's pieces are {UNK_TOKEN} for this model's vocabulary (is "
            "it the model for this language?)"
        )

    def encode_ids(self, texts: Sequence[str], num_workers: int = 1) -> list[list[int]]:
        """Piece ids of many texts, no [CLS]/[SEP] and no truncation, for bulk preprocessing.

        Equal to `tok(text, truncation=False)["input_ids"][1:-1]` for every text, but faster:
        whitespace-separated chunks seen before are not encoded again (`bertlab.tokenizer.fast`).

        Args:
            texts: the texts, e.g. the lines of a corpus.
            num_workers: processes to spread the work over (forked; 1 runs in this process).
                Each keeps its own chunk cache, so give them many texts at once.

        Returns:
            one list of int ids per text.
        """
        return encode_parallel(self._chunk_cache, texts, num_workers)

    def _encode_sides(self, texts: list[str], return_offsets: bool) -> list[tuple[list, list]]:
        """(ids, offsets) of each text without special tokens; offsets empty unless asked."""
        if return_offsets:
            encodings = self._backend.encode_batch(texts, add_special_tokens=False)
            return [(encoding.ids, encoding.offsets) for encoding in encodings]
        return [(ids, []) for ids in self._chunk_cache.encode(texts)]

    def _assemble(self, first, second, budget: int | None, return_offsets: bool) -> Encoding:
        """`[CLS] A [SEP] (B [SEP])` from (ids, offsets) sides, cut to `budget` content pieces."""
        (ids_a, offsets_a), (ids_b, offsets_b) = first, second or ([], [])
        length_a, length_b = len(ids_a), len(ids_b)
        if budget is not None:
            length_a, length_b = longest_first_lengths(length_a, length_b, budget)
        cls_id, sep_id = self.cls_token_id, self.sep_token_id
        input_ids = [cls_id, *ids_a[:length_a], sep_id]
        token_type_ids = [0] * len(input_ids)
        offsets = [(0, 0), *offsets_a[:length_a], (0, 0)] if return_offsets else []
        if second is not None:
            input_ids += [*ids_b[:length_b], sep_id]
            token_type_ids += [PAIR_SEGMENT_ID] * (length_b + 1)
            offsets += [*offsets_b[:length_b], (0, 0)] if return_offsets else []
        row: Encoding = {
            "input_ids": input_ids,
            "token_type_ids": token_type_ids,
            "attention_mask": [1] * len(input_ids),
        }
        if return_offsets:
            row[OFFSETS_KEY] = offsets
        return row

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """Text of the pieces in `ids`, `##` joined back and special tokens dropped by default."""
        return self._backend.decode(list(ids), skip_special_tokens=skip_special_tokens)


def longest_first_lengths(length_a: int, length_b: int, budget: int) -> tuple[int, int]:
    """Lengths after `transformers`' "longest_first" truncation to `budget` pieces in all.

    It removes one piece at a time from the longer side, from B on a tie:
    `longest_first_lengths(3, 9, 5) -> (3, 2)`.
    """
    excess = length_a + length_b - budget
    if excess <= 0:
        return length_a, length_b
    from_longer = min(excess, abs(length_a - length_b))
    if length_a > length_b:
        length_a -= from_longer
    else:
        length_b -= from_longer
    excess -= from_longer
    # Equal now: B loses the first piece of every two.
    return length_a - excess // 2, length_b - (excess + 1) // 2


def _as_inputs(
    text: str | Sequence[str] | Sequence[tuple[str, str]], text_pair: str | Sequence[str] | None
) -> list[str | tuple[str, str]]:
    if isinstance(text, str):
        if text_pair is not None and not isinstance(text_pair, str):
            raise ValueError("text_pair must be a string when text is a string")
        return [text if text_pair is None else (text, text_pair)]
    texts = list(text)
    if text_pair is None:
        return [tuple(item) if isinstance(item, (tuple, list)) else item for item in texts]
    pairs = list(text_pair) if not isinstance(text_pair, str) else None
    if pairs is None or len(pairs) != len(texts):
        raise ValueError(f"text_pair must be a list of {len(texts)} strings, like text")
    return list(zip(texts, pairs, strict=True))


def _pad_in_place(result: Encoding, pad_token_id: int) -> None:
    longest = max(len(ids) for ids in result["input_ids"])
    fill = {
        "input_ids": pad_token_id,
        "token_type_ids": 0,
        "attention_mask": 0,
        OFFSETS_KEY: (0, 0),
    }
    for key, rows in result.items():
        for row in rows:
            row.extend([fill[key]] * (longest - len(row)))


def _read_directory(directory: Path) -> tuple[dict[str, int], dict]:
    """Vocabulary and switches of a bertlab or `transformers` tokenizer directory."""
    settings: dict = {}
    tokenizer_json = directory / TOKENIZER_FILE
    vocab_txt = directory / VOCAB_FILE
    if not vocab_txt.is_file() and not tokenizer_json.is_file():
        hint = hub.model_in_run_hint(directory)
        raise FileNotFoundError(f"no {VOCAB_FILE} or {TOKENIZER_FILE} in {directory}{hint}")
    vocab = None
    if tokenizer_json.is_file():
        with open(tokenizer_json, encoding="utf-8") as file:
            saved = json.load(file)
        settings.update(_settings_from_normalizer(saved.get("normalizer") or {}))
        vocab = saved.get("model", {}).get("vocab")
    if vocab_txt.is_file():
        vocab = read_vocab_file(vocab_txt)  # the reference reads vocab.txt; it wins
    if not isinstance(vocab, dict) or not vocab:
        raise ValueError(f"{tokenizer_json} holds no WordPiece vocabulary")
    config_path = directory / CONFIG_FILE
    if config_path.is_file():
        with open(config_path, encoding="utf-8") as file:
            config = json.load(file)
        names = {
            "do_lower_case": "lowercase",
            "strip_accents": "strip_accents",
            "tokenize_chinese_chars": "handle_chinese_chars",
            "model_max_length": "model_max_length",
        }
        settings.update(
            {ours: config[theirs] for theirs, ours in names.items() if theirs in config}
        )
    if settings.get("model_max_length", 0) > sys.maxsize:
        settings.pop("model_max_length")  # transformers writes 1e30 for "no limit"
    return vocab, settings


def _settings_from_normalizer(normalizer: dict) -> dict:
    """Switches of a `transformers`-written `BertNormalizer` (ours re-reads tokenizer_config)."""
    if normalizer.get("type") != "BertNormalizer":
        return {}
    return {
        "lowercase": normalizer.get("lowercase", True),
        "strip_accents": normalizer.get("strip_accents"),
        "handle_chinese_chars": normalizer.get("handle_chinese_chars", True),
    }
