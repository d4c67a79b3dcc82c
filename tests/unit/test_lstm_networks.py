"""The LSTM-era networks (NNLM, ELMo's biLM, AWD-LSTM and ULMFiT's classifier): what each one
reads, its untrained perplexity, that it can learn, its weight drop, and its checkpoints."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from bertlab.core.lstm_config import (
    LM_ARCHITECTURE_NAMES,
    AwdLstmConfig,
    ElmoConfig,
    NnlmConfig,
)
from bertlab.network.awd_lstm import AwdLstmForLanguageModeling, WeightDropLstm
from bertlab.network.elmo import ElmoForLanguageModeling
from bertlab.network.lm_architectures import LM_ARCHITECTURES, lm_architecture
from bertlab.network.lm_base import (
    IGNORE_INDEX,
    next_piece_labels,
    previous_piece_labels,
    reversal_index,
)
from bertlab.network.nnlm import NnlmForLanguageModeling
from bertlab.network.ulmfit import UlmfitForSequenceClassification, concat_pool

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB = 99


def no_dropout(name: str):
    """The tiny config of architecture `name` without dropout (deterministic in training)."""
    config_class, _ = lm_architecture(name)
    changes = {
        "awd-lstm": {
            "output_dropout_prob": 0.0,
            "hidden_dropout_prob": 0.0,
            "input_dropout_prob": 0.0,
            "embedding_dropout_prob": 0.0,
            "weight_dropout_prob": 0.0,
        },
        "elmo": {"dropout_prob": 0.0},
        "nnlm": {},
    }[name]
    return config_class.tiny(**changes)


def build(name: str, seed: int = 0, **changes):
    config_class, model_class = lm_architecture(name)
    torch.manual_seed(seed)
    return model_class(config_class.tiny(**changes)).eval()


def random_ids(batch: int, length: int, seed: int = 1, vocab: int = VOCAB) -> torch.Tensor:
    return torch.randint(5, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


# --- targets --------------------------------------------------------------------------------------


def test_next_and_previous_piece_labels_skip_the_ends_and_the_padding() -> None:
    ids = torch.tensor([[5, 6, 7, 0], [8, 9, 10, 11]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])
    assert next_piece_labels(ids, mask).tolist() == [[6, 7, -100, -100], [9, 10, 11, -100]]
    assert previous_piece_labels(ids, mask).tolist() == [[-100, 5, 6, -100], [-100, 8, 9, 10]]


def test_reversal_index_reverses_within_each_length_and_undoes_itself() -> None:
    index = reversal_index(torch.tensor([3, 5]), 5)
    assert index.tolist() == [[2, 1, 0, 3, 4], [4, 3, 2, 1, 0]]
    assert torch.equal(index.gather(1, index), torch.arange(5).expand(2, 5))


# --- what each position reads ---------------------------------------------------------------------


@pytest.mark.parametrize("name", LM_ARCHITECTURE_NAMES)
def test_left_to_right_outputs_do_not_change_when_later_pieces_change(name: str) -> None:
    """Position t's logits and forward representations read pieces 0..t only. (ELMo: its
    forward LM and the forward halves of its layers.)"""
    model = build(name)
    ids = random_ids(2, 12)
    changed = ids.clone()
    changed[:, 7:] = random_ids(2, 5, seed=9)
    with torch.no_grad():
        before, after = model(ids), model(changed)
    torch.testing.assert_close(before.logits[:, :7], after.logits[:, :7], rtol=0, atol=0)
    assert not torch.allclose(before.logits[:, 7:], after.logits[:, 7:])  # the change is seen
    for layer_before, layer_after in zip(before.layers, after.layers, strict=True):
        forward = slice(0, layer_before.shape[-1] // 2) if name == "elmo" else slice(None)
        torch.testing.assert_close(
            layer_before[:, :7, forward], layer_after[:, :7, forward], rtol=0, atol=0
        )


def test_elmo_backward_lm_does_not_change_when_earlier_pieces_change() -> None:
    """The backward LM's position t reads pieces t..n-1: changing pieces before t changes
    neither its logits nor the backward halves of the layers there, and does change the
    forward LM's (so the test can see a change)."""
    model = build("elmo")
    ids = random_ids(2, 12)
    changed = ids.clone()
    changed[:, :5] = random_ids(2, 5, seed=9)
    with torch.no_grad():
        before, after = model(ids), model(changed)
    torch.testing.assert_close(
        before.backward_logits[:, 5:], after.backward_logits[:, 5:], rtol=0, atol=0
    )
    assert not torch.allclose(before.backward_logits[:, :5], after.backward_logits[:, :5])
    assert not torch.allclose(before.logits[:, 5:], after.logits[:, 5:])
    for layer_before, layer_after in zip(before.layers[1:], after.layers[1:], strict=True):
        half = layer_before.shape[-1] // 2
        torch.testing.assert_close(
            layer_before[:, 5:, half:], layer_after[:, 5:, half:], rtol=0, atol=0
        )


