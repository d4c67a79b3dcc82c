"""Feature-based heads (BERT Sec. 5.3, Table 7; ELMo's scalar mix) and the sentence vector of a
left-to-right model."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from bertlab.core.finetune_config import FinetuneConfig
from bertlab.data.tasks import TaggedSentence
from bertlab.network.bert import BertForPreTraining
from bertlab.network.feature_head_config import LAYER_COMBINATIONS, FeatureHeadConfig
from bertlab.network.feature_heads import (
    BiLSTM,
    ScalarMix,
    sentence_positions,
)
from bertlab.network.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertlab.task_families import make_task
from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS, Tokenizer
from bertlab.training.finetuning.finetune import ModelSource, TaskData, finetune_task

WORDS = "the cat sat on mat dog ran paris london is big small".split()


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("layers", LAYER_COMBINATIONS)
@pytest.mark.parametrize("use_bilstm", [False, True])
def test_every_combination_gives_the_task_layer_its_size(tiny_config, batch, layers, use_bilstm):
    features = FeatureHeadConfig(layers=layers, use_bilstm=use_bilstm)
    head = BertForTokenClassification(tiny_config, num_labels=5, features=features).eval()
    logits = head(**batch).logits
    assert logits.shape == (2, 11, 5)
    expected = 2 * 32 if use_bilstm else 32 * (2 if layers == "concat-last-four" else 1)
    assert head.classifier.in_features == expected  # tiny: the "last four" are its 2 layers
    sentence = BertForSequenceClassification(tiny_config, num_labels=3, features=features)
    assert sentence.eval()(**batch).logits.shape == (2, 3)
    assert BertForQuestionAnswering(tiny_config, features).eval()(**batch).logits.shape == (
        2,
        11,
        2,
    )
    choices = {key: value[:, None].expand(-1, 2, -1) for key, value in batch.items()}
    assert BertForMultipleChoice(tiny_config, features=features)(**choices).logits.shape == (2, 2)


def test_the_last_layer_without_a_bilstm_is_the_fine_tuning_head_frozen(tiny_config, batch):
    torch.manual_seed(0)
    plain = BertForTokenClassification(tiny_config, num_labels=4).eval()
    features = BertForTokenClassification(
        tiny_config, num_labels=4, features=FeatureHeadConfig()
    ).eval()
    features.load_state_dict(plain.state_dict())  # the same keys: bert.*, classifier.*
    torch.testing.assert_close(features(**batch).logits, plain(**batch).logits)


def test_a_frozen_encoder_has_no_gradient_and_stays_in_eval_mode(tiny_config, batch):
    head = BertForTokenClassification(
        tiny_config, num_labels=4, features=FeatureHeadConfig("scalar-mix", use_bilstm=True)
    ).train()
    assert not head.bert.training and head.features.training
    labels = torch.randint(0, 4, (2, 11))
    head(**batch, labels=labels).loss.backward()
    assert all(p.grad is None and not p.requires_grad for p in head.bert.parameters())
    assert head.features.scalar_mix.weights.grad is not None
    assert head.classifier.weight.grad is not None
    fine_tuned = BertForTokenClassification(
        tiny_config,
        num_labels=4,
        features=FeatureHeadConfig(use_bilstm=True, do_freeze_encoder=False),
    ).train()
    assert fine_tuned.bert.training and all(p.requires_grad for p in fine_tuned.bert.parameters())


def test_the_scalar_mix_starts_uniform_and_softmax_weights_sum_to_one():
    mix = ScalarMix(3)
    torch.testing.assert_close(mix.mixing_weights(), torch.full((3,), 1 / 3))
    layers = torch.randn(3, 2, 4, 5)
    torch.testing.assert_close(mix(layers), layers.mean(0))
    with torch.no_grad():
        mix.weights.copy_(torch.tensor([2.0, 0.0, -1.0]))
        mix.gamma.fill_(0.5)
    weights = mix.mixing_weights().detach()
    assert float(weights.sum()) == pytest.approx(1.0)
    torch.testing.assert_close(mix(layers), 0.5 * torch.einsum("j,jblh->blh", weights, layers))


def test_the_bilstm_ignores_padding(tiny_config, batch):
    torch.manual_seed(0)
    head = BertForTokenClassification(
        tiny_config, num_labels=3, features=FeatureHeadConfig("sum-all", use_bilstm=True)
    ).eval()
    short = {key: value[1:, :7] for key, value in batch.items()}  # the padded row, unpadded
    torch.testing.assert_close(
        head(**batch).logits[1, :7], head(**short).logits[0], atol=1e-5, rtol=0
    )


def test_the_bilstm_computes_what_a_packed_nn_lstm_computes():
    """The padded BiLSTM is a speed change: nn.LSTM(bidirectional=True) over a packed batch gives
    the same outputs and input gradients, from the same random start, and its keys load."""
    torch.manual_seed(0)
    reference = torch.nn.LSTM(12, 8, num_layers=2, batch_first=True, bidirectional=True)
    torch.manual_seed(0)
    bilstm = BiLSTM(12, 8, num_layers=2)
    for ours, theirs in zip(bilstm.parameters(), reference.parameters(), strict=True):
        assert torch.equal(ours, theirs)  # nn.LSTM's order of random numbers
    assert list(bilstm.state_dict()) == list(reference.state_dict())  # nn.LSTM's key names
    loaded = BiLSTM(12, 8, num_layers=2)
    loaded.load_state_dict(reference.state_dict())
    inputs = torch.randn(4, 7, 12, requires_grad=True)
    lengths = torch.tensor([7, 2, 5, 1])
    packed = torch.nn.utils.rnn.pack_padded_sequence(
        inputs, lengths, batch_first=True, enforce_sorted=False
    )
    expected, _ = torch.nn.utils.rnn.pad_packed_sequence(
        reference(packed)[0], batch_first=True, total_length=7
    )
    (expected_grad,) = torch.autograd.grad(expected.square().sum(), inputs)
    for model in (bilstm, loaded):
        output = model(inputs, lengths)
        (grad,) = torch.autograd.grad(output.square().sum(), inputs)
        torch.testing.assert_close(output, expected, atol=1e-6, rtol=0)
        torch.testing.assert_close(grad, expected_grad, atol=1e-6, rtol=0)
    assert output[1, 2:].abs().sum() == 0  # zeros at the padding


def test_feature_settings_round_trip_through_config_json(tmp_path, tiny_config, batch):
    features = FeatureHeadConfig("concat-last-four", use_bilstm=True, lstm_hidden_size=8)
    head = BertForTokenClassification(tiny_config, num_labels=3, features=features).eval()
    head.save_pretrained(tmp_path)
    loaded = BertForTokenClassification.from_pretrained(tmp_path).eval()
    assert loaded.feature_config == features and loaded.classifier.in_features == 16
    torch.testing.assert_close(loaded(**batch).logits, head(**batch).logits)


def test_bad_feature_settings_are_refused(tiny_config):
    with pytest.raises(ValueError, match="unknown layer combination 'top'"):
        FeatureHeadConfig(layers="top")
    with pytest.raises(ValueError, match="lstm_hidden_size needs use_bilstm"):
        FeatureHeadConfig(lstm_hidden_size=8)
    one_layer = dataclasses.replace(tiny_config, num_hidden_layers=1)
    with pytest.raises(ValueError, match="second-to-last needs"):
        BertForTokenClassification(one_layer, 2, features=FeatureHeadConfig("second-to-last"))


def test_a_causal_sentence_head_reads_the_last_real_token(tiny_config):
    causal = tiny_config.replace(is_causal=True, hidden_dropout_prob=0.0)
    torch.manual_seed(0)
    head = BertForSequenceClassification(causal, num_labels=2).eval()
    first = torch.tensor([[2, 10, 11, 12, 3]])
    second = torch.tensor([[2, 40, 41, 3, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 0]])
    # Under causal attention [CLS] sees only itself: its vector is one for every input, which
    # is why BERT's [CLS] pooling cannot classify with a left-to-right model.
    hidden_a = head.bert(first).last_hidden_state
    hidden_b = head.bert(second, mask).last_hidden_state
    torch.testing.assert_close(hidden_a[:, 0], hidden_b[:, 0])
    logits_a, logits_b = head(first).logits, head(second, mask).logits
    assert not torch.allclose(logits_a, logits_b)
    # The last real token, padding or not.
    torch.testing.assert_close(head(second[:, :4]).logits, logits_b)
    assert sentence_positions(torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]]), True).tolist() == [2, 3]
    assert sentence_positions(torch.tensor([[1, 1, 0]]), False).tolist() == [0]


@pytest.fixture
def tagging_setup(tmp_path):
    vocab = {token: index for index, token in enumerate([*SPECIAL_TOKENS, *WORDS])}
    tokenizer = Tokenizer(vocab)
    rng = torch.Generator().manual_seed(0)
    sentences = []
    for line in range(48):  # cities are LOC, the rest O: a learnable rule
        words = [WORDS[int(i)] for i in torch.randint(0, len(WORDS), (6,), generator=rng)]
        tags = ["B-LOC" if word in ("paris", "london") else "O" for word in words]
        sentences.append(TaggedSentence(tuple(words), tuple(tags), line))
    return tokenizer, sentences


def test_the_scalar_mix_is_learned_while_the_frozen_encoder_does_not_change(
    tiny_config, tagging_setup, tmp_path
):
    """Must-show 3: fine-tuning a feature-based tagger moves the scalar mix away from uniform
    (its softmax weights still sum to 1) and leaves every encoder weight as pre-trained."""
    tokenizer, sentences = tagging_setup
    config = tiny_config.replace(vocab_size=tokenizer.vocab_size, max_position_embeddings=128)
    torch.manual_seed(0)
    pretrained = tmp_path / "pretrained"
    BertForPreTraining(config).save_pretrained(pretrained)
    tokenizer.save_pretrained(pretrained)
    features = FeatureHeadConfig("scalar-mix", use_bilstm=True, lstm_hidden_size=16)
    task = dataclasses.replace(make_task("conll2003"), features=features)
    data = TaskData(sentences[:40], sentences[40:], ("O", "B-LOC"))
    settings = FinetuneConfig(learning_rate=5e-2, batch_size=8, num_train_epochs=3, seed=1)
    result = finetune_task(task, data, ModelSource(pretrained), settings, tmp_path / "run", False)
    assert result.frozen.startswith("the whole encoder")
    tuned = task.load_head(result.best_dir, None)
    assert tuned.feature_config == features
    weights = tuned.features.scalar_mix.mixing_weights().detach()
    assert float(weights.sum()) == pytest.approx(1.0, abs=1e-6)
    assert (weights - 1 / 3).abs().max() > 1e-3  # learned: no longer uniform
    before = BertForPreTraining.from_pretrained(pretrained).bert.state_dict()
    after = tuned.bert.state_dict()
    for key, value in after.items():
        torch.testing.assert_close(value, before[key], rtol=0, atol=0)
