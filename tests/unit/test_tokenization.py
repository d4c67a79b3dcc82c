"""Unit tests of `bertlab.tokenizer.wordpiece` and `bertlab.tokenizer.training` on a tiny
vocabulary."""

from __future__ import annotations

import ast
import gzip
import json
import pickle
import random
import unicodedata
from pathlib import Path

import pytest

from bertlab.tokenizer.basic import (
    character_classes,
    compute_character_classes,
    stored_classes_path,
)
from bertlab.tokenizer.fast import ChunkCache
from bertlab.tokenizer.training import (
    TokenizerTrainingConfig,
    finalize_vocab,
    train_tokenizer,
)
from bertlab.tokenizer.wordpiece import (
    SPECIAL_TOKENS,
    Tokenizer,
    TokenizerOptions,
    longest_first_lengths,
    read_vocab_file,
)

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "bertlab"
# Not Google's order on purpose: ids must be read from the vocabulary.
TINY_VOCAB = [
    "[UNK]", "hello", "[SEP]", "[PAD]", "[CLS]", "[MASK]", "un", "##aff", "##able", "world",
    "cafe", "resume", "!", ",", ".", "'", "-", "$", "[", "]", "中", "国", "か", "##な", "한",
    "σ", "ς", "##ς", "ο", "##δ", "##ο", "Café", "a", "##a", "##b", "b", "x", "##x", "naive", "1",
    "##2", "2", "Hello", "World", "s", "##s", "don", "t",
]  # fmt: skip


def write_vocab(directory: Path, pieces: list[str]) -> Path:
    path = directory / "vocab.txt"
    path.write_text("".join(f"{piece}\n" for piece in pieces), encoding="utf-8")
    return path


@pytest.fixture
def tokenizer(tmp_path) -> Tokenizer:
    return Tokenizer.from_pretrained(write_vocab(tmp_path, TINY_VOCAB))


@pytest.fixture
def cased_tokenizer(tmp_path) -> Tokenizer:
    return Tokenizer.from_pretrained(write_vocab(tmp_path, TINY_VOCAB), lowercase=False)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("unaffable", ["un", "##aff", "##able"]),  # greedy longest match with ##
        ("Hello, WORLD!", ["hello", ",", "world", "!"]),  # lowercase + punctuation split
        ("Café résumé", ["cafe", "resume"]),  # NFD accent stripping
        ("cafe\u0301", ["cafe"]),  # decomposed accent
        ("中国", ["中", "国"]),  # ideographs split
        ("かな", ["か", "##な"]),  # kana is not split
        ("한", ["[UNK]"]),  # uncased NFD turns Hangul into jamo (not in this vocab)
        ("hello\u200bworld\x00", ["[UNK]"]),  # zero-width/control dropped: one unknown word
        ("hello\u3000world\u2028!", ["hello", "world", "!"]),  # whitespace normalized
        ("$[x]", ["$", "[", "x", "]"]),  # ASCII symbols count as punctuation
        ("ΟΔΟΣ", ["ο", "##δ", "##ο", "##ς"]),  # Greek final sigma, as Python's lower()
        ("qqq", ["[UNK]"]),  # no piece covers it
        ("a" * 100, ["a"] + ["##a"] * 99),  # 100 characters is still a word
        ("a" * 101, ["[UNK]"]),  # longer words become [UNK]
        ("hello [MASK] x[SEP]", ["hello", "[MASK]", "x", "[SEP]"]),  # special tokens kept whole
        ("[mask]", ["[", "[UNK]", "]"]),  # matched case-sensitively, like the reference
        ("", []),
    ],
)
def test_tokenize_follows_berts_rules(tokenizer, text, expected):
    assert tokenizer.tokenize(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Café", ["Café"]),
        ("Hello World", ["Hello", "World"]),
        ("hello", ["hello"]),
        ("HELLO", ["[UNK]"]),
    ],
)
def test_cased_tokenizer_keeps_case_and_accents(cased_tokenizer, text, expected):
    assert cased_tokenizer.tokenize(text) == expected