def test_nnlm_reads_only_its_window_of_n_minus_one_pieces() -> None:
    """Bengio's n-gram window: position t reads pieces t-n+2..t; piece t-n+1 is outside."""
    model = build("nnlm")  # n = 4: pieces t-2, t-1, t
    ids = random_ids(1, 10)
    changed = ids.clone()
    changed[0, 3] = (ids[0, 3] + 1 - 5) % (VOCAB - 5) + 5
    with torch.no_grad():
        before, after = model(ids).logits, model(changed).logits
    assert not torch.allclose(before[0, 3:6], after[0, 3:6], atol=1e-6)  # t = 3, 4, 5 read it
    torch.testing.assert_close(before[0, 6:], after[0, 6:], rtol=0, atol=0)  # t >= 6 do not
    torch.testing.assert_close(before[0, :3], after[0, :3], rtol=0, atol=0)


@pytest.mark.parametrize("name", LM_ARCHITECTURE_NAMES)
def test_padding_at_the_end_does_not_change_real_positions(name: str) -> None:
    """A sequence alone, and in a batch padded to a longer one with arbitrary ids in the
    padding: the same logits and representations at its real positions (both directions)."""
    model = build(name)
    alone = random_ids(1, 7)
    ids = random_ids(2, 11, seed=2)
    ids[0, :7] = alone[0]  # positions 7.. of row 0 are padding with arbitrary ids
    mask = torch.ones_like(ids)
    mask[0, 7:] = 0
    with torch.no_grad():
        single, batched = model(alone), model(ids, attention_mask=mask)
    torch.testing.assert_close(batched.logits[0, :7], single.logits[0], rtol=0, atol=1e-5)
    for layer_batched, layer_single in zip(batched.layers, single.layers, strict=True):
        torch.testing.assert_close(layer_batched[0, :7], layer_single[0], rtol=0, atol=1e-5)
    if name == "elmo":
        torch.testing.assert_close(
            batched.backward_logits[0, :7], single.backward_logits[0], rtol=0, atol=1e-5
        )


# --- losses ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", LM_ARCHITECTURE_NAMES)
def test_an_untrained_model_has_a_perplexity_near_the_vocabulary_size(name: str) -> None:
    """Each initialization keeps the untrained logits small, so the softmax is near uniform:
    log(perplexity) - log(V) is about the variance of the logits over 2 (a second-order
    expansion of logsumexp). Within 10% of V at V = 1,000 (the init gives log-ratios of a few
    hundredths); a network whose output scale was off by a factor of 3 would miss it."""
    vocab = 1000
    model = build(name, vocab_size=vocab)
    ids = random_ids(4, 32, vocab=vocab)
    with torch.no_grad():
        output = model(ids, labels=next_piece_labels(ids, None))
    perplexity = math.exp(output.loss.item())
    assert 0.9 * vocab < perplexity < 1.1 * vocab, perplexity
    spread = output.logits.float().var(dim=-1).mean().item()
    assert abs(math.log(perplexity / vocab) - spread / 2) < 0.02


