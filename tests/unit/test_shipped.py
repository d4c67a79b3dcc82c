"""The shipped models' table (`bertlab.core.shipped`) is what their cards say: the figures, the
words and the command of each card in bertlab/models/NAME are its row's, and the demo names
rows of it."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from bertlab.apps.demo.config import DATA_DIR, RECIPES
from bertlab.core.config import PRESETS
from bertlab.core.hub import SHIPPED_DIR
from bertlab.core.model_card import CARD_NAME
from bertlab.core.shipped import SHIPPED_MODELS, shipped_model

THOUSANDS = re.compile(r"\b\d{1,3}(?:,\d{3})+\b")  # "100,000": the figures a text cites


def card(name: str) -> str:
    return (SHIPPED_DIR / name / CARD_NAME).read_text(encoding="utf-8")


def unwrapped(text: str) -> str:
    """The card's text with its line breaks as spaces: the shipping note wraps long lines."""
    return " ".join(text.split())


def test_every_shipped_folder_is_a_row_and_every_row_a_folder():
    folders = sorted(path.name for path in SHIPPED_DIR.iterdir() if (path / CARD_NAME).is_file())
    assert folders == sorted(model.name for model in SHIPPED_MODELS)


@pytest.mark.parametrize("model", SHIPPED_MODELS, ids=lambda model: model.name)
def test_a_cards_figures_are_its_rows(model):
    text = card(model.name)
    assert f"language:\n- {model.lang}\n" in text
    assert f"\n- {model.documents:,} documents, " in text and f"(language: {model.lang})" in text
    assert f"| budget recipe | {model.budget_minutes:g} min: BERT-{model.shape}, " in text
    corpus_line = next(line for line in text.splitlines() if line.startswith("- corpus: "))
    assert re.findall(r"`([^`]+)` \(", corpus_line) == [
        path.split("/")[-1] for path in model.corpus
    ]
    config = json.loads((SHIPPED_DIR / model.name / "config.json").read_text(encoding="utf-8"))
    layers, hidden, heads = PRESETS[model.shape]
    assert (config["num_hidden_layers"], config["hidden_size"]) == (layers, hidden)
    assert config["num_attention_heads"] == heads
    assert f"({layers} layers of {hidden})" in model.description


@pytest.mark.parametrize("model", SHIPPED_MODELS, ids=lambda model: model.name)
def test_a_cards_words_and_command_are_its_rows(model):
    text = unwrapped(card(model.name))
    assert f"## Shipped with bertlab as `bertlab:{model.name}` {model.description}. " in text
    assert f"```bash {model.command()} ```" in text
    assert f"### Data and license {model.license}" in text


def demo_documents(lang: str) -> int:
    """The documents of the demo's own corpus for `lang` (blank lines between documents)."""
    text = gzip.open(DATA_DIR / RECIPES[lang].corpus, "rt", encoding="utf-8").read()
    return sum(1 for document in text.split("\n\n") if document.strip())


@pytest.mark.parametrize("lang", sorted(RECIPES))
def test_the_demo_names_a_row_whose_words_cite_the_cards_figures(lang):
    model = shipped_model(RECIPES[lang].shipped_model)
    assert model.lang == lang
    # What the demo's report says of the model counts its corpus or the demo's own.
    stated = set(THOUSANDS.findall(card(model.name))) | {f"{demo_documents(lang):,}"}
    assert set(THOUSANDS.findall(model.about)) <= stated, model.about
    assert set(THOUSANDS.findall(model.description)) <= stated | {f"{model.documents:,}"}


def test_an_unknown_name_names_the_shipped_models():
    with pytest.raises(KeyError, match="mini-reviews-en"):
        shipped_model("bertlab:no-such-model")