def test_strip_accents_can_be_set_apart_from_lowercase(tmp_path):
    path = write_vocab(tmp_path, TINY_VOCAB)
    assert Tokenizer.from_pretrained(path, strip_accents=False).tokenize("café") == ["[UNK]"]
    cased_stripped = Tokenizer.from_pretrained(path, lowercase=False, strip_accents=True)
    assert cased_stripped.tokenize("Cafe\u0301") == ["[UNK]"]
    assert cased_stripped.tokenize("naïve") == ["naive"]


def test_handle_chinese_chars_off_keeps_ideographs_together(tmp_path):
    path = write_vocab(tmp_path, TINY_VOCAB)
    assert Tokenizer.from_pretrained(path, handle_chinese_chars=False).tokenize("中国") == ["[UNK]"]


def test_special_token_ids_are_read_from_the_vocabulary(tokenizer):
    assert tokenizer.unk_token_id == 0
    assert tokenizer.sep_token_id == 2
    assert tokenizer.pad_token_id == 3
    assert tokenizer.cls_token_id == 4
    assert tokenizer.mask_token_id == 5
    assert tokenizer.special_token_ids == {0, 2, 3, 4, 5}
    assert tokenizer.vocab_size == len(TINY_VOCAB)
    assert tokenizer.convert_tokens_to_ids(["hello", "nope"]) == [1, 0]
    assert tokenizer.convert_ids_to_tokens([1, 10**6]) == ["hello", "[UNK]"]
    assert tokenizer.get_vocab()["world"] == TINY_VOCAB.index("world")


def test_single_and_pair_get_cls_sep_and_segment_ids(tokenizer):
    single = tokenizer("hello world")
    assert tokenizer.convert_ids_to_tokens(single["input_ids"]) == [
        "[CLS]", "hello", "world", "[SEP]",
    ]  # fmt: skip
    assert single["token_type_ids"] == [0, 0, 0, 0]
    assert single["attention_mask"] == [1, 1, 1, 1]
    pair = tokenizer("hello", "un world")
    assert tokenizer.convert_ids_to_tokens(pair["input_ids"]) == [
        "[CLS]", "hello", "[SEP]", "un", "world", "[SEP]",
    ]  # fmt: skip
    assert pair["token_type_ids"] == [0, 0, 0, 1, 1, 1]


@pytest.mark.parametrize(
    ("lengths", "expected"),
    [
        ((3, 9, 5), (3, 2)),
        ((9, 3, 5), (3, 2)),
        ((4, 4, 5), (3, 2)),  # tie: B first, then A
        ((4, 4, 6), (3, 3)),
        ((2, 2, 10), (2, 2)),
        ((10, 0, 4), (4, 0)),
    ],
)
def test_longest_first_truncation_cuts_the_longer_side_first(lengths, expected):
    assert longest_first_lengths(*lengths) == expected


def test_truncation_counts_special_tokens(tokenizer):
    encoded = tokenizer("a a a a a a", "b b b", max_length=7)
    tokens = tokenizer.convert_ids_to_tokens(encoded["input_ids"])
    assert tokens == ["[CLS]", "a", "a", "[SEP]", "b", "b", "[SEP]"]
    assert len(tokenizer("x " * 600)["input_ids"]) == TokenizerOptions().model_max_length
    assert len(tokenizer("x " * 600, truncation=False)["input_ids"]) == 602
    with pytest.raises(ValueError, match="no room"):
        tokenizer("a", "b", max_length=2)


def test_batch_equals_one_at_a_time_and_pads_to_longest(tokenizer):
    texts = ["hello world", "un", "", "Café résumé, naive!"]
    batch = tokenizer(texts, padding=True, return_offsets=True)
    longest = max(len(tokenizer(text)["input_ids"]) for text in texts)
    for index, text in enumerate(texts):
        single = tokenizer(text, return_offsets=True)
        length = len(single["input_ids"])
        assert batch["input_ids"][index][:length] == single["input_ids"]
        assert batch["offset_mapping"][index][:length] == single["offset_mapping"]
        assert batch["input_ids"][index][length:] == [tokenizer.pad_token_id] * (longest - length)
        assert batch["attention_mask"][index] == [1] * length + [0] * (longest - length)
    pairs = tokenizer([("hello", "world"), ("un", "b b")])
    assert pairs["input_ids"][1] == tokenizer("un", "b b")["input_ids"]
    assert tokenizer(["hello"], ["world"])["input_ids"] == [
        tokenizer("hello", "world")["input_ids"]
    ]