@pytest.mark.parametrize("name", LM_ARCHITECTURE_NAMES)
def test_the_loss_is_the_mean_cross_entropy_over_target_pieces_padding_skipped(name: str) -> None:
    model = build(name)
    ids = random_ids(2, 9)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    labels = next_piece_labels(ids, mask)
    labels[1, 6:] = 7  # targets at padding are skipped whatever they hold
    with torch.no_grad():
        output = model(ids, attention_mask=mask, labels=labels)
    real = labels.masked_fill(mask == 0, IGNORE_INDEX)
    forward = F.cross_entropy(output.logits.flatten(0, 1), real.flatten(), ignore_index=-100)
    if name != "elmo":
        torch.testing.assert_close(output.loss, forward)
        return
    backward = F.cross_entropy(
        output.backward_logits.flatten(0, 1),
        previous_piece_labels(ids, mask).flatten(),
        ignore_index=-100,
    )
    torch.testing.assert_close(output.forward_loss, forward)
    torch.testing.assert_close(output.backward_loss, backward)
    torch.testing.assert_close(output.loss, (forward + backward) / 2)


# Adam steps and rate per network. AWD-LSTM's three stacked layers tied to an 8-wide embedding
# learn these sentences slowly (a plain `nn.LSTM` stack from the same weights learns them just as
# slowly): it gets 32 dimensions, more steps and a higher rate.
OVERFIT = {
    "nnlm": ({}, 300, 0.02),
    "elmo": ({}, 300, 0.02),
    "awd-lstm": ({"embedding_size": 32, "hidden_size": 32}, 500, 0.05),
}


@pytest.mark.parametrize("name", LM_ARCHITECTURE_NAMES)
def test_a_tiny_model_overfits_three_sentences(name: str) -> None:
    """Three sentences of 12 pieces, learned by heart: the loss goes from about log V (4.6) to
    under 0.05."""
    _, model_class = lm_architecture(name)
    changes, steps, learning_rate = OVERFIT[name]
    torch.manual_seed(0)
    model = model_class(no_dropout(name).replace(**changes)).train()
    ids = random_ids(3, 12, seed=5)
    labels = next_piece_labels(ids, None)
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    for _ in range(steps):
        optimizer.zero_grad()
        loss = model(ids, labels=labels, output_logits=False).loss
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.05, loss.item()


def test_without_labels_or_logits_the_softmax_is_skipped() -> None:
    for name in LM_ARCHITECTURE_NAMES:
        output = build(name)(random_ids(1, 5), output_logits=False)
        assert output.logits is None and output.loss is None and output.layers


# --- shapes and the networks' parts ---------------------------------------------------------------


def test_each_network_returns_its_layers_with_their_shapes() -> None:
    ids = random_ids(2, 6)
    nnlm, elmo, awd = build("nnlm"), build("elmo"), build("awd-lstm")
    with torch.no_grad():
        shapes = {
            name: [tuple(layer.shape) for layer in model(ids).layers]
            for name, model in (("nnlm", nnlm), ("elmo", elmo), ("awd-lstm", awd))
        }
    assert shapes["nnlm"] == [(2, 6, 8), (2, 6, 16)]  # C(w_t) (m), the tanh layer (h)
    assert shapes["elmo"] == [(2, 6, 16)] * 3  # [x; x] and two [forward; backward], 2P each
    assert shapes["awd-lstm"] == [(2, 6, 8), (2, 6, 16), (2, 6, 16), (2, 6, 8)]  # E, H, H, E
    layers = elmo(ids).layers
    torch.testing.assert_close(layers[0][..., :8], layers[0][..., 8:])  # the token layer twice


