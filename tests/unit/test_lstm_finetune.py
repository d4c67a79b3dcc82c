"""The LSTM-era models fine-tuned in their papers' ways (network.architectures' heads and
defaults, network.elmo_heads, network.ulmfit, the strategies through each model's layer groups):
ULMFiT's classifier, discriminative rates and gradual unfreezing; ELMo's frozen biLM, learned
scalar mix and BiLSTM, for classification and tagging; NNLM's vectors starting the task model
word2vec's vectors feed. On real tiny folders of each architecture (`lstm_models`)."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from bertlab.core.finetune_config import FinetuneConfig
from bertlab.data.collate import collate_task_batch
from bertlab.data.tasks.classification import Example
from bertlab.data.tasks.ner import TaggedSentence
from bertlab.network.architectures import (
    ULMFIT_DECAY,
    folder_architecture,
    folder_finetune_defaults,
    rescaled_vectors,
)
from bertlab.network.elmo_heads import (
    ELMO_FEATURES,
    ElmoForSequenceClassification,
    ElmoForTokenClassification,
)
from bertlab.network.feature_head_config import FeatureHeadConfig
from bertlab.network.heads import BertForSequenceClassification
from bertlab.network.nnlm import NnlmForLanguageModeling
from bertlab.network.ulmfit import UlmfitForSequenceClassification
from bertlab.task_families import make_task
from bertlab.training.finetuning.loop import FinetuneLoop, describe_frozen, unfreezing_order
from bertlab.training.metrics_log import MetricsLog
from bertlab.training.optim import build_optimizer, layer_learning_rates

pytestmark = pytest.mark.usefixtures("one_thread")

LABELS = ("0", "1")
PEAK = 1e-2


def sst2_head(folder):
    return make_task("sst2").load_head(folder, LABELS)


def batch(tokenizer, texts, labels=None):
    examples = [
        Example(text, None, label)
        for text, label in zip(texts, labels or [None] * len(texts), strict=True)
    ]
    label2id = None if labels is None else {name: i for i, name in enumerate(LABELS)}
    features = make_task("sst2").encode(
        examples, tokenizer, label2id, with_labels=labels is not None
    )
    return collate_task_batch(features, tokenizer.pad_token_id)


def snapshot(model) -> dict[str, torch.Tensor]:
    return {name: param.detach().clone() for name, param in model.named_parameters()}


def changed(model, before, prefix: str) -> bool:
    return any(
        not torch.equal(param, before[name])
        for name, param in model.named_parameters()
        if name.startswith(prefix)
    )


def loop(model, tokenizer, tmp_path, **settings) -> FinetuneLoop:
    texts = ["a good film", "a bad film", "the great movie", "an awful plot", "superb", "dull"]
    labels = ["1", "0", "1", "0", "1", "0"]
    features = make_task("sst2").encode(
        [Example(t, None, label) for t, label in zip(texts, labels, strict=True)],
        tokenizer,
        {"0": 0, "1": 1},
        with_labels=True,
    )
    config = FinetuneConfig(batch_size=3, learning_rate=PEAK, **settings)
    return FinetuneLoop(model, features, config, MetricsLog(tmp_path / "m.jsonl"), False)


# --- each architecture's head, by its folder ---------------------------------------------------


def test_each_folder_gets_its_papers_head(lstm_models) -> None:
    heads = {name: sst2_head(folder) for name, folder in lstm_models.items()}
    assert isinstance(heads["awd-lstm"], UlmfitForSequenceClassification)
    assert isinstance(heads["elmo"], ElmoForSequenceClassification)
    assert heads["elmo"].feature_config == ELMO_FEATURES  # frozen biLM, scalar mix, BiLSTM
    assert isinstance(heads["nnlm"], BertForSequenceClassification)
    tagger = make_task("conll2003").load_head(lstm_models["elmo"], ("O", "B-PER", "I-PER"))
    assert isinstance(tagger, ElmoForTokenClassification)


def test_what_an_architecture_has_no_head_for_is_refused_in_one_line(lstm_models) -> None:
    awd, elmo = lstm_models["awd-lstm"], lstm_models["elmo"]
    with pytest.raises(ValueError, match="AWD-LSTM fine-tunes for classification; ULMFiT"):
        make_task("conll2003").load_head(awd, ("O", "B-PER"))
    features = dataclasses.replace(make_task("sst2"), features=FeatureHeadConfig("scalar-mix"))
    with pytest.raises(ValueError, match="--features and --bilstm do not apply to AWD-LSTM"):
        features.load_head(awd, LABELS)
    with pytest.raises(ValueError, match="question answering and multiple choice need a BERT"):
        make_task("squad").load_head(elmo, None)


@pytest.mark.parametrize("name", ["awd-lstm", "elmo", "nnlm"])
def test_a_head_saves_and_loads_with_the_same_outputs(lstm_models, lstm_tokenizer, tmp_path, name):
    head = sst2_head(lstm_models[name]).eval()
    inputs = batch(lstm_tokenizer, ["a good film", "the plot was dull and boring"])
    head.save_pretrained(tmp_path / "head")
    again = make_task("sst2").load_head(tmp_path / "head", None).eval()
    assert type(again) is type(head) and again.id2label == head.id2label
    torch.testing.assert_close(again(**inputs).logits, head(**inputs).logits)


def test_a_regression_head_has_one_output_and_mse(lstm_models, lstm_tokenizer) -> None:
    task = make_task("stsb")
    for name in ("awd-lstm", "elmo"):
        head = task.load_head(lstm_models[name], None)
        inputs = batch(lstm_tokenizer, ["a good film", "a bad film"])
        output = head(**inputs, labels=torch.tensor([4.0, 1.0]))
        assert output.logits.shape == (2, 1)
        expected = torch.nn.functional.mse_loss(output.logits[:, 0], torch.tensor([4.0, 1.0]))
        torch.testing.assert_close(output.loss, expected)


# --- ULMFiT ------------------------------------------------------------------------------------


def test_ulmfit_defaults_are_its_papers_three(lstm_models) -> None:
    defaults = folder_finetune_defaults(lstm_models["awd-lstm"])
    config = FinetuneConfig(**defaults.settings)
    assert config.layerwise_lr_decay == pytest.approx(1 / 2.6)
    assert config.schedule == "slanted-triangular" and config.do_gradual_unfreezing
    assert config.learning_rate == 1e-2 and config.batch_size == 64
    assert config.num_train_epochs == 3 + 3  # the head, 3 LSTMs, the embedding, then all


def test_ulmfit_discriminative_rates_divide_by_two_point_six_per_group(lstm_models) -> None:
    head = sst2_head(lstm_models["awd-lstm"])
    rates = layer_learning_rates(head, PEAK, ULMFIT_DECAY)
    names = ["embeddings", "LSTM 1", "LSTM 2", "LSTM 3", "head"]
    assert [name for name, _ in rates] == names
    for k, (_, rate) in enumerate(reversed(rates)):  # head lr, LSTM 3 lr / 2.6, ...
        assert rate == pytest.approx(PEAK / 2.6**k)
    optimizer = build_optimizer(head, PEAK, layerwise_lr_decay=ULMFIT_DECAY)
    by_name = dict(rates)
    group_of = {id(p): g["lr"] for g in optimizer.param_groups for p in g["params"]}
    for parameter in head.awd_lstm.rnns[0].parameters():
        assert group_of[id(parameter)] == pytest.approx(by_name["LSTM 1"])
    for parameter in head.classifier.parameters():
        assert group_of[id(parameter)] == pytest.approx(PEAK)


def test_ulmfit_unfreezes_the_classifier_then_one_lstm_per_epoch(
    lstm_models, lstm_tokenizer, tmp_path
) -> None:
    torch.manual_seed(0)
    head = sst2_head(lstm_models["awd-lstm"])
    order = unfreezing_order(head)
    assert order[0] == [head.classifier] and order[-1] == [head.awd_lstm.encoder]
    assert order[1:4] == [[rnn] for rnn in reversed(head.awd_lstm.rnns)]
    trainer = loop(head, lstm_tokenizer, tmp_path, num_train_epochs=3, do_gradual_unfreezing=True)
    starts = {"classifier.": 1, "awd_lstm.rnns.2.": 2, "awd_lstm.rnns.1.": 3, "awd_lstm.rnns.0.": 4}
    for epoch in (1, 2, 3):
        before = snapshot(head)
        trainer.run_epoch(epoch)
        for prefix, start in starts.items():
            assert changed(head, before, prefix) == (epoch >= start), (epoch, prefix)
        assert not changed(head, before, "awd_lstm.encoder.")
    trainer.close()


def test_ulmfit_by_default_runs_slanted_triangular_rates_in_every_group(
    lstm_models, lstm_tokenizer, tmp_path
) -> None:
    """Its defaults through the loop: at each step every group's rate is its own peak (the
    discriminative rates above) times ULMFiT eq. 3 of the step, one schedule over the run."""
    torch.manual_seed(0)
    folder = lstm_models["awd-lstm"]
    head = sst2_head(folder)
    config = FinetuneConfig(**folder_finetune_defaults(folder).settings | {"batch_size": 1})
    texts = ["a good film", "dull", "superb", "an awful plot", "the great movie"]
    features = make_task("sst2").encode(
        [Example(text, None, str(k % 2)) for k, text in enumerate(texts)],
        lstm_tokenizer,
        {"0": 0, "1": 1},
        with_labels=True,
    )
    trainer = FinetuneLoop(head, features, config, MetricsLog(tmp_path / "m.jsonl"), False)
    seen: list[list[tuple[float, float]]] = []
    trainer.optimizer.register_step_pre_hook(
        lambda optimizer, *_: seen.append(
            [(g["lr"], g["initial_lr"]) for g in optimizer.param_groups]
        )
    )
    for epoch in range(1, config.num_train_epochs + 1):
        trainer.run_epoch(epoch)
    trainer.close()
    total = len(texts) * config.num_train_epochs  # batch 1: 5 steps an epoch, 6 epochs
    assert len(seen) == total
    cut = math.floor(total * config.cut_frac)  # T = 30, cut_frac 0.1: the peak at step 3
    for t, groups in enumerate(seen):
        p = t / cut if t < cut else 1 - (t - cut) / (cut * (1 / config.cut_frac - 1))
        factor = (1 + p * (config.stlr_ratio - 1)) / config.stlr_ratio  # eq. 3 / the peak
        for rate, peak in groups:
            assert rate == pytest.approx(peak * factor), t
    peaks = sorted({peak for _, peak in seen[0]})
    assert peaks[-1] == config.learning_rate and peaks[0] == pytest.approx(peaks[-1] / 2.6**4)
    top = [max(rate for rate, _ in groups) for groups in seen]
    assert top[0] == pytest.approx(config.learning_rate / 32) and top.index(max(top)) == cut


def test_ulmfit_concat_pooling_ignores_the_padding(lstm_models, lstm_tokenizer) -> None:
    head = sst2_head(lstm_models["awd-lstm"]).eval()
    texts = ["a good film", "the story was very long and dull and the acting awful"]
    together = head(**batch(lstm_tokenizer, texts)).logits  # the first padded to the second
    alone = torch.cat([head(**batch(lstm_tokenizer, [text])).logits for text in texts])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=1e-5)


def test_ulmfit_trains_on_a_last_batch_of_one_example(lstm_models, lstm_tokenizer) -> None:
    head = sst2_head(lstm_models["awd-lstm"]).train()
    output = head(**batch(lstm_tokenizer, ["a good film"], ["1"]))
    output.loss.backward()  # BatchNorm on one example: the running statistics stand in
    assert torch.isfinite(output.loss) and head.classifier.layers[0].training


# --- ELMo --------------------------------------------------------------------------------------


@pytest.mark.parametrize("task_name", ["sst2", "conll2003"])
def test_elmo_trains_the_mix_the_bilstm_and_the_task_layer_never_the_bilm(
    lstm_models, lstm_tokenizer, tmp_path, task_name
) -> None:
    torch.manual_seed(0)
    task = make_task(task_name)
    labels = LABELS if task_name == "sst2" else ("O", "B-PER", "I-PER")
    head = task.load_head(lstm_models["elmo"], labels)
    if task_name == "sst2":
        features = task.encode(
            [Example("a good film", None, "1"), Example("dull", None, "0")],
            lstm_tokenizer,
            {"0": 0, "1": 1},
            with_labels=True,
        )
    else:
        sentences = [TaggedSentence(("the", "cat", "sat"), ("O", "B-PER", "O"))] * 2
        features = task.encode(
            sentences, lstm_tokenizer, {k: i for i, k in enumerate(labels)}, True
        )
    config = FinetuneConfig(batch_size=2, learning_rate=1e-2, num_train_epochs=1)
    trainer = FinetuneLoop(head, features, config, MetricsLog(tmp_path / "m.jsonl"), False)
    before = snapshot(head)
    trainer.run_epoch(1)
    trainer.close()
    assert not changed(head, before, "elmo.")
    assert not head.elmo.training  # a frozen biLM runs without dropout while the head trains
    for prefix in ("features.scalar_mix.", "features.lstm.", "classifier."):
        assert changed(head, before, prefix), prefix
    assert describe_frozen(head).startswith("the whole encoder")


def test_elmo_mix_weights_are_a_softmax_times_gamma(lstm_models, lstm_tokenizer) -> None:
    head = sst2_head(lstm_models["elmo"]).eval()
    mix = head.features.scalar_mix
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([0.3, -2.0, 1.1]))
        mix.gamma.fill_(0.6)
    layers = torch.randn(3, 2, 5, 16)
    expected = 0.6 * torch.einsum("j,jblh->blh", torch.softmax(mix.weights, 0), layers)
    torch.testing.assert_close(mix(layers), expected)
    assert float(mix.mixing_weights().sum()) == pytest.approx(1.0)


def test_elmo_fine_tunes_its_bilm_when_the_flags_ask_for_it(lstm_models, lstm_tokenizer, tmp_path):
    task = dataclasses.replace(
        make_task("sst2"),
        features=FeatureHeadConfig("last", use_bilstm=True, do_freeze_encoder=False),
    )
    head = task.load_head(lstm_models["elmo"], LABELS)
    trainer = loop(head, lstm_tokenizer, tmp_path, num_train_epochs=1)
    before = snapshot(head)
    trainer.run_epoch(1)
    trainer.close()
    assert changed(head, before, "elmo.forward_lstm.") and changed(
        head, before, "elmo.token_embedder."
    )
    assert not changed(head, before, "elmo.softmax.")  # a task never reads the LM's softmax


# --- NNLM --------------------------------------------------------------------------------------


def test_nnlm_vectors_start_the_embeddings_of_a_random_encoder_and_train_with_it(
    lstm_models, lstm_tokenizer, tmp_path
) -> None:
    folder = lstm_models["nnlm"]
    vectors = NnlmForLanguageModeling.from_pretrained(folder).word_vectors()
    torch.manual_seed(0)
    head = sst2_head(folder)
    config = head.config
    assert config.hidden_size == vectors.shape[1] and config.num_hidden_layers == 2
    embeddings = head.bert.embeddings.word_embeddings.weight
    torch.testing.assert_close(embeddings, rescaled_vectors(vectors, config.initializer_range))
    assert float(embeddings.std()) == pytest.approx(config.initializer_range, rel=1e-4)
    # The directions are C's: cosines between pieces unchanged.
    torch.testing.assert_close(
        torch.nn.functional.cosine_similarity(embeddings[5:], embeddings[6:7]),
        torch.nn.functional.cosine_similarity(vectors[5:], vectors[6:7]),
    )
    trainer = loop(head, lstm_tokenizer, tmp_path, num_train_epochs=1)
    before = snapshot(head)
    trainer.run_epoch(1)
    trainer.close()
    # Frozen, the vectors kept the task model at the class prior (NNLM_VECTORS_TRAIN).
    assert changed(head, before, "bert.embeddings.word_embeddings.")
    assert changed(head, before, "bert.encoder.") and changed(head, before, "classifier.")
    assert describe_frozen(head) == "nothing"


def test_nnlm_fine_tunes_at_its_vectors_width(lstm_models) -> None:
    defaults = folder_finetune_defaults(lstm_models["nnlm"])
    assert defaults.settings == {"learning_rate": 1e-3, "num_train_epochs": 4}  # BERT-Tiny's row
    assert "start as NNLM's vectors" in defaults.why
    assert folder_architecture(lstm_models["nnlm"]).head_families == {}  # its head is a BERT's


# --- the API: bertlab.load(folder).fit ---------------------------------------------------------


def test_fit_builds_elmos_head_trains_it_its_way_and_saves_it(lstm_models, tmp_path) -> None:
    import bertlab

    torch.manual_seed(0)
    folder = lstm_models["elmo"]
    model = bertlab.load(folder)
    config = model.finetune_config()
    assert (config.learning_rate, config.num_train_epochs) == (1e-3, 4)  # ELMo's defaults
    bilm = snapshot(ElmoForSequenceClassification.from_language_model(folder, num_labels=2).elmo)
    texts = ["a good film", "a bad film", "the great movie", "an awful plot"]
    result = model.fit(texts, ["pos", "neg", "pos", "neg"], out=tmp_path / "run")
    assert result.epochs_run == 4
    assert isinstance(model.model, ElmoForSequenceClassification)
    assert model.model.feature_config == ELMO_FEATURES
    for name, param in model.model.elmo.named_parameters():  # frozen all through the run
        assert torch.equal(param, bilm[name]), name
    predictions = model.predict(["a good film", "an awful plot"])
    assert len(predictions) == 2 and set(predictions) <= {"pos", "neg"}
    again = bertlab.load(model.save(tmp_path / "saved"))
    assert again.predict(["a good film", "an awful plot"]) == predictions