def test_offsets_map_each_piece_back_to_its_span(tokenizer):
    """Property test: every piece's span, normalized alone, spells the piece."""
    rng = random.Random(0)
    alphabet = list("abx12 ,.!-'中国かな한σΣÉé\u0301\u200b\t") + ["hello", "Café", "[MASK]", "un"]
    normalizer = tokenizer.backend.normalizer
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        encoded = tokenizer(text, return_offsets=True)
        pieces = tokenizer.convert_ids_to_tokens(encoded["input_ids"])[1:-1]
        spans = encoded["offset_mapping"][1:-1]
        previous_end = 0
        for piece, (start, end) in zip(pieces, spans, strict=True):
            assert previous_end <= start < end <= len(text), (text, piece, start, end)
            previous_end = end
            span = text[start:end]
            if piece in SPECIAL_TOKENS:
                assert span == piece or piece == "[UNK]"
            else:
                # Final sigma depends on the letters around the span, so compare sigma-blind.
                spelled = normalizer.normalize_str(span).replace("ς", "σ")
                assert spelled == piece.removeprefix("##").replace("ς", "σ"), (text, piece)


def test_decode_joins_pieces_and_drops_special_tokens(tokenizer):
    ids = tokenizer("unaffable world!")["input_ids"]
    assert tokenizer.decode(ids) == "unaffable world!"
    assert tokenizer.decode(ids, skip_special_tokens=False).startswith("[CLS] unaffable")


def test_save_and_load_round_trip(tmp_path, cased_tokenizer):
    directory = cased_tokenizer.save_pretrained(tmp_path / "saved")
    assert {p.name for p in directory.iterdir()} == {
        "vocab.txt", "tokenizer.json", "tokenizer_config.json",
    }  # fmt: skip
    config = json.loads((directory / "tokenizer_config.json").read_text())
    assert config["do_lower_case"] is False
    loaded = Tokenizer.from_pretrained(directory)
    assert loaded.options == cased_tokenizer.options
    assert loaded.get_vocab() == cased_tokenizer.get_vocab()
    assert loaded("Café World")["input_ids"] == cased_tokenizer("Café World")["input_ids"]


def test_loads_a_directory_with_only_tokenizer_json(tmp_path, tokenizer):
    saved = {
        "normalizer": {"type": "BertNormalizer", "lowercase": False, "strip_accents": None},
        "model": {"type": "WordPiece", "vocab": tokenizer.get_vocab()},
    }
    (tmp_path / "tokenizer.json").write_text(json.dumps(saved), encoding="utf-8")
    loaded = Tokenizer.from_pretrained(tmp_path)
    assert loaded.options.lowercase is False
    assert loaded.tokenize("Café") == ["Café"]


def test_missing_empty_or_incomplete_vocabulary_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        Tokenizer.from_pretrained(tmp_path / "nope.txt")
    with pytest.raises(FileNotFoundError, match="no vocab.txt"):
        Tokenizer.from_pretrained(tmp_path)
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        read_vocab_file(empty)
    partial = tmp_path / "partial" / "vocab.txt"
    partial.parent.mkdir()
    partial.write_text("[PAD]\n[UNK]\nhello\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[CLS\], \[SEP\], \[MASK\]"):
        Tokenizer.from_pretrained(partial)


def test_tokenizer_modules_do_not_import_torch():
    for name in ("wordpiece.py", "fast.py", "basic.py", "training.py"):
        tree = ast.parse((PACKAGE_DIR / "tokenizer" / name).read_text(encoding="utf-8"))
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        }
        imported |= {
            node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
        }
        assert not any(module.split(".")[0] == "torch" for module in imported), name