def test_elmo_runs_projection_lstms_and_shares_one_softmax() -> None:
    model = build("elmo")
    lstms = [module for module in model.modules() if isinstance(module, nn.LSTM)]
    assert len(lstms) == 4 and all(lstm.proj_size == 8 and lstm.hidden_size == 24 for lstm in lstms)
    softmaxes = [module for module in model.modules() if isinstance(module, nn.Linear)]
    assert len(softmaxes) == 1 and softmaxes[0].out_features == VOCAB


def test_nnlm_word_vectors_are_its_embedding_table() -> None:
    model = build("nnlm")
    vectors = model.word_vectors()
    assert vectors.shape == (VOCAB, 8) and not vectors.requires_grad
    assert torch.equal(vectors, model.window.word_embeddings.weight)
    assert build("nnlm", use_direct_connections=False).direct is None


def test_awd_lstm_decoder_is_tied_to_the_embedding_and_layers_end_at_its_size() -> None:
    model = build("awd-lstm")
    assert model.decoder.weight is model.awd_lstm.encoder.weight
    assert [(rnn.input_size, rnn.hidden_size) for rnn in model.awd_lstm.rnns] == [
        (8, 16),
        (16, 16),
        (16, 8),
    ]


# --- AWD-LSTM's weight drop -----------------------------------------------------------------------


def test_the_dropped_hidden_weight_changes_in_training_and_is_the_raw_weight_in_eval() -> None:
    torch.manual_seed(0)
    layer = WeightDropLstm(6, 40, weight_dropout_prob=0.5).train()
    first, second = layer.dropped_weight_hh(), layer.dropped_weight_hh()
    assert not torch.equal(first, second)
    dropped_share = (first == 0).float().mean().item()
    assert 0.4 < dropped_share < 0.6, dropped_share  # p = 0.5 of 6,400 entries
    kept = first != 0
    torch.testing.assert_close(first[kept], layer.weight_hh_l0[kept] * 2)  # scaled by 1/(1-p)
    layer.eval()
    assert layer.dropped_weight_hh() is layer.weight_hh_l0


def test_the_weight_dropped_lstm_runs_with_the_dropped_weight() -> None:
    """Its output is a plain LSTM's with the dropped weight put in (the same random draw),
    in training; and the plain LSTM's with the raw weights in eval."""
    torch.manual_seed(0)
    layer = WeightDropLstm(6, 10, weight_dropout_prob=0.5).train()
    plain = nn.LSTM(6, 10, batch_first=True)
    plain.load_state_dict(layer.state_dict())
    inputs = torch.randn(2, 7, 6)
    torch.manual_seed(3)
    output = layer(inputs)
    torch.manual_seed(3)
    dropped = F.dropout(layer.weight_hh_l0, 0.5, training=True)
    with torch.no_grad():
        plain.weight_hh_l0.copy_(dropped)
    torch.testing.assert_close(output, plain(inputs)[0])
    plain.load_state_dict(layer.state_dict())
    torch.testing.assert_close(layer.eval()(inputs), plain(inputs)[0])
    assert not torch.allclose(output, plain(inputs)[0])  # the drop did change the output


def test_a_dropped_entry_of_the_hidden_weight_gets_no_gradient() -> None:
    """DropConnect: the gradient reaches the raw weight through the mask of that forward."""
    torch.manual_seed(0)
    layer = WeightDropLstm(6, 10, weight_dropout_prob=0.5).train()
    torch.manual_seed(3)
    layer(torch.randn(2, 7, 6)).pow(2).sum().backward()
    torch.manual_seed(3)
    torch.randn(2, 7, 6)
    kept = F.dropout(torch.ones_like(layer.weight_hh_l0), 0.5, training=True) != 0
    gradient = layer.weight_hh_l0.grad
    assert torch.all(gradient[~kept] == 0) and torch.all(gradient[kept] != 0)


