"""Text units for pre-training data: sentences (English and Chinese rules) and whole words.

The corpus reader splits paragraphs into sentences with `split_sentences`; whole-word masking
(`--whole-word-mask`) needs to know which WordPiece starts a word: `english_word_starts` by the
`##` rule, `chinese_word_starts` with a segmenter (jieba). Nothing imports torch.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from bertlab.core.optional import require
from bertlab.corpus.sources import LANGS
from bertlab.tokenizer.basic import is_cjk_ideograph
from bertlab.tokenizer.wordpiece import CONTINUING_SUBWORD_PREFIX

SPLITTERS_BY_LANG = tuple(lang for lang in LANGS if lang != "auto")  # "auto" is decided per file


# --- sentence splitting ----------------------------------------------------------------------

# Words that end with a period without ending the sentence. "etc." is left out on purpose: it
# ends sentences as often as not, and the next word's case decides then.
ENGLISH_ABBREVIATIONS = frozenset(
    """mr mrs ms dr prof sr jr st mt vs cf al fig figs eq no nos vol pp ed eds gen gov sen rep
    col lt sgt capt cmdr adm rev hon inc ltd co corp dept univ approx est jan feb mar apr jun jul
    aug sep sept oct nov dec""".split()
)
# A sentence ends at . ! ? (or a run such as "?!" or "..."), then any closing quotes or brackets,
# then whitespace, then a capital, a digit or an opening quote/bracket.
_ENGLISH_BOUNDARY = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s+[\"'“‘(\[]?[A-Z0-9])")
_ENGLISH_WORD_BEFORE = re.compile(r"(\S+)$")
# Chinese: a sentence ends at 。！？ (or ASCII !?) and keeps its closing quotes and brackets.
_CHINESE_SENTENCE = re.compile(r"[^。！？!?]*[。！？!?]+[」』”’）)\"']*|[^。！？!?]+$")


def _english_sentences(paragraph: str) -> list[str]:
    sentences, start = [], 0
    for boundary in _ENGLISH_BOUNDARY.finditer(paragraph):
        if boundary.group().startswith("."):
            word = _ENGLISH_WORD_BEFORE.search(paragraph, start, boundary.start())
            # "Mr." / "e.g." / "U.S." / the initial in "J. Smith": a period that ends no sentence.
            if word is not None:
                stem = word.group(1).lstrip("\"'“‘([")
                if stem.lower() in ENGLISH_ABBREVIATIONS or len(stem) == 1 or "." in stem:
                    continue
        sentences.append(paragraph[start : boundary.end()])
        start = boundary.end()
    sentences.append(paragraph[start:])
    return [sentence.strip() for sentence in sentences if sentence.strip()]


def _chinese_sentences(paragraph: str) -> list[str]:
    return [s.strip() for s in _CHINESE_SENTENCE.findall(paragraph) if s.strip()]


_SPLITTERS: dict[str, Callable[[str], list[str]]] = {
    "en": _english_sentences,
    "zh": _chinese_sentences,
}


def split_sentences(paragraph: str, lang: str) -> list[str]:
    """Split a paragraph into sentences with simple, documented rules.

    English (`"en"`): a sentence ends at `.`, `!`, `?` or a run of them (`?!`, `...`), with any
    closing quotes or brackets, when whitespace and then a capital letter, digit or opening quote
    follows. A period does not end a sentence after an abbreviation in `ENGLISH_ABBREVIATIONS`
    ("Mr."), a single letter ("J. Smith") or a dotted word ("e.g.", "U.S."); decimals ("3.5") have
    no space after the period. Known limits: "U.S." at the very end of a sentence does not split,
    and a sentence starting with a lowercase word is joined to the previous one.

    Chinese (`"zh"`): a sentence ends at 。！？ (or ASCII ! ?); closing quotes 」』”’ and brackets
    stay with it.

    Example:
        >>> text = 'Mr. Smith paid $3.5 million, e.g. for land. "Why?" he asked. Done!'
        >>> split_sentences(text, "en")
        ['Mr. Smith paid $3.5 million, e.g. for land.', '"Why?" he asked.', 'Done!']
        >>> split_sentences("他说：「你好。」我们走吧！真的？好", "zh")
        ['他说：「你好。」', '我们走吧！', '真的？', '好']

    Args:
        paragraph: one paragraph of raw text.
        lang: `"en"` or `"zh"`.

    Returns:
        The sentences, stripped of surrounding whitespace, none empty.

    Raises:
        ValueError: for an unknown `lang`.
    """
    if lang not in _SPLITTERS:
        raise ValueError(
            f"no sentence splitter for lang {lang!r}; choose one of {SPLITTERS_BY_LANG}"
        )
    return _SPLITTERS[lang](paragraph)


# --- whole-word boundaries -------------------------------------------------------------------


def english_word_starts(tokens: Sequence[str]) -> list[bool]:
    """Whether each WordPiece starts a word: pieces prefixed `##` continue the previous one.

    Applied to the vocabulary in id order it gives a lookup table, so that the word starts of any
    id sequence are `table[input_ids]` (Google's `do_whole_word_mask`).

    Example:
        >>> english_word_starts(["the", "un", "##aff", "##able", "man"])
        [True, True, False, False, True]
    """
    return [not token.startswith(CONTINUING_SUBWORD_PREFIX) for token in tokens]


def _is_cjk_character(token: str) -> bool:
    return len(token) == 1 and is_cjk_ideograph(token)


def jieba_segmenter() -> Callable[[str], list[str]]:
    """jieba's `lcut` (text -> words), imported on first use: loading its dictionary takes a
    second or more. jieba logs its loading at DEBUG level through a handler of its own, which
    printed every line twice beside ours; it now logs warnings only.

    Raises:
        MissingPackageError: jieba is not installed.
    """
    import logging

    jieba = require("jieba", "Chinese word segmentation (whole-word masking, word vectors)")
    jieba.setLogLevel(logging.WARNING)
    return jieba.lcut


def chinese_word_starts(
    tokens: Sequence[str], segment: Callable[[str], Iterable[str]] | None = None
) -> list[bool]:
    """Whether each token starts a word, with Chinese words found by a segmenter.

    BERT's tokenizer makes every CJK character a token of its own. Each run of consecutive CJK
    character tokens is joined and segmented (by default with `jieba.lcut`); the first character of
    every segmented word starts a word, the others continue it. Other tokens follow the English
    `##` rule. This is the Chinese whole-word masking of Cui et al. 2019 (Chinese-BERT-wwm), kept
    as a boolean per token instead of renaming pieces to `##字`, so the ids stay unchanged.

    Example (jieba segments 我/喜欢/自然语言/处理):
        >>> chinese_word_starts(list("我喜欢自然语言处理") + ["bert", "##s"])
        [True, True, False, True, False, False, False, True, False, True, False]

    Args:
        tokens: the WordPiece tokens of one sentence.
        segment: text -> words, the words joined giving the text back; default `jieba.lcut`.

    Returns:
        One boolean per token.

    Raises:
        ValueError: if the segmenter's words do not join to the text it was given.
    """
    if segment is None:
        segment = jieba_segmenter()
    starts = english_word_starts(tokens)
    index = 0
    while index < len(tokens):
        if not _is_cjk_character(tokens[index]):
            index += 1
            continue
        end = index
        while end < len(tokens) and _is_cjk_character(tokens[end]):
            end += 1
        run = "".join(tokens[index:end])
        words = list(segment(run))
        if "".join(words) != run:
            raise ValueError(f"segmenter output {words} does not join to {run!r}")
        position = index
        for word in words:
            starts[position : position + len(word)] = [True] + [False] * (len(word) - 1)
            position += len(word)
        index = end
    return starts