# --- training -------------------------------------------------------------------------------

ENGLISH_LINES = [
    "The quick brown fox jumps over the lazy dog.",
    "Unaffable people are not always unfriendly; some are shy.",
    "Tokenizers split words into pieces, and pieces into characters.",
] * 40
CHINESE_LINES = ["中华人民共和国成立于一九四九年。", "北京是中国的首都，上海是最大的城市。"] * 40


def small_config(vocab_size: int = 120, **changes) -> TokenizerTrainingConfig:
    return TokenizerTrainingConfig(vocab_size=vocab_size, heldout_every=10, **changes)


def test_training_writes_specials_first_and_reports_heldout_metrics(tmp_path):
    corpus = tmp_path / "corpus.txt.gz"
    with gzip.open(corpus, "wt", encoding="utf-8") as file:
        file.write("\n".join(ENGLISH_LINES) + "\n\n")
    tokenizer, report = train_tokenizer([corpus], small_config(), show_progress=False)
    assert [tokenizer.convert_ids_to_tokens(i) for i in range(5)] == list(SPECIAL_TOKENS)
    assert report.vocab_size == tokenizer.vocab_size <= 120
    assert report.num_heldout_lines == len(ENGLISH_LINES) // 10
    assert report.unk_rate == 0.0
    assert report.pieces_per_word >= 1.0
    assert tokenizer.tokenize("The QUICK fox") == tokenizer.tokenize("the quick fox")


def test_chinese_training_keeps_every_ideograph_and_no_dead_pieces(tmp_path):
    corpus = tmp_path / "zh.txt"
    corpus.write_text("\n".join(CHINESE_LINES + ENGLISH_LINES[:3]), encoding="utf-8")
    config = small_config(vocab_size=20, limit_alphabet=5)
    tokenizer, report = train_tokenizer([corpus], config, show_progress=False)
    vocab = tokenizer.get_vocab()
    seen = {char for line in CHINESE_LINES for char in line if "\u4e00" <= char <= "\u9fff"}
    assert seen <= vocab.keys()
    assert not [piece for piece in vocab if piece.startswith("##") and piece[2:] in seen]
    assert report.is_size_exceeded and "exceeds" in "\n".join(report.summary())


def test_finalize_vocab_drops_dead_pieces_and_trims_latest_merges():
    trained = [*SPECIAL_TOKENS, "a", "b", "中", "##中", "中国", "ab", "##ab"]
    pieces, num_dead = finalize_vocab(trained, ["中", "国"], vocab_size=10)
    assert num_dead == 2
    assert pieces == [*SPECIAL_TOKENS, "a", "b", "中", "ab", "国"]


def test_training_skips_non_utf8_lines_and_counts_them(tmp_path):
    corpus = tmp_path / "mixed.txt"
    corpus.write_bytes(b"hello world\n\xff\xfe bad bytes\n" * 20 + b"good line\n")
    _, report = train_tokenizer([corpus], small_config(), show_progress=False)
    assert report.num_skipped_lines == 20
    assert "not valid UTF-8" in "\n".join(report.summary())


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "corpus is empty"),
        (b"\n  \n\n", "corpus is empty"),
        (b"\xff\xfe\n\xc3\x28\n", "mostly not UTF-8"),
    ],
)
def test_empty_corpus_is_an_error(tmp_path, content, words):
    corpus = tmp_path / "empty.txt"
    corpus.write_bytes(content)
    with pytest.raises(ValueError, match=words):
        train_tokenizer([corpus], small_config(), show_progress=False)


def test_missing_corpus_file_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="corpus file not found"):
        train_tokenizer([tmp_path / "nope.txt"], small_config(), show_progress=False)


# --- fast path: the chunk cache -------------------------------------------------------------

TRICKY_STRINGS = PACKAGE_DIR.parent / "tests" / "data" / "tokenizer" / "tricky_strings.jsonl"
SHARED_ENGLISH = PACKAGE_DIR.parents[1] / "shared" / "data" / "corpus_en"
NUM_REAL_LINES = 3000