def test_the_optimizer_updates_the_raw_weight_which_the_state_dict_holds() -> None:
    torch.manual_seed(0)
    model = AwdLstmForLanguageModeling(AwdLstmConfig.tiny(weight_dropout_prob=0.5)).train()
    layer = model.awd_lstm.rnns[0]
    assert any(parameter is layer.weight_hh_l0 for parameter in model.parameters())
    raw_before = layer.weight_hh_l0.detach().clone()
    ids = random_ids(2, 10)
    model(ids, labels=next_piece_labels(ids, None)).loss.backward()
    assert layer.weight_hh_l0.grad.abs().sum() > 0
    torch.optim.SGD(model.parameters(), lr=1.0).step()
    assert not torch.equal(layer.weight_hh_l0, raw_before)
    state = model.state_dict()
    assert state["awd_lstm.rnns.0.weight_hh_l0"].data_ptr() == layer.weight_hh_l0.data_ptr()
    assert not any("raw" in key or "module" in key for key in state)


def test_ar_and_tar_are_returned_in_training_and_match_merity_section_4_6() -> None:
    config = AwdLstmConfig.tiny(output_dropout_prob=0.0, ar_alpha=2.0, tar_beta=1.0)
    torch.manual_seed(0)
    model = AwdLstmForLanguageModeling(config).train()
    output = model(random_ids(2, 9))
    last = output.layers[-1]
    torch.testing.assert_close(output.activation_regularization, 2.0 * last.pow(2).mean())
    expected_tar = (last[:, 1:] - last[:, :-1]).pow(2).mean()
    torch.testing.assert_close(output.temporal_activation_regularization, expected_tar)
    evaluated = model.eval()(random_ids(2, 9))
    assert evaluated.activation_regularization is None
    assert evaluated.temporal_activation_regularization is None


def test_awd_lstm_matches_a_plain_lstm_stack_in_eval() -> None:
    """A reference computed by hand from the same weights: an embedding lookup, three plain
    `nn.LSTM`s and the tied output layer (what fastai's AWD_LSTM computes in eval)."""
    model = build("awd-lstm")
    ids = random_ids(2, 10)
    state = model.state_dict()
    hidden = F.embedding(ids, state["awd_lstm.encoder.weight"])
    for index, rnn in enumerate(model.awd_lstm.rnns):
        plain = nn.LSTM(rnn.input_size, rnn.hidden_size, batch_first=True)
        prefix = f"awd_lstm.rnns.{index}."
        plain.load_state_dict(
            {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
        )
        hidden = plain(hidden)[0]
    expected = hidden @ state["awd_lstm.encoder.weight"].T + state["decoder.bias"]
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, expected, rtol=0, atol=1e-6)


# --- ULMFiT's classifier --------------------------------------------------------------------------


def test_concat_pooling_reads_the_real_positions_only() -> None:
    hidden = torch.tensor([[[1.0, -2.0], [3.0, 0.0], [100.0, 100.0]]])  # (1, 3, 2), last padding
    mask = torch.tensor([[1, 1, 0]])
    pooled = concat_pool(hidden, mask)
    assert pooled.tolist() == [[3.0, 0.0, 3.0, 0.0, 2.0, -1.0]]  # last, max, mean
    assert concat_pool(hidden, None)[0, :2].tolist() == [100.0, 100.0]


def test_the_ulmfit_classifier_ignores_padding() -> None:
    torch.manual_seed(0)
    model = UlmfitForSequenceClassification(AwdLstmConfig.tiny(), num_labels=3).eval()
    alone = random_ids(1, 6)
    ids = random_ids(2, 10, seed=2)
    ids[0, :6] = alone[0]
    mask = torch.ones_like(ids)
    mask[0, 6:] = 0
    with torch.no_grad():
        torch.testing.assert_close(
            model(ids, attention_mask=mask).logits[0], model(alone).logits[0], rtol=0, atol=1e-6
        )
        assert not torch.allclose(model(ids).logits[0], model(alone).logits[0])


