"""The LSTM-era configs (`core.lstm_config`): config.json round trips, presets, validation, and
ELMo's character vocabulary; the char CNN on Chinese pieces."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from bertlab.core.lstm_config import (
    BEGIN_OF_CONTINUATION,
    BEGIN_OF_WORD,
    CHARACTER_PADDING,
    END_OF_PIECE,
    NUM_CHARACTER_MARKERS,
    AwdLstmConfig,
    ElmoConfig,
    NnlmConfig,
    character_vocabulary,
    lstm_config_from_dict,
    piece_character_ids,
    pieces_from_character_ids,
)
from bertlab.network.elmo import ElmoForLanguageModeling

pytestmark = pytest.mark.usefixtures("one_thread")

PRESETS = [
    NnlmConfig.brown(),
    NnlmConfig.ap_news(),
    NnlmConfig.cpu(),
    NnlmConfig.tiny(),
    ElmoConfig.small(),
    ElmoConfig.original(),
    ElmoConfig.cpu(),
    ElmoConfig.tiny(),
    AwdLstmConfig.paper(),
    AwdLstmConfig.cpu(),
    AwdLstmConfig.tiny(),
]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.mark.parametrize("config", PRESETS, ids=lambda config: repr(config)[:40])
def test_every_preset_round_trips_through_config_json(config, tmp_path) -> None:
    path = tmp_path / "config.json"
    config.to_json_file(path)
    values = json.loads(path.read_text())
    assert values["architecture"] == config.architecture
    assert lstm_config_from_dict(values) == config
    assert type(config).from_json_file(path) == config


def test_the_presets_are_the_papers_sizes() -> None:
    brown = NnlmConfig.brown()
    assert (brown.ngram_order, brown.hidden_size, brown.embedding_size) == (5, 50, 30)
    assert brown.use_direct_connections and brown.context_size == 4
    small = ElmoConfig.small()
    assert (small.lstm_hidden_size, small.projection_size, small.num_hidden_layers) == (
        1024,
        128,
        2,
    )
    assert small.num_char_filters == 2048 and small.num_highway_layers == 1
    paper = AwdLstmConfig.paper()
    assert (paper.embedding_size, paper.hidden_size, paper.num_hidden_layers) == (400, 1150, 3)
    dropouts = (
        paper.output_dropout_prob,
        paper.hidden_dropout_prob,
        paper.input_dropout_prob,
        paper.embedding_dropout_prob,
        paper.weight_dropout_prob,
    )
    assert dropouts == (0.1, 0.15, 0.25, 0.02, 0.2)  # fastai's awd_lstm_lm_config
    assert (paper.ar_alpha, paper.tar_beta) == (2.0, 1.0)
    assert paper.layer_sizes() == [(400, 1150), (1150, 1150), (1150, 400)]
    for config in PRESETS:
        assert config.pad_token_id == 0
    assert NnlmConfig().vocab_size == ElmoConfig().vocab_size == AwdLstmConfig().vocab_size == 30522


def test_the_configs_and_names_load_without_torch() -> None:
    """What `--help` lists (the architectures' names) and the configs import no torch."""
    code = (
        "import sys; from bertlab.core.lstm_config import LM_ARCHITECTURE_NAMES, LM_CONFIGS; "
        "assert 'torch' not in sys.modules, 'torch loaded'; print(*LM_ARCHITECTURE_NAMES)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["nnlm", "elmo", "awd-lstm"]


def test_unknown_keys_are_kept_and_another_architecture_is_refused() -> None:
    values = NnlmConfig.tiny().to_dict() | {"note": "kept"}
    config = NnlmConfig.from_dict(values)
    assert config.extra == {"note": "kept"} and config.to_dict()["note"] == "kept"
    with pytest.raises(ValueError, match="not a elmo config: architecture is 'nnlm'"):
        ElmoConfig.from_dict(values)
    with pytest.raises(ValueError, match="names architecture 'bert'"):
        lstm_config_from_dict({"architecture": "bert"})


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: NnlmConfig(ngram_order=1), "ngram_order must be at least 2, got 1"),
        (
            lambda: NnlmConfig(hidden_size=0),
            r"NnlmConfig.hidden_size must be a positive integer, got 0",
        ),
        (lambda: NnlmConfig(vocab_size=10, pad_token_id=10), "pad_token_id 10 outside"),
        (lambda: ElmoConfig(projection_size=2048), "projection_size 2048 must not exceed"),
        (
            lambda: ElmoConfig(dropout_prob=1.0),
            r"ElmoConfig.dropout_prob must be in \[0, 1\), got 1.0",
        ),
        (lambda: ElmoConfig(use_char_cnn=True), "use_char_cnn needs the character vocabulary"),
        (lambda: ElmoConfig(char_filters=((60, 8),)), "char filter width 60 exceeds"),
        (lambda: AwdLstmConfig(weight_dropout_prob=-0.1), "weight_dropout_prob must be in"),
        (lambda: AwdLstmConfig(ar_alpha=-1), r"ar_alpha must be >= 0, got -1"),
        (lambda: AwdLstmConfig(num_hidden_layers=True), "num_hidden_layers must be a positive"),
    ],
)
def test_a_bad_value_is_refused_by_name(build, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()


# --- ELMo's character vocabulary ---------------------------------------------------------------


def test_the_character_vocabulary_comes_from_the_pieces_without_bytes() -> None:
    pieces = [*SPECIAL, "un", "##aff", "##able", "中", "##国"]
    characters = character_vocabulary(pieces)
    assert characters == (*SPECIAL, "u", "n", "a", "f", "b", "l", "e", "中", "国")
    rows = piece_character_ids(pieces, characters, width=6)
    first = NUM_CHARACTER_MARKERS
    assert rows[2] == [BEGIN_OF_WORD, first + 2, END_OF_PIECE, 0, 0, 0]  # [CLS]: one symbol
    assert rows[5] == [BEGIN_OF_WORD, first + 5, first + 6, END_OF_PIECE, 0, 0]  # un
    assert rows[6] == [BEGIN_OF_CONTINUATION, first + 7, first + 8, first + 8, END_OF_PIECE, 0]
    zhong = characters.index("中") + first
    assert rows[8] == [BEGIN_OF_WORD, zhong, END_OF_PIECE, 0, 0, 0]  # one id, not 3 UTF-8 bytes
    assert rows[9][0] == BEGIN_OF_CONTINUATION and rows[9][1] == zhong + 1
    assert pieces_from_character_ids(rows, characters) == pieces
    cut = piece_character_ids(["##able"], characters, width=4)
    assert cut == [[BEGIN_OF_CONTINUATION, first + 7, first + 9, END_OF_PIECE]]  # "##ab"
    assert pieces_from_character_ids(cut, characters) == ["##ab"]
    with pytest.raises(ValueError, match="'x' has a character outside"):
        piece_character_ids(["x"], characters, width=6)


def chinese_pieces() -> list[str]:
    hanzi = "中国人民大学生天地上下"
    pieces = SPECIAL + list(hanzi) + [f"##{character}" for character in hanzi] + ["a", "##b"]
    return pieces + [f"w{index}" for index in range(40 - len(pieces))]


def test_the_char_cnn_reads_chinese_pieces_and_is_saved_with_its_characters(tmp_path) -> None:
    pieces = chinese_pieces()
    config = ElmoConfig.tiny().with_characters(pieces)
    assert config.vocab_size == 40 and "中" in config.characters and "#" not in config.characters
    assert config.max_characters_per_token == 3 + 2  # "w10": 3 characters and 2 markers
    torch.manual_seed(0)
    model = ElmoForLanguageModeling(config, pieces).eval()
    table = model.token_embedder.char_cnn.piece_characters
    assert table.shape == (40, config.max_characters_per_token)
    zhong, continued = pieces.index("中"), pieces.index("##中")
    assert table[zhong, 1] == table[continued, 1]  # the same character ...
    assert table[zhong, 0] != table[continued, 0]  # ... starting a word, or inside one
    assert table[zhong, 3] == CHARACTER_PADDING
    ids = torch.tensor([[2, zhong, continued, pieces.index("国"), 3]])
    with torch.no_grad():
        tokens = model.token_embedder(ids)
        output = model(ids)
    assert not torch.allclose(tokens[0, 1], tokens[0, 2])
    assert output.logits.shape == (1, 5, 40) and output.layers[0].shape == (1, 5, 16)
    model.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["characters"] == list(config.characters) and saved["use_char_cnn"]
    loaded = ElmoForLanguageModeling.from_pretrained(tmp_path).eval()
    assert torch.equal(loaded.token_embedder.char_cnn.piece_characters, table)
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, output.logits, rtol=0, atol=0)


def test_the_char_cnn_needs_the_pieces() -> None:
    config = ElmoConfig.tiny().with_characters(chinese_pieces())
    with pytest.raises(ValueError, match="needs the WordPiece vocabulary"):
        ElmoForLanguageModeling(config)