def _tricky_strings() -> list[str]:
    with open(TRICKY_STRINGS, encoding="utf-8") as file:
        return [json.loads(line) for line in file if line.strip()]


def _exact_ids(tokenizer: Tokenizer, texts: list[str]) -> list[list[int]]:
    encodings = tokenizer.backend.encode_batch_fast(texts, add_special_tokens=False)
    return [encoding.ids for encoding in encodings]


def _assert_fast_equals_exact(tokenizer: Tokenizer, texts: list[str]) -> None:
    assert tokenizer.encode_ids(texts) == _exact_ids(tokenizer, texts)
    pairs = list(zip(texts, reversed(texts), strict=True))
    for max_length in (8, 64, None):
        truncation = max_length is not None
        fast = tokenizer(pairs, max_length=max_length, truncation=truncation)
        # return_offsets=True takes the exact pipeline on whole texts.
        exact = tokenizer(pairs, max_length=max_length, truncation=truncation, return_offsets=True)
        assert fast["input_ids"] == exact["input_ids"]
        assert fast["token_type_ids"] == exact["token_type_ids"]


@pytest.mark.parametrize("lowercase", [True, False])
def test_fast_path_equals_exact_pipeline_on_tricky_strings(tmp_path, lowercase):
    tricky = _tricky_strings()
    # Words of the strings themselves make a vocabulary that covers them in several ways.
    words = {word for text in tricky for word in text.split()}
    pieces = [*TINY_VOCAB, *sorted(words)[::2], *sorted({c for w in words for c in w})]
    tokenizer = Tokenizer.from_pretrained(
        write_vocab(tmp_path, list(dict.fromkeys(pieces))), lowercase=lowercase
    )
    _assert_fast_equals_exact(tokenizer, tricky)


def test_fast_path_equals_exact_pipeline_on_real_lines(tokenizer):
    paths = sorted(SHARED_ENGLISH.glob("*.txt.gz"))
    if not paths:
        pytest.skip(f"no English corpus under {SHARED_ENGLISH}")
    with gzip.open(paths[0], "rt", encoding="utf-8") as file:
        lines = [line for _, line in zip(range(NUM_REAL_LINES), file, strict=False)]
    real = Tokenizer(tokenizer.get_vocab() | {"the": 100, "##the": 101, "of": 102, "in": 103})
    _assert_fast_equals_exact(real, lines)


def test_cached_chunks_give_the_same_ids_as_fresh_ones(tokenizer):
    texts = ["hello world, unaffable!", "hello [MASK] world", "naive Café hello", "", "  \t\n"]
    # NUL separates texts inside the cache: texts holding it, alone or in a word, stay exact.
    texts += ["hello \x00 world", "\x00", "hel\x00lo x\x00", "\x00\x00 b"]
    first = tokenizer.encode_ids(texts)  # every chunk is a miss
    assert tokenizer.encode_ids(texts) == first  # every chunk is a hit
    assert tokenizer.encode_ids(list(reversed(texts))) == list(reversed(first))
    assert first == _exact_ids(tokenizer, texts)
    assert tokenizer.encode_ids([]) == []
    assert tokenizer.encode_ids([""]) == [[]]


def test_full_chunk_cache_starts_afresh_and_stays_exact(tokenizer):
    classes = character_classes()
    cache = ChunkCache(tokenizer.backend, classes.split_differs, classes.whitespace_chars, 4)
    texts = ["a b x", "1 hello world", "hello un world ! qqq", "b x"]
    for text in texts * 2:
        assert cache.encode([text]) == _exact_ids(tokenizer, [text])
        # Emptied whenever the next text's new chunks would not fit.
        assert len(cache) <= max(4, len(set(text.split())))


