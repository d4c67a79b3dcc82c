"""`bertlab.load` and `PretrainedBert`: prediction, features, freezing and fine-tuning, on the
tiny model of the offline Hub cache."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

import bertlab
from bertlab.config import FinetuneConfig
from bertlab.inspection import fill_mask
from bertlab.modeling import BertForPreTraining, BertModel
from bertlab.tokenization import Tokenizer

TRAIN = [
    ("a gripping , funny film", "1"),
    ("dull and far too long", "0"),
    ("a beautiful story", "1"),
    ("an awful , boring movie", "0"),
]


pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_pretrained_model_predicts_masks_as_fill_mask_does(hub_cache, hub_model_folder):
    bert = bertlab.load("bert-base-uncased")
    assert isinstance(bert.model, BertForPreTraining) and bert.task is None
    model = BertForPreTraining.from_pretrained(hub_model_folder).eval()
    expected = fill_mask(model, Tokenizer.from_pretrained(hub_model_folder), "the [MASK] sat .", 3)
    (got,) = bert.predict("the [MASK] sat .", top_k=3)
    assert [p.tokens for p in got] == [p.tokens for p in expected]
    assert len(bert.predict(["a [MASK] .", "the [MASK] [MASK] ."])[1]) == 2


def test_embeddings_are_the_encoders_states_and_ignore_padding(hub_cache, hub_model_folder):
    bert = bertlab.load("google-bert/bert-base-uncased")
    encoder = BertModel.from_pretrained(hub_model_folder).eval()
    tokenizer = Tokenizer.from_pretrained(hub_model_folder)
    texts = ["a good film", "the cat sat on the mat and the dog was very good"]
    for index, text in enumerate(texts):
        ids = torch.tensor([tokenizer(text)["input_ids"]])
        with torch.no_grad():
            output = encoder(ids, output_hidden_states=True)
        batched = {
            pooling: bert.embed(texts, pooling=pooling)[index]
            for pooling in ("cls", "mean", "last", "pooler")
        }
        torch.testing.assert_close(
            batched["last"], output.last_hidden_state[0, -1], atol=1e-5, rtol=0
        )
        torch.testing.assert_close(
            batched["cls"], output.last_hidden_state[0, 0], atol=1e-5, rtol=0
        )
        torch.testing.assert_close(
            batched["mean"], output.last_hidden_state[0].mean(0), atol=1e-5, rtol=0
        )
        torch.testing.assert_close(batched["pooler"], output.pooler_output[0], atol=1e-5, rtol=0)
        tokens = bert.embed(texts, pooling="tokens", layer=1)[index]
        torch.testing.assert_close(tokens, output.hidden_states[1][0], atol=1e-5, rtol=0)
    assert bert.embed("one text").shape == (1, encoder.config.hidden_size)


def test_a_causal_model_embeds_each_text_by_its_last_token(tmp_path, hub_model_folder):
    """A left-to-right model's [CLS] has seen only itself: embed gave every text one vector."""
    causal = tmp_path / "causal"
    shutil.copytree(hub_model_folder, causal)
    config = json.loads((causal / "config.json").read_text())
    (causal / "config.json").write_text(json.dumps(config | {"is_causal": True}))
    bert = bertlab.load(causal)
    texts = ["a good film", "the cat sat on the mat"]
    vectors = bert.embed(texts)  # the default for a causal model: "last"
    assert torch.equal(vectors, bert.embed(texts, pooling="last"))
    assert not torch.allclose(vectors[0], vectors[1])
    for pooling in ("cls", "pooler"):
        with pytest.raises(ValueError, match="same vector for every text"):
            bert.embed(texts, pooling=pooling)
    assert not torch.allclose(*bert.embed(texts, pooling="mean"))


def test_bad_pooling_or_layer_is_refused(hub_cache):
    bert = bertlab.load("bert-base-uncased")
    with pytest.raises(ValueError, match="unknown pooling 'max'"):
        bert.embed("a film", pooling="max")
    with pytest.raises(ValueError, match="hidden states 0..2, not 3"):
        bert.embed("a film", layer=3)
    with pytest.raises(ValueError, match="'pooler' reads the last layer only, not layer 1"):
        bert.embed("a film", pooling="pooler", layer=1)


def _trainable(module: torch.nn.Module) -> bool:
    return all(parameter.requires_grad for parameter in module.parameters())


def test_freeze_and_unfreeze_by_layer(hub_cache):
    classifier = bertlab.load("bert-base-uncased", task="sst2")
    bert, total = classifier.model.bert, classifier.num_parameters
    classifier.freeze()
    assert not any(p.requires_grad for p in bert.parameters())
    assert _trainable(classifier.model.classifier)
    classifier.unfreeze(1)
    assert [_trainable(layer) for layer in bert.encoder.layer] == [False, True]
    assert _trainable(bert.pooler) and not _trainable(bert.embeddings)
    classifier.unfreeze()
    assert classifier.trainable_parameters == total
    classifier.freeze(1)
    assert [_trainable(layer) for layer in bert.encoder.layer] == [False, True]
    assert not _trainable(bert.embeddings)
    with pytest.raises(ValueError, match=r"num_layers must be in 0..2, got 3"):
        classifier.freeze(3)


