"""`bertlab embed` (`extract_features`) against `transformers.BertModel(output_hidden_states=True)`
on the same input: the same hidden states of the same layers (must-show 2), and the files load
back by their documented layout."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from bertlab.network.bert import BertModel
from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS, Tokenizer
from bertlab.use.features import extract_features, load_features, save_features

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.golden

ATOL = 1e-5
WORDS = "the river bank flooded loan approved by a ##s ##ing un ##aff ##able , .".split()
TEXTS = [
    "The river banks flooded.",
    ("The bank approved a loan", "unaffable, flooding"),
    "a bank",
    "Approved by the bank, the loan flooded a river bank.",
]
LAYERS = (0, 1, -2, -1)


@pytest.fixture
def model_and_tokenizer(tiny_config):
    tokenizer = Tokenizer({token: index for index, token in enumerate([*SPECIAL_TOKENS, *WORDS])})
    torch.manual_seed(0)
    model = BertModel(tiny_config.replace(vocab_size=tokenizer.vocab_size)).eval()
    return model, tokenizer


def _reference(model: BertModel, tokenizer: Tokenizer, text) -> tuple[list[int], torch.Tensor]:
    """HF's hidden states of one text alone (no padding): (L, J, H)."""
    encoding = tokenizer(*(text if isinstance(text, tuple) else (text,)))
    reference = transformers.BertModel(transformers.BertConfig(**model.config.to_dict())).eval()
    reference.load_state_dict(model.state_dict(), strict=True)
    with torch.no_grad():
        output = reference(
            input_ids=torch.tensor([encoding["input_ids"]]),
            token_type_ids=torch.tensor([encoding["token_type_ids"]]),
            output_hidden_states=True,
        )
    stacked = torch.stack([output.hidden_states[layer][0] for layer in LAYERS], dim=1)
    return encoding["input_ids"], stacked


def test_piece_features_equal_transformers_hidden_states(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    features = extract_features(model, tokenizer, TEXTS, LAYERS, "pieces", batch_size=3)
    assert features.vectors.shape[1:] == (len(LAYERS), model.config.hidden_size)
    for index, text in enumerate(TEXTS):
        ids, expected = _reference(model, tokenizer, text)
        assert features.records[index]["units"] == tokenizer.convert_ids_to_tokens(ids)
        torch.testing.assert_close(
            torch.from_numpy(features.rows(index)), expected, rtol=0, atol=ATOL
        )


def test_word_features_are_the_first_piece_or_the_mean_of_the_pieces(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    text = "The river banks, unaffable."
    ids, expected = _reference(model, tokenizer, text)
    pieces = tokenizer.convert_ids_to_tokens(ids)
    assert pieces == [
        "[CLS]",
        "the",
        "river",
        "bank",
        "##s",
        ",",
        "un",
        "##aff",
        "##able",
        ".",
        "[SEP]",
    ]
    first = extract_features(model, tokenizer, [text], LAYERS, "first")
    mean = extract_features(model, tokenizer, [text], LAYERS, "mean-pieces")
    assert first.records[0]["units"] == ["The", "river", "banks", ",", "unaffable", "."]
    starts = [1, 2, 3, 5, 6, 9]
    torch.testing.assert_close(torch.from_numpy(first.vectors), expected[starts], rtol=0, atol=ATOL)
    torch.testing.assert_close(
        torch.from_numpy(mean.vectors[2]), expected[3:5].mean(0), rtol=0, atol=ATOL
    )
    cls = extract_features(model, tokenizer, [text], LAYERS, "cls")
    torch.testing.assert_close(torch.from_numpy(cls.vectors[0]), expected[0], rtol=0, atol=ATOL)


@pytest.mark.parametrize("file_format", ["npy", "safetensors"])
def test_the_files_load_back_by_their_documented_layout(model_and_tokenizer, tmp_path, file_format):
    model, tokenizer = model_and_tokenizer
    features = extract_features(model, tokenizer, TEXTS, (-1, -2), "first")
    path = save_features(features, tmp_path, file_format, {"model": "tiny"})
    assert path.name == f"features.{file_format}"
    meta = json.loads((tmp_path / "features.json").read_text(encoding="utf-8"))
    assert meta["shape"] == list(features.vectors.shape) and meta["layers"] == [-1, -2]
    assert meta["axes"] == ["row", "layer", "hidden"] and meta["model"] == "tiny"
    lines = (tmp_path / "index.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["text"] for r in records] == [t if isinstance(t, str) else t[0] for t in TEXTS]
    assert records[1]["text_b"] == "unaffable, flooding" and 1 in records[1]["segments"]
    if file_format == "npy":  # plain numpy reads it
        array = np.load(tmp_path / "features.npy")
    else:
        from safetensors.numpy import load_file

        array = load_file(str(tmp_path / "features.safetensors"))["features"]
    for record in records:  # rows start..end are the record's units
        assert record["end"] - record["start"] == len(record["units"])
    np.testing.assert_array_equal(array, features.vectors)
    loaded = load_features(tmp_path)
    np.testing.assert_array_equal(loaded.vectors, features.vectors)
    assert loaded.records == features.records and loaded.layers == (-1, -2)
