"""The models that ship with bertlab (`bertlab:NAME`): they load by name in bertlab and from their
folder in transformers, strictly, with the same outputs; their cards say how they were made."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors import safe_open

from bertlab import hub
from bertlab.inspection import fill_mask, load_for_fill_mask
from bertlab.modeling import BertForPreTraining
from bertlab.tokenization import Tokenizer

pytestmark = pytest.mark.golden

SHIPPED = hub.shipped_models()
MAX_BYTES = 15_000_000  # "about 10 MB" each: BERT-mini in fp16 is 11 MB
# What a model of movie reviews puts in "The movie was [MASK]." (the README's hour: great, good,
# awful); a model of Wikipedia says released, made.
REVIEW_WORDS = {"great", "good", "bad", "awful", "terrible", "horrible", "excellent", "boring"}


def test_the_english_and_chinese_models_ship() -> None:
    assert {"bertlab:mini-reviews-en", "bertlab:mini-reviews-zh"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_model_is_small_and_half_precision(name) -> None:
    folder = hub.resolve(name)
    weights = folder / "model.safetensors"
    assert weights.stat().st_size < MAX_BYTES
    with safe_open(weights, "pt") as tensors:
        dtypes = {tensors.get_slice(key).get_dtype() for key in tensors.keys()}  # noqa: SIM118
    assert dtypes <= {"F16", "I64"}, dtypes
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert config["hidden_dropout_prob"] == 0.1  # BERT's dropout back for fine-tuning


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_model_loads_in_transformers_with_the_same_outputs(name) -> None:
    transformers = pytest.importorskip("transformers")
    folder = hub.resolve(name)
    ours = BertForPreTraining.from_pretrained(name).eval()
    theirs, info = transformers.BertForMaskedLM.from_pretrained(
        folder, output_loading_info=True, torch_dtype=torch.float32
    )
    theirs.eval()
    assert not info["missing_keys"] and not info["mismatched_keys"]
    tokenizer = Tokenizer.from_pretrained(name)
    ids = torch.tensor([tokenizer("The movie was [MASK].")["input_ids"]])
    with torch.no_grad():
        mine = ours(input_ids=ids).mlm_logits
        reference = theirs(input_ids=ids).logits
    assert torch.allclose(mine, reference, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", SHIPPED)
def test_a_shipped_models_card_gives_the_command_the_data_and_the_license(name) -> None:
    card = (hub.resolve(name) / "README.md").read_text(encoding="utf-8")
    short = name.removeprefix(hub.SHIPPED_PREFIX)
    assert f"## Shipped with bertlab as `{name}`" in card
    assert "bertlab pretrain --corpus " in card and f"--out runs/models/{short}" in card
    assert "### Data and license" in card
    assert "held-out mlm_accuracy" in card and "| still on the unigram plateau | False |" in card


def test_the_english_model_fills_in_review_words() -> None:
    if "bertlab:mini-reviews-en" not in SHIPPED:
        pytest.skip("bertlab:mini-reviews-en is not shipped")
    model, tokenizer = load_for_fill_mask("bertlab:mini-reviews-en")
    (answers,) = fill_mask(model, tokenizer, "The movie was [MASK].", top_k=5)
    words = set(answers.tokens)
    assert len(words & REVIEW_WORDS) >= 3, words