def test_fit_trains_unfrozen_layers_keeps_the_best_and_reloads(hub_cache, tmp_path):
    classifier = bertlab.load("bert-base-uncased", task="sst2").freeze(1)
    frozen_before = classifier.model.bert.encoder.layer[0].output.dense.weight.clone()
    top_before = classifier.model.bert.encoder.layer[1].output.dense.weight.clone()
    config = FinetuneConfig(num_train_epochs=2, batch_size=2, learning_rate=1e-3)
    result = classifier.fit(TRAIN, TRAIN, out=tmp_path / "run", config=config)
    layers = classifier.model.bert.encoder.layer
    assert torch.equal(layers[0].output.dense.weight, frozen_before)
    assert not torch.equal(layers[1].output.dense.weight, top_before)
    assert 0 <= result.best_metrics["accuracy"] <= 1
    card = (tmp_path / "run" / "best" / "README.md").read_text(encoding="utf-8")
    assert "the embeddings, layer 1" in card and "pipeline_tag: text-classification" in card
    best = bertlab.load(tmp_path / "run" / "best")
    assert best.task.name == "sst2" and best.model.id2label == {0: "0", 1: "1"}
    assert all(label in ("0", "1") for label in best.predict(["a good film", "a bad film"]))


def test_learning_rates_show_each_group_and_fit_takes_the_strategy(hub_cache, tmp_path):
    classifier = bertlab.load("bert-base-uncased", task="sst2")
    config = FinetuneConfig(
        num_train_epochs=3,
        batch_size=2,
        learning_rate=1e-3,
        layerwise_lr_decay=0.5,
        schedule="slanted-triangular",
        do_gradual_unfreezing=True,
    )
    assert classifier.learning_rates(config) == [
        ("embeddings", 2.5e-4),
        ("layer 1", 5e-4),
        ("layer 2", 1e-3),
        ("pooler", 1e-3),
        ("head", 1e-3),
    ]
    embeddings = classifier.model.bert.embeddings.word_embeddings.weight.clone()
    result = classifier.fit(TRAIN, TRAIN, out=tmp_path / "run", config=config)
    # Three epochs reach the head, layer 2 with the pooler, and layer 1: never the embeddings.
    assert torch.equal(classifier.model.bert.embeddings.word_embeddings.weight, embeddings)
    assert result.strategy["learning_rates"]["layer 1"] == 5e-4
    assert classifier.trainable_parameters == classifier.num_parameters
    card = (tmp_path / "run" / "best" / "README.md").read_text(encoding="utf-8")
    assert "| gradual unfreezing | one layer group per epoch from the top |" in card


def test_save_writes_a_folder_that_loads_with_the_same_predictions(hub_cache, tmp_path):
    classifier = bertlab.load("bert-base-uncased", task="classification", labels=["neg", "pos"])
    classifier.save(tmp_path / "saved")
    again = bertlab.load(tmp_path / "saved")
    texts = ["a good film", ("a film", "a story")]
    assert again.task.name == "classification"
    assert again.predict(texts) == classifier.predict(texts)


def test_a_new_label_head_needs_its_labels(hub_cache):
    with pytest.raises(ValueError, match=r"give labels=\[...\] for a new conll2003 head"):
        bertlab.load("bert-base-uncased", task="conll2003")
    with pytest.raises(ValueError, match=r"give labels=\[...\] for a new classification head"):
        bertlab.load("bert-base-uncased", task="classification")
    tagger = bertlab.load("bert-base-uncased", task="conll2003", labels=["O", "B-PER", "I-PER"])
    assert tagger.model.num_labels == 3


def test_an_encoder_without_heads_embeds_but_does_not_predict(
    hub_cache, hub_model_folder, tmp_path
):
    BertModel.from_pretrained(hub_model_folder).save_pretrained(tmp_path / "encoder")
    Tokenizer.from_pretrained(hub_model_folder).save_pretrained(tmp_path / "encoder")
    encoder = bertlab.load(tmp_path / "encoder")
    assert isinstance(encoder.model, BertModel)
    assert encoder.embed(["a film"]).shape[0] == 1
    with pytest.raises(ValueError, match="no masked-LM head and no task head"):
        encoder.predict("a [MASK] film")
    with pytest.raises(ValueError, match="has no task head; load it with task="):
        encoder.fit(TRAIN, out=tmp_path / "run")


def test_a_saved_regression_head_predicts_scores(hub_cache, tmp_path):
    regressor = bertlab.load("bert-base-uncased", task="stsb")
    regressor.save(tmp_path / "stsb")
    (score,) = bertlab.load(tmp_path / "stsb").predict([("a film", "a movie")])
    assert isinstance(score, float)
    generic = tmp_path / "generic"
    bertlab.load("bert-base-uncased", task="classification", labels=["a", "b"]).save(generic)
    assert bertlab.load(generic).predict(["a film"])[0] in ("a", "b")
