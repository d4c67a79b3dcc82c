"""BERT's basic tokenization as `tokenizers` components: the first of the reference's two stages.

google-research/bert's `BasicTokenizer`: drop control characters and map whitespace to a space;
put spaces around CJK ideographs; NFC-normalize (added by `transformers`); lowercase and strip
accents (NFD, then drop nonspacing marks) when uncased; split on whitespace and isolate every
punctuation mark. WordPiece, the second stage, is `bertlab.tokenizer.wordpiece`.

The `tokenizers` library runs this pipeline in Rust with offsets, but its built-in `BertNormalizer`
and `BertPreTokenizer` disagree with the reference on a few points: their Unicode tables are older
than Python's (emoji added after Unicode 9 are dropped as "unassigned"), accent stripping also drops
spacing marks (category Mc, e.g. Devanagari vowel signs), lowercasing ignores the Greek final sigma,
there is no NFC step, and one CJK extension range is off. We therefore compose the pipeline from
generic `Replace`/`Split` steps whose character classes are computed from Python's `unicodedata`,
the same tables the reference reads, so the two agree by construction. The golden tests prove it.
"""

from __future__ import annotations

import functools
import json
import sys
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Regex, normalizers, pre_tokenizers

# google-research/bert tokenization.py `_is_chinese_char`, with the Extension E start (0x2B820)
# as in `transformers`; the `tokenizers` library has 0x2B920 there.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
# google-research/bert `_is_punctuation`: these ASCII symbols count as punctuation too.
ASCII_PUNCTUATION_RANGES = ((33, 47), (58, 64), (91, 96), (123, 126))
SURROGATES = range(0xD800, 0xE000)  # not valid in a Rust string; the reference drops them (Cs)
GREEK_CAPITAL_SIGMA = "\u03a3"
GREEK_FINAL_SIGMA = "\u03c2"


def is_cjk_ideograph(char: str) -> bool:
    """Whether BERT's basic tokenizer isolates `char` as a word of its own (a CJK ideograph).

    Kana and Hangul are not ideographs: `is_cjk_ideograph("中") -> True`, `("か") -> False`.
    """
    code_point = ord(char)
    return any(low <= code_point <= high for low, high in CJK_RANGES)


def _is_control(char: str) -> bool:
    # Reference `_clean_text`: NUL, U+FFFD and every category C* character except \t \n \r.
    if char in "\t\n\r":
        return False
    return char in "\x00\ufffd" or unicodedata.category(char).startswith("C")


def _is_whitespace(char: str) -> bool:
    # Reference `_is_whitespace`, plus what Python's `str.split()` (its `whitespace_tokenize`)
    # splits on and `_clean_text` kept (U+2028, U+2029).
    return char in " \t\n\r" or unicodedata.category(char) == "Zs" or char.isspace()


def _is_punctuation(char: str) -> bool:
    code_point = ord(char)
    if any(low <= code_point <= high for low, high in ASCII_PUNCTUATION_RANGES):
        return True
    return unicodedata.category(char).startswith("P")


def _lowers_to_final_sigma(text: str) -> bool:
    return text.lower().endswith(GREEK_FINAL_SIGMA)


def _regex_class(code_points: Iterable[int]) -> str:
    """A regex character class `[...]` of sorted code points, written as ranges."""
    ranges: list[list[int]] = []
    for code_point in sorted(code_points):
        if ranges and ranges[-1][1] == code_point - 1:
            ranges[-1][1] = code_point
        else:
            ranges.append([code_point, code_point])
    parts = (
        f"\\x{{{low:X}}}" if low == high else f"\\x{{{low:X}}}-\\x{{{high:X}}}"
        for low, high in ranges
    )
    return "[" + "".join(parts) + "]"


@dataclass(frozen=True)
class CharacterClasses:
    """Regex classes for BERT's character rules, computed from Python's `unicodedata`."""

    control: str
    whitespace: str
    punctuation: str
    nonspacing_mark: str
    cjk: str
    final_sigma: str
    split_differs: str  # characters on which `str.split()` and BERT's whitespace rule disagree
    whitespace_chars: str  # the characters of `whitespace`, for Python's `re`


