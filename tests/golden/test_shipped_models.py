"""The models that ship with bertlab (`bertlab:NAME`): they load by name in bertlab and from their
folder in transformers, strictly, with the same outputs; their cards say how they were made."""

from __future__ import annotations

import itertools
import json
import statistics

import numpy as np
import pytest
import torch
from safetensors import safe_open

from bertlab.core import hub
from bertlab.network.bert import BertForPreTraining, BertModel
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.use.inspection import fill_mask, load_for_fill_mask
from bertlab.use.language_model import score_texts
from bertlab.use.neighbours import word_vectors_in

pytestmark = pytest.mark.golden

SHIPPED = hub.shipped_models()
MAX_BYTES = 15_000_000  # "about 10 MB" each: BERT-mini in fp16 is 11 MB
# What a model of movie reviews puts in "The movie was [MASK]." (the README's hour: great, good,
# awful); a model of Wikipedia says released, made.
REVIEW_WORDS = {"great", "good", "bad", "awful", "terrible", "horrible", "excellent", "boring"}
RIVER_BANK = (
    "He sat on the bank of the river and watched the water.",
    "The boat drifted toward the muddy bank of the stream.",
    "They had a picnic on the grassy bank of the river.",
)
MONEY_BANK = (
    "She asked the bank for a loan to buy the house.",
    "The bank raised its interest rates again.",
    "He deposited the money at the bank on Monday.",
)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


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


@pytest.mark.parametrize(
    ("name", "real", "shuffled"),
    [
        (
            "bertlab:mini-reviews-en",
            "The acting was terrible and the plot made no sense.",
            "made no acting the terrible and was The sense plot.",
        ),
        (
            "bertlab:mini-reviews-en",
            "I would not recommend this film to anyone.",
            "this would film not I recommend anyone to.",
        ),
        ("bertlab:mini-reviews-zh", "我喜欢吃苹果。", "苹欢喜我果吃。"),
        ("bertlab:mini-reviews-zh", "这家酒店的服务非常好。", "非常家服店的酒这好务。"),
    ],
)
def test_a_shipped_model_ranks_a_sentence_above_its_shuffled_copy(name, real, shuffled) -> None:
    """What a few CPU-minutes cannot show (0.01 nats apart): docs/word2vec-to-bert.md."""
    if name not in SHIPPED:
        pytest.skip(f"{name} is not shipped")
    model, tokenizer = load_for_fill_mask(name)
    first, second = score_texts(model, tokenizer, [real, shuffled])
    assert first.total > second.total + 10, (first.total, second.total)


def test_the_english_models_two_senses_of_bank_are_further_apart_than_one_senses_uses() -> None:
    """The lectures' polysemy, on average over 3 + 3 sentences (docs/word2vec-to-bert.md)."""
    if "bertlab:mini-reviews-en" not in SHIPPED:
        pytest.skip("bertlab:mini-reviews-en is not shipped")
    encoder = BertModel.from_pretrained("bertlab:mini-reviews-en").eval()
    tokenizer = Tokenizer.from_pretrained("bertlab:mini-reviews-en")
    with torch.no_grad():
        river, money = (
            [o.vector for o in word_vectors_in(encoder, tokenizer, sentences, "bank")]
            for sentences in (RIVER_BANK, MONEY_BANK)
        )
    same = [cosine(a, b) for group in (river, money) for a, b in itertools.combinations(group, 2)]
    across = [cosine(a, b) for a in river for b in money]
    assert len(same) == 6 and len(across) == 9
    assert statistics.mean(same) > statistics.mean(across) + 0.05


def test_serve_takes_a_shipped_model_by_name() -> None:
    pytest.importorskip("fastapi", reason="`bertlab serve` needs fastapi")
    from bertlab.apps.serve.server import load_models
    from bertlab.cli.serve import model_arguments

    if "bertlab:mini-reviews-en" not in SHIPPED:
        pytest.skip("bertlab:mini-reviews-en is not shipped")
    ((name, directory),) = model_arguments(["bertlab:mini-reviews-en"])
    (served,) = load_models([(name, directory)])
    assert served.name == "mini-reviews-en"
    assert {"fill-mask", "score", "embed"} <= set(served.capabilities)
