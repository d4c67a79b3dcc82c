"""Parity of `bertlab.Tokenizer` with the pure-Python reference of Google's rules in `transformers`.

The reference is `BertTokenizerLegacy` (`transformers` 5.x; the slow `BertTokenizer` in 4.x).
Google's three vocabularies come from `../shared/data/vocab/`; without them the committed tricky
strings are checked against a small vocabulary built from the strings themselves.
"""

from __future__ import annotations

import gzip
import itertools
import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.golden
transformers = pytest.importorskip("transformers")

from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS, Tokenizer  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"
TRICKY_STRINGS = REPO_ROOT / "tests" / "data" / "tokenizer" / "tricky_strings.jsonl"
# (vocabulary file, lowercase) as Google released them.
GOOGLE_VOCABS = {
    "uncased": ("bert-base-uncased-vocab.txt", True),
    "cased": ("bert-base-cased-vocab.txt", False),
    "chinese": ("bert-base-chinese-vocab.txt", True),
}
NUM_ENGLISH_LINES_PER_FILE = 3500  # 7,000 English + 5,000 Chinese real lines: >= 10,000
NUM_CHINESE_LINES = 5000
NUM_REAL_PAIRS = 500
TRUNCATION_LENGTHS = (8, 16, 64)


def _reference_class():
    try:
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy
    except ImportError:  # transformers 4.x: the slow BertTokenizer is the pure-Python one
        return transformers.BertTokenizer
    return BertTokenizerLegacy