# The classes of a Unicode version, as `compute_character_classes` makes them: computing them
# walks all 1.1M code points, about 0.6 s at the start of every command that loads a tokenizer.
# Stored for the version of the Python that CI runs (tools/store_character_classes.py writes the
# file; tests/unit/test_tokenization.py checks it against the computation); other versions are
# computed.
STORED_CLASSES_DIR = Path(__file__).resolve().with_name("character_classes")


def stored_classes_path(unicode_version: str = unicodedata.unidata_version) -> Path:
    return STORED_CLASSES_DIR / f"unicode-{unicode_version}.json"


@functools.lru_cache(maxsize=1)
def character_classes() -> CharacterClasses:
    """The classes of this Python's Unicode version: stored, else computed (once a process)."""
    path = stored_classes_path()
    if path.is_file():
        return CharacterClasses(**json.loads(path.read_text(encoding="utf-8")))
    return compute_character_classes()


def compute_character_classes() -> CharacterClasses:
    """The classes from `unicodedata` (about 0.6 s): a pure function of the Unicode data."""
    control, whitespace, punctuation, nonspacing, cased, case_ignorable = ([] for _ in range(6))
    split_differs = []
    for code_point in range(sys.maxunicode + 1):
        if code_point in SURROGATES:
            continue
        char = chr(code_point)
        if _is_control(char):
            control.append(code_point)
            if char.isspace():  # e.g. U+000B: str.split() splits there, BERT deletes it
                split_differs.append(char)
            continue
        if _is_whitespace(char):
            whitespace.append(code_point)
        if _is_whitespace(char) != char.isspace():
            split_differs.append(char)
        if _is_punctuation(char):
            punctuation.append(code_point)
        if unicodedata.category(char) == "Mn":
            nonspacing.append(code_point)
        # Python's str.lower() turns a capital sigma into a final sigma when a cased letter comes
        # before it (skipping case-ignorable characters) and none after. Derive both character
        # sets from str.lower() itself so the regex below follows it exactly.
        if _lowers_to_final_sigma(char + GREEK_CAPITAL_SIGMA):
            cased.append(code_point)
        elif _lowers_to_final_sigma("A" + char + GREEK_CAPITAL_SIGMA):
            case_ignorable.append(code_point)
    cased_class, ignorable_class = _regex_class(cased), _regex_class(case_ignorable)
    final_sigma = (
        f"(?<={cased_class}{ignorable_class}*){GREEK_CAPITAL_SIGMA}"
        f"(?!{ignorable_class}*{cased_class})"
    )
    cjk = [cp for low, high in CJK_RANGES for cp in range(low, high + 1)]
    return CharacterClasses(
        control=_regex_class(control),
        whitespace=_regex_class(whitespace),
        punctuation=_regex_class(punctuation),
        nonspacing_mark=_regex_class(nonspacing),
        cjk=_regex_class(cjk),
        final_sigma=final_sigma,
        split_differs="".join(split_differs),
        whitespace_chars="".join(map(chr, whitespace)),
    )


def build_normalizer(lowercase: bool, strip_accents: bool) -> normalizers.Normalizer:
    """BERT's basic-tokenizer normalization, in the reference's order, keeping offsets.

    Ideographs are isolated by the pre-tokenizer instead, which splits exactly where the reference
    inserts spaces (NFC maps CJK ideographs only to CJK ideographs, so the order does not matter).
    """
    classes = character_classes()
    steps = [
        normalizers.Replace(Regex(classes.control), ""),
        normalizers.Replace(Regex(classes.whitespace), " "),
        normalizers.NFC(),
    ]
    if lowercase:
        steps += [
            normalizers.Replace(Regex(classes.final_sigma), GREEK_FINAL_SIGMA),
            normalizers.Lowercase(),
        ]
    if strip_accents:
        steps += [normalizers.NFD(), normalizers.Replace(Regex(classes.nonspacing_mark), "")]
    return normalizers.Sequence(steps)


def build_pre_tokenizer(handle_chinese_chars: bool) -> pre_tokenizers.PreTokenizer:
    """Split on whitespace, then isolate every punctuation mark (and ideograph, if asked)."""
    classes = character_classes()
    isolated = classes.punctuation
    if handle_chinese_chars:
        isolated = classes.punctuation[:-1] + classes.cjk[1:]
    return pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Split(Regex(isolated), "isolated")]
    )