def test_the_ulmfit_parameter_groups_go_from_the_embedding_to_the_head() -> None:
    model = UlmfitForSequenceClassification(AwdLstmConfig.tiny(), num_labels=2)
    groups = model.parameter_groups()
    assert len(groups) == 5  # embedding, 3 LSTM layers, head
    assert groups[0] == [model.awd_lstm.encoder.weight]
    assert groups[1][1] is model.awd_lstm.rnns[0].weight_hh_l0
    flattened = [id(parameter) for group in groups for parameter in group]
    assert sorted(flattened) == sorted(id(parameter) for parameter in model.parameters())
    blocks = [type(module).__name__ for module in model.classifier.layers]
    assert blocks == [
        "BatchNorm1d",
        "Dropout",
        "Linear",
        "ReLU",
        "BatchNorm1d",
        "Dropout",
        "Linear",
    ]


def test_the_classifier_starts_from_a_language_models_body(tmp_path) -> None:
    torch.manual_seed(0)
    language_model = AwdLstmForLanguageModeling(AwdLstmConfig.tiny())
    language_model.save_pretrained(tmp_path)
    classifier = UlmfitForSequenceClassification.from_language_model(tmp_path, num_labels=4)
    for key, value in language_model.awd_lstm.state_dict().items():
        assert torch.equal(classifier.awd_lstm.state_dict()[key], value)
    assert classifier.config.weight_dropout_prob == 0.5  # fastai's classifier dropouts
    classifier.save_pretrained(tmp_path / "classifier")
    again = UlmfitForSequenceClassification.from_pretrained(tmp_path / "classifier").eval()
    ids = random_ids(2, 5)
    torch.testing.assert_close(again(ids).logits, classifier.eval()(ids).logits, rtol=0, atol=0)


# --- checkpoints and names ----------------------------------------------------------------------


@pytest.mark.parametrize("name", LM_ARCHITECTURE_NAMES)
def test_save_and_load_give_identical_outputs(name: str, tmp_path) -> None:
    model = build(name)
    model.save_pretrained(tmp_path)
    _, model_class = lm_architecture(name)
    loaded = model_class.from_pretrained(tmp_path).eval()
    ids = random_ids(2, 8)
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits, rtol=0, atol=0)
    assert loaded.config == model.config
    if name == "awd-lstm":
        assert loaded.decoder.weight is loaded.awd_lstm.encoder.weight


def test_loading_refuses_another_architecture(tmp_path) -> None:
    build("nnlm").save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="holds a nnlm model"):
        AwdLstmForLanguageModeling.from_pretrained(tmp_path)


def test_the_name_mapping_lists_every_architecture_once() -> None:
    assert tuple(LM_ARCHITECTURES) == LM_ARCHITECTURE_NAMES == ("nnlm", "elmo", "awd-lstm")
    assert LM_ARCHITECTURES["elmo"] == (ElmoConfig, ElmoForLanguageModeling)
    assert LM_ARCHITECTURES["nnlm"][0] is NnlmConfig
    assert LM_ARCHITECTURES["awd-lstm"][1] is AwdLstmForLanguageModeling
    assert NnlmForLanguageModeling.config_class is NnlmConfig
    with pytest.raises(ValueError, match="unknown architecture 'bilstm'"):
        lm_architecture("bilstm")


def test_inputs_are_checked_at_the_entry() -> None:
    model = build("awd-lstm")
    with pytest.raises(ValueError, match=r"input_ids must lie in \[0, 99\)"):
        model(torch.tensor([[5, 99]]))
    with pytest.raises(ValueError, match="padding on the right"):
        model(torch.tensor([[5, 6]]), attention_mask=torch.tensor([[0, 1]]))
    with pytest.raises(ValueError, match="labels shape"):
        model(torch.tensor([[5, 6]]), labels=torch.tensor([[5]]))