def _load_tricky_strings() -> list[str]:
    with open(TRICKY_STRINGS, encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def _build_pair(vocab_path: Path, lowercase: bool):
    reference = _reference_class()(str(vocab_path), do_lower_case=lowercase)
    return Tokenizer.from_pretrained(vocab_path, lowercase=lowercase), reference


def _reference_encode(reference, text, text_pair=None, max_length=None):
    encoding = reference(
        text,
        text_pair,
        truncation="longest_first" if max_length else False,
        max_length=max_length,
        return_token_type_ids=True,
    )
    return encoding["input_ids"], encoding["token_type_ids"]


def _assert_same(ours: Tokenizer, reference, inputs, max_length=None) -> None:
    """Compare one at a time with the reference and in one batch with ourselves."""
    texts = [item if isinstance(item, str) else item[0] for item in inputs]
    pairs = None if all(isinstance(item, str) for item in inputs) else [item[1] for item in inputs]
    batch = ours(texts, pairs, max_length=max_length, truncation=max_length is not None)
    for index, item in enumerate(inputs):
        text, text_pair = (item, None) if isinstance(item, str) else item
        expected = _reference_encode(reference, text, text_pair, max_length)
        got = (batch["input_ids"][index], batch["token_type_ids"][index])
        assert got == expected, (
            f"{item!r}:\n ours {ours.convert_ids_to_tokens(got[0])}\n"
            f" ref  {reference.convert_ids_to_tokens(expected[0])}"
        )


@pytest.fixture(scope="module")
def tricky_strings() -> list[str]:
    strings = _load_tricky_strings()
    assert len(strings) >= 200
    return strings


@pytest.fixture(scope="module")
def small_vocab_file(tmp_path_factory, tricky_strings) -> Path:
    """A vocabulary built from the tricky strings: whole words, characters and `##` characters."""
    reference = _reference_class()(str(_write_vocab(tmp_path_factory, list(SPECIAL_TOKENS))))
    words = [word for text in tricky_strings for word in reference.basic_tokenizer.tokenize(text)]
    chars = sorted({char for word in words for char in word})
    pieces = list(SPECIAL_TOKENS) + sorted(set(words))[::2] + chars + [f"##{c}" for c in chars[::3]]
    return _write_vocab(tmp_path_factory, list(dict.fromkeys(pieces)))


def _write_vocab(tmp_path_factory, pieces: list[str]) -> Path:
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("".join(f"{piece}\n" for piece in pieces), encoding="utf-8")
    return path


def _google_vocab(name: str) -> tuple[Path, bool]:
    file_name, lowercase = GOOGLE_VOCABS[name]
    path = SHARED_DATA / "vocab" / file_name
    if not path.is_file():
        pytest.skip(f"{path} not present")
    return path, lowercase


@pytest.mark.parametrize("lowercase", [True, False])
def test_tricky_strings_match_reference_with_small_vocab(
    small_vocab_file, tricky_strings, lowercase
):
    ours, reference = _build_pair(small_vocab_file, lowercase)
    _assert_same(ours, reference, tricky_strings)
    _assert_same(ours, reference, list(itertools.pairwise(tricky_strings)))


@pytest.mark.parametrize("name", sorted(GOOGLE_VOCABS))
def test_tricky_strings_match_reference(name, tricky_strings):
    ours, reference = _build_pair(*_google_vocab(name))
    _assert_same(ours, reference, tricky_strings)
    _assert_same(ours, reference, list(itertools.pairwise(tricky_strings)))


@pytest.mark.parametrize("max_length", TRUNCATION_LENGTHS)
def test_truncation_of_pairs_matches_reference(max_length, tricky_strings):
    ours, reference = _build_pair(*_google_vocab("uncased"))
    pairs = list(zip(tricky_strings, reversed(tricky_strings), strict=True))
    _assert_same(ours, reference, pairs, max_length=max_length)


def _read_lines(path: Path, limit: int) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as file:
        lines = (line.strip() for line in file)
        return list(itertools.islice((line for line in lines if line), limit))


@pytest.fixture(scope="module")
def english_lines() -> list[str]:
    paths = sorted((SHARED_DATA / "corpus_en").glob("*.txt.gz"))
    if not paths:
        pytest.skip(f"no English corpus under {SHARED_DATA}")
    return [line for path in paths for line in _read_lines(path, NUM_ENGLISH_LINES_PER_FILE)]


@pytest.fixture(scope="module")
def chinese_lines() -> list[str]:
    paths = sorted((SHARED_DATA / "corpus_zh").glob("*.txt"))
    if not paths:
        pytest.skip(f"no Chinese corpus under {SHARED_DATA}")
    per_file = NUM_CHINESE_LINES // len(paths) + 1
    return [line for path in paths for line in _read_lines(path, per_file)][:NUM_CHINESE_LINES]


@pytest.mark.parametrize("name", ["uncased", "cased"])
def test_real_english_lines_match_reference(name, english_lines):
    ours, reference = _build_pair(*_google_vocab(name))
    _assert_same(ours, reference, english_lines)
    pairs = list(
        zip(english_lines[:NUM_REAL_PAIRS], english_lines[1 : NUM_REAL_PAIRS + 1], strict=True)
    )
    _assert_same(ours, reference, pairs, max_length=128)


def test_real_chinese_lines_match_reference(chinese_lines):
    ours, reference = _build_pair(*_google_vocab("chinese"))
    assert len(chinese_lines) == NUM_CHINESE_LINES
    _assert_same(ours, reference, chinese_lines)
    pairs = list(
        zip(chinese_lines[:NUM_REAL_PAIRS], chinese_lines[1 : NUM_REAL_PAIRS + 1], strict=True)
    )
    _assert_same(ours, reference, pairs, max_length=128)


def test_saved_directory_loads_in_the_reference_and_encodes_the_same(tmp_path, tricky_strings):
    ours, _ = _build_pair(*_google_vocab("cased"))
    ours.save_pretrained(tmp_path)
    loaded = _reference_class().from_pretrained(str(tmp_path))
    assert not loaded.do_lower_case
    _assert_same(ours, loaded, tricky_strings)


@pytest.mark.parametrize("name", ["uncased", "cased"])
def test_saved_directory_loads_in_transformers_fast_tokenizers(name, tmp_path, tricky_strings):
    """`BertTokenizer(Fast)` rebuild the library's stock `BertNormalizer` from our config. It
    differs from Google's rules on NFC, Greek final sigma, part of CJK Extension E and recently
    assigned characters, so equality is checked on plain ASCII text only."""
    ours, _ = _build_pair(*_google_vocab(name))
    ours.save_pretrained(tmp_path)
    plain = [text for text in tricky_strings if text.isascii()]
    for cls in (transformers.BertTokenizer, transformers.BertTokenizerFast):
        loaded = cls.from_pretrained(str(tmp_path))
        for text in plain:
            assert loaded(text)["input_ids"] == ours(text)["input_ids"], (cls.__name__, text)