def test_texts_that_str_split_would_cut_differently_are_split_where_bert_splits(tokenizer):
    # BERT deletes U+000B and U+0085 (control characters) where str.split() would split.
    texts = ["hel\x0blo", "hello\x85world", "a\x1fb hello", "x\u3000hello\x0c"]
    assert tokenizer.encode_ids(texts) == _exact_ids(tokenizer, texts)
    assert tokenizer.convert_ids_to_tokens(tokenizer.encode_ids(texts)[0]) == ["hello"]
    classes = character_classes()
    cache = ChunkCache(tokenizer.backend, classes.split_differs, classes.whitespace_chars)
    cache.encode(texts)
    assert len(cache) == len({"hel\x0blo", "hello\x85world", "a\x1fb", "hello", "x", "hello\x0c"})
    assert set(classes.split_differs) == set("\x0b\x0c\x1c\x1d\x1e\x1f\x85")


def test_encode_ids_in_worker_processes_equals_one_process(tokenizer):
    texts = [f"hello world {i % 7} unaffable, naive!" for i in range(12_000)] + ["中国 σ"]
    assert tokenizer.encode_ids(texts, num_workers=2) == tokenizer.encode_ids(texts)


def test_tokenizer_pickles_without_its_cache(tokenizer):
    tokenizer.encode_ids(["hello world"])
    loaded = pickle.loads(pickle.dumps(tokenizer))
    assert loaded.encode_ids(["hello world"]) == tokenizer.encode_ids(["hello world"])


def test_a_repeated_piece_in_vocab_txt_names_both_lines(tmp_path):
    """The reference keeps a repeated piece's last line, leaving an id past the vocabulary's
    size (and past the embedding matrix of a model of that size): refused when read."""
    path = tmp_path / "vocab.txt"
    path.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nof\nthe\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab.txt:8: the piece 'the' repeats line 6"):
        read_vocab_file(path)
    with pytest.raises(ValueError, match=r"vocab.txt:8: the piece 'the' repeats line 6"):
        Tokenizer.from_pretrained(path)
    path.write_text("[PAD]\n\n[UNK]\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="2 blank lines"):
        read_vocab_file(path)


def test_a_text_that_is_not_utf8_is_refused_in_one_line_with_its_bytes(tokenizer):
    """Bytes that are not UTF-8 reach Python as lone surrogates (PEP 383: argv, or a stream read
    with surrogateescape); the backend's TypeError becomes a ValueError that shows them."""
    bad = "\udce8abc [MASK]"  # b"\xe8abc [MASK]" decoded with surrogateescape
    message = r"the text '\\xe8abc \[MASK\]' is not UTF-8 \(at character 1\)"
    with pytest.raises(ValueError, match=message):
        tokenizer(bad)
    with pytest.raises(ValueError, match=message):
        tokenizer(["hello", bad], return_offsets=True)
    with pytest.raises(ValueError, match=message):
        tokenizer("hello", bad)
    with pytest.raises(ValueError, match=r"'a\\ud800' is not UTF-8"):
        tokenizer.tokenize("a\ud800")
    with pytest.raises(TypeError):  # not a text at all: the backend's own error stays
        tokenizer([None])


def test_a_mostly_unknown_input_gets_a_warning_with_its_share(tokenizer):
    """[MASK] and the other special tokens are left out of the share; from half on it warns."""
    assert tokenizer.unknown_share(["hello world"]) == 0.0
    assert tokenizer.unknown_share(["zzz hello [MASK]"]) == 0.5
    assert tokenizer.unknown_share([("zzz", "hello qqq")]) == pytest.approx(2 / 3)
    assert tokenizer.unknown_share([""]) == 0.0
    assert tokenizer.mostly_unknown_warning(["hello world zzz"]) is None
    warning = tokenizer.mostly_unknown_warning(["zzz yyy hello [MASK]", "qqq"])
    assert warning == (
        "75% of the input's pieces are [UNK] for this model's vocabulary (is it the model for "
        "this language?)"
    )


def test_the_stored_character_classes_are_the_computed_ones() -> None:
    """Loading a tokenizer reads the classes stored for this Python's Unicode version; they must
    be what the code computes from `unicodedata` (tools/store_character_classes.py rewrites
    them)."""
    path = stored_classes_path()
    if not path.is_file():
        pytest.skip(f"no classes stored for Unicode {unicodedata.unidata_version}: computed")
    assert character_classes() == compute_character_classes()
