"""`bertlab.load` and `PretrainedBert`: prediction, features, freezing and fine-tuning, on the
tiny model of the offline Hub cache."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile

import pytest
import torch

import bertlab
from bertlab.core.config import BertConfig
from bertlab.core.finetune_config import FinetuneConfig
from bertlab.network.bert import BertForPreTraining, BertModel
from bertlab.network.heads import BertForSequenceClassification
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.finetuning.finetune import default_finetune_config
from bertlab.use.inspection import fill_mask

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
        tokens = bert.embed(texts, pooling="pieces", layer=1)[index]
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
    result = classifier.fit(TRAIN, dev=TRAIN, out=tmp_path / "run", config=config)
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
    result = classifier.fit(TRAIN, dev=TRAIN, out=tmp_path / "run", config=config)
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


def test_an_encoder_without_heads_embeds_predicts_nothing_until_fit_gives_it_a_head(
    hub_cache, hub_model_folder, tmp_path
):
    BertModel.from_pretrained(hub_model_folder).save_pretrained(tmp_path / "encoder")
    Tokenizer.from_pretrained(hub_model_folder).save_pretrained(tmp_path / "encoder")
    encoder = bertlab.load(tmp_path / "encoder")
    assert isinstance(encoder.model, BertModel)
    assert encoder.embed(["a film"]).shape[0] == 1
    with pytest.raises(ValueError, match="no masked-LM head and no task head"):
        encoder.predict("a [MASK] film")
    encoder.fit(TRAIN, config=FinetuneConfig(num_train_epochs=1, batch_size=4))
    assert isinstance(encoder.model, BertForSequenceClassification)
    assert encoder.predict(["a film"])[0] in ("0", "1")


def test_a_saved_regression_head_predicts_scores(hub_cache, tmp_path):
    regressor = bertlab.load("bert-base-uncased", task="stsb")
    regressor.save(tmp_path / "stsb")
    (score,) = bertlab.load(tmp_path / "stsb").predict([("a film", "a movie")])
    assert isinstance(score, float)
    generic = tmp_path / "generic"
    bertlab.load("bert-base-uncased", task="classification", labels=["a", "b"]).save(generic)
    assert bertlab.load(generic).predict(["a film"])[0] in ("a", "b")


# --- fit, Keras-style: fit(x, y) ----------------------------------------------------------------

TEXTS = [text for text, _ in TRAIN]
INT_LABELS = [int(label) for _, label in TRAIN]


def test_fit_puts_a_classification_head_on_a_pretrained_model_with_defaults_by_size(
    hub_cache, tmp_path, monkeypatch
):
    temporary = tmp_path / "temporary"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))  # where fit's run folder goes
    bert = bertlab.load("bert-base-uncased")  # hidden 32: BERT-Tiny's row, 1e-3 for 4 epochs
    assert isinstance(bert.model, BertForPreTraining)
    result = bert.fit(TEXTS, INT_LABELS)  # no out=, no config
    assert bert.task.name == "classification"
    assert isinstance(bert.model, BertForSequenceClassification)
    assert bert.model.id2label == {0: "0", 1: "1"}  # str(label), sorted
    assert result.epochs_run == 4 and result.strategy["learning_rates"]["head"] == 1e-3
    assert result.best_dir is None and list(temporary.iterdir()) == []  # the folder is gone
    assert all(label in ("0", "1") for label in bert.predict(["a good film", "a dull film"]))


def test_labels_of_any_type_are_named_by_str_sorted_when_they_sort(hub_cache):
    config = FinetuneConfig(num_train_epochs=1, batch_size=4)
    bert = bertlab.load("bert-base-uncased")
    bert.fit(TEXTS, [label == 1 for label in INT_LABELS], config=config)
    assert bert.model.id2label == {0: "False", 1: "True"}
    mixed = bertlab.load("bert-base-uncased")
    mixed.fit(TEXTS, ["b", 3, "a", 3], config=config)  # str and int do not sort: first seen
    assert mixed.model.id2label == {0: "b", 1: "3", 2: "a"}
    with pytest.raises(ValueError, match=r"label 'x' is not one of the head's labels \['0', '1'\]"):
        bertlab.load("bert-base-uncased", task="sst2").fit(TEXTS, [0, 1, "x", 1])


def test_the_old_positional_dev_is_refused_with_one_clear_message(hub_cache):
    bert = bertlab.load("bert-base-uncased", task="sst2")
    with pytest.raises(
        ValueError, match=r"pass the dev examples by keyword, fit\(train, dev=dev\)"
    ):
        bert.fit(TRAIN, TRAIN, out="never-written")
    with pytest.raises(ValueError, match="x has 4 inputs but y 3 labels"):
        bert.fit(TEXTS, INT_LABELS[:3])


def test_fit_refuses_no_examples_and_missing_labels_in_one_line(hub_cache):
    """fit([], []) failed with "id2label keys must be 0..C-1, got []"; a NaN label (pandas' empty
    cell) became a class 'nan' of its own."""
    bert = bertlab.load("bert-base-uncased")
    with pytest.raises(ValueError, match=r"^fit needs at least one labelled example; x is empty$"):
        bert.fit([], [])
    with pytest.raises(ValueError, match=r"^y\[2\] is nan, a missing value: every input needs"):
        bert.fit(TEXTS, [0, 1, float("nan"), 1])
    with pytest.raises(ValueError, match=r"^example 1's label is None, a missing value"):
        bert.fit([("good", 1), ("bad", None)])
    assert bert.task is None  # nothing was built


def test_fit_warns_of_one_class_and_of_texts_without_words_before_it_trains(hub_cache, caplog):
    """Both were trained without a word."""
    config = FinetuneConfig(num_train_epochs=1, batch_size=4)
    with caplog.at_level(logging.WARNING, logger="bertlab.training.finetuning.finetune"):
        bertlab.load("bert-base-uncased").fit(TEXTS, [1, 1, 1, 1], config=config)
    assert [r.getMessage() for r in caplog.records] == [
        "all 4 training labels are '1': a classifier learns nothing from one class; give "
        "examples of at least two labels"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="bertlab.training.finetuning.finetune"):
        bertlab.load("bert-base-uncased").fit(["  ", *TEXTS[1:]], INT_LABELS, config=config)
    assert [r.getMessage() for r in caplog.records] == [
        "1 of 4 training examples have no text (empty or whitespace only): they teach the "
        "model nothing; remove them or give their text"
    ]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="bertlab.training.finetuning.finetune"):
        bertlab.load("bert-base-uncased").fit(TEXTS, INT_LABELS, config=config)
    assert not caplog.records


def test_a_frozen_encoder_stays_frozen_and_its_weights_go_into_the_new_head(hub_cache):
    bert = bertlab.load("bert-base-uncased")
    with torch.no_grad():  # a change made in memory, not in the checkpoint
        bert.encoder.encoder.layer[0].output.dense.bias.fill_(0.5)
    bert.freeze(1)
    top_before = bert.encoder.encoder.layer[1].output.dense.weight.clone()
    bert.fit(TEXTS, INT_LABELS, config=FinetuneConfig(num_train_epochs=2, batch_size=2))
    encoder = bert.model.bert
    assert torch.equal(encoder.encoder.layer[0].output.dense.bias, torch.full((32,), 0.5))
    assert not _trainable(encoder.embeddings) and not _trainable(encoder.encoder.layer[0])
    assert _trainable(encoder.encoder.layer[1]) and _trainable(bert.model.classifier)
    assert not torch.equal(encoder.encoder.layer[1].output.dense.weight, top_before)


def test_fit_with_out_writes_result_json_and_warns_of_one_class(hub_cache, tmp_path, caplog):
    # Every text is the same: the model can only predict one class, and fit must say so.
    texts, labels = ["the film was good"] * 24, ["pos"] * 16 + ["neg"] * 8
    dev = (["the film was good"] * 4, ["pos", "neg", "pos", "pos"])
    with caplog.at_level(logging.WARNING, logger="bertlab.training.finetuning.finetune"):
        result = bertlab.load("bert-base-uncased").fit(texts, labels, dev=dev, out=tmp_path / "run")
    assert result.one_class is not None
    assert any("the model learned only one class" in r.getMessage() for r in caplog.records)
    recorded = json.loads((tmp_path / "run" / "result.json").read_text())
    assert recorded == json.loads(json.dumps(result.to_json()))
    assert recorded["one_class"] == result.one_class.to_json()
    assert result.best_dir == tmp_path / "run" / "best"
    assert "learned only one class" in (result.best_dir / "README.md").read_text()


@pytest.mark.parametrize(
    ("size", "learning_rate", "epochs"),
    [
        ("tiny", 1e-3, 4),
        ("mini", 3e-4, 4),
        ("small", 1e-4, 4),
        ("medium", 1e-4, 4),
        ("base", 2e-5, 3),
        ("large", 2e-5, 3),
    ],
)
def test_fits_defaults_are_chosen_by_the_models_width(size, learning_rate, epochs):
    config = default_finetune_config(BertConfig.from_preset(size))
    assert (config.learning_rate, config.num_train_epochs) == (learning_rate, epochs)
    assert config.batch_size == FinetuneConfig().batch_size  # the rest is FinetuneConfig's
