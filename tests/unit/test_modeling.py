from pathlib import Path

import pytest
import torch

from bertlab.core.config import BertConfig
from bertlab.network.bert import BertForPreTraining, BertModel

TEST_DATA = Path(__file__).resolve().parent.parent / "data"


def _model(config, cls=BertModel):
    torch.manual_seed(0)
    return cls(config).eval()


def test_output_shapes(tiny_config, batch):
    model = _model(tiny_config)
    output = model(**batch, output_hidden_states=True, output_attentions=True)
    assert output.last_hidden_state.shape == (2, 11, 32)
    assert output.pooler_output.shape == (2, 32)
    assert len(output.hidden_states) == tiny_config.num_hidden_layers + 1
    assert all(h.shape == (2, 11, 32) for h in output.hidden_states)
    assert len(output.attentions) == tiny_config.num_hidden_layers
    assert all(a.shape == (2, 4, 11, 11) for a in output.attentions)
    torch.testing.assert_close(output.hidden_states[-1], output.last_hidden_state)


def test_fast_and_reference_attention_agree(odd_config, batch):
    model = _model(odd_config)
    batch["token_type_ids"] = batch["token_type_ids"].clamp(max=2)
    with torch.no_grad():
        fast = model(**batch)
        reference = model(**batch, output_attentions=True)
    torch.testing.assert_close(
        fast.last_hidden_state, reference.last_hidden_state, rtol=0, atol=1e-5
    )
    torch.testing.assert_close(fast.pooler_output, reference.pooler_output, rtol=0, atol=1e-5)


@pytest.mark.parametrize("reference_path", [False, True])
@pytest.mark.parametrize("is_causal", [False, True])
def test_padding_does_not_change_real_token_outputs(tiny_config, reference_path, is_causal):
    model = _model(tiny_config.replace(is_causal=is_causal))
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 99, (1, 6), generator=generator)
    padded = torch.cat([ids, torch.zeros(1, 5, dtype=torch.int64)], dim=1)
    mask = torch.cat([torch.ones(1, 6), torch.zeros(1, 5)], dim=1).long()
    with torch.no_grad():
        alone = model(ids, output_attentions=reference_path)
        with_pad = model(padded, attention_mask=mask, output_attentions=reference_path)
    torch.testing.assert_close(
        with_pad.last_hidden_state[:, :6], alone.last_hidden_state, atol=1e-6, rtol=0
    )
    torch.testing.assert_close(with_pad.pooler_output, alone.pooler_output, atol=1e-6, rtol=0)
    if reference_path:
        assert with_pad.attentions[0][..., 6:].abs().max() == 0


@pytest.mark.parametrize("reference_path", [False, True])
def test_causal_option_never_attends_ahead(tiny_config, reference_path):
    model = _model(tiny_config.replace(is_causal=True))
    ids = torch.randint(5, 99, (2, 9), generator=torch.Generator().manual_seed(2))
    changed = ids.clone()
    changed[:, 5:] = (changed[:, 5:] + 7) % 99
    with torch.no_grad():
        first = model(ids, output_attentions=reference_path).last_hidden_state
        second = model(changed, output_attentions=reference_path).last_hidden_state
    torch.testing.assert_close(first[:, :5], second[:, :5], atol=1e-6, rtol=0)
    assert (first[:, 5:] - second[:, 5:]).abs().max() > 1e-3
    if reference_path:
        with torch.no_grad():
            probs = model(ids, output_attentions=True).attentions
        upper = torch.ones(9, 9, dtype=torch.bool).triu(1)
        assert all(p[..., upper].abs().max() == 0 for p in probs)


def test_bidirectional_model_does_attend_ahead(tiny_config):
    model = _model(tiny_config)
    ids = torch.randint(5, 99, (1, 9), generator=torch.Generator().manual_seed(2))
    changed = ids.clone()
    changed[:, 8] = (changed[:, 8] + 1) % 99
    with torch.no_grad():
        delta = model(ids).last_hidden_state[:, 0] - model(changed).last_hidden_state[:, 0]
    assert delta.abs().max() > 1e-4


def test_sparse_and_dense_mlm_logits_agree(tiny_config, batch):
    model = _model(tiny_config, BertForPreTraining)
    positions = torch.tensor([[1, 4, 9], [0, 2, 6]])
    with torch.no_grad():
        dense = model(**batch).mlm_logits
        sparse = model(**batch, masked_positions=positions).mlm_logits
    assert dense.shape == (2, 11, 99) and sparse.shape == (2, 3, 99)
    expected = torch.stack([dense[b, positions[b]] for b in range(2)])
    torch.testing.assert_close(sparse, expected, atol=1e-5, rtol=0)


def test_mlm_loss_ignores_padded_prediction_slots(tiny_config, batch):
    model = _model(tiny_config, BertForPreTraining)
    positions = torch.tensor([[1, 4, 0], [2, 6, 0]])
    labels = torch.tensor([[7, 8, -100], [9, 10, -100]])
    nsp = torch.tensor([0, 1])
    with torch.no_grad():
        output = model(**batch, masked_positions=positions, labels=labels, next_sentence_label=nsp)
    logits = output.mlm_logits[:, :2].reshape(-1, 99)
    expected = torch.nn.functional.cross_entropy(logits, labels[:, :2].reshape(-1))
    torch.testing.assert_close(output.mlm_loss, expected)
    torch.testing.assert_close(
        output.nsp_loss, torch.nn.functional.cross_entropy(output.nsp_logits, nsp)
    )
    torch.testing.assert_close(output.loss, output.mlm_loss + output.nsp_loss)


def test_losses_are_optional_and_separate(tiny_config, batch):
    model = _model(tiny_config, BertForPreTraining)
    output = model(**batch)
    assert output.loss is None
    only_nsp = model(**batch, next_sentence_label=torch.tensor([0, 1]))
    assert only_nsp.mlm_loss is None and only_nsp.loss is only_nsp.nsp_loss


def test_initialization_follows_bert(tiny_config):
    config = BertConfig.mini(vocab_size=500)
    model = BertForPreTraining(config)
    embeddings = model.bert.embeddings
    assert embeddings.word_embeddings.weight[config.pad_token_id].abs().max() == 0
    query = model.bert.encoder.layer[0].attention.self.query
    assert abs(query.weight.std().item() - config.initializer_range) < 2e-3
    assert query.bias.abs().max() == 0
    norm = model.bert.encoder.layer[1].output.LayerNorm
    assert torch.all(norm.weight == 1) and torch.all(norm.bias == 0)
    assert model.cls.predictions.bias.abs().max() == 0


def test_sinusoidal_positions_have_the_given_scale_and_shift_by_a_linear_map(tiny_config):
    embeddings = _model(tiny_config).embeddings
    embeddings.init_sinusoidal_positions(std=0.02)
    table = embeddings.position_embeddings.weight.detach().double()  # (64, 32)
    assert abs(table.std().item() - 0.02) < 1e-6
    assert torch.all(table[0, 0::2] == 0)  # sin(0)
    assert torch.all(table[0, 1::2] == table[0, 1])  # cos(0), scaled
    # Vaswani et al. §3.5: PE(p + k) is a linear function of PE(p), the same for every p.
    offset = 3
    source, target = table[:-offset], table[offset:]
    shift = torch.linalg.lstsq(source, target).solution  # (H, H)
    assert torch.allclose(source @ shift, target, atol=1e-9)
    # Random (BERT-initialized) positions have no such map.
    random_table = _model(tiny_config).embeddings.position_embeddings.weight.detach().double()
    fit = (
        random_table[:-offset]
        @ torch.linalg.lstsq(random_table[:-offset], random_table[offset:]).solution
    )
    assert (fit - random_table[offset:]).abs().max() > 1e-3


def test_decoder_is_tied_to_word_embeddings(tiny_config):
    model = _model(tiny_config, BertForPreTraining)
    decoder = model.cls.predictions.decoder
    assert decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert decoder.bias is model.cls.predictions.bias
    names = [name for name, _ in model.named_parameters()]
    assert "cls.predictions.decoder.weight" not in names  # counted once, trained once


def test_state_dict_keys_equal_the_hf_manifest(tiny_config):
    lines = (TEST_DATA / "hf_bert_for_pretraining_keys.txt").read_text().splitlines()
    manifest = [line for line in lines if line and not line.startswith("#")]
    assert list(_model(tiny_config, BertForPreTraining).state_dict()) == manifest


def test_bf16_autocast_runs_close_to_fp32(tiny_config, batch):
    model = _model(tiny_config, BertForPreTraining)
    with torch.no_grad():
        full = model(**batch).mlm_logits
        with torch.autocast("cpu", dtype=torch.bfloat16):
            half = model(**batch).mlm_logits
    assert (half.float() - full).abs().max() < 0.1


def test_training_step_reduces_loss(tiny_config, batch):
    model = _model(tiny_config, BertForPreTraining).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    positions = torch.tensor([[1, 4, 9], [0, 2, 6]])
    labels = torch.tensor([[7, 8, 9], [9, 10, 11]])
    nsp = torch.tensor([0, 1])
    losses = []
    for _ in range(20):
        loss = model(
            **batch, masked_positions=positions, labels=labels, next_sentence_label=nsp
        ).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize(
    "make_inputs, message",
    [
        (lambda: {"input_ids": torch.zeros(3, dtype=torch.int64)}, r"\(B, L\) tensor"),
        (lambda: {"input_ids": torch.zeros(2, 5)}, "int64 or int32"),
        (lambda: {"input_ids": torch.full((2, 5), 99)}, r"\[0, 99\)"),
        (lambda: {"input_ids": torch.full((2, 5), -1)}, r"\[0, 99\)"),
        (lambda: {"input_ids": torch.zeros(2, 65, dtype=torch.int64)}, "max_position_embeddings"),
        (
            lambda: {
                "input_ids": torch.zeros(2, 5, dtype=torch.int64),
                "attention_mask": torch.ones(2, 4),
            },
            "attention_mask shape",
        ),
        (
            lambda: {
                "input_ids": torch.zeros(2, 5, dtype=torch.int64),
                "token_type_ids": torch.full((2, 5), 2),
            },
            "token_type_ids values",
        ),
        (
            lambda: {
                "input_ids": torch.zeros(2, 5, dtype=torch.int64),
                "attention_mask": torch.ones(2, 5),
            },
            "integer or bool",
        ),
    ],
)
def test_bad_inputs_raise_clear_errors(tiny_config, make_inputs, message):
    model = _model(tiny_config)
    with pytest.raises(ValueError, match=message):
        model(**make_inputs())


def test_bad_masked_positions_and_labels_raise(tiny_config, batch):
    model = _model(tiny_config, BertForPreTraining)
    with pytest.raises(ValueError, match="masked_positions must lie"):
        model(**batch, masked_positions=torch.tensor([[1, 11], [0, 0]]))
    with pytest.raises(ValueError, match="labels shape"):
        model(**batch, masked_positions=torch.tensor([[1], [2]]), labels=torch.zeros(2, 11).long())


def test_heads_are_initialized_without_redrawing_the_encoder(tiny_config):
    torch.manual_seed(0)
    body = BertModel(tiny_config)
    torch.manual_seed(0)
    full = BertForPreTraining(tiny_config)
    for name, value in body.state_dict().items():
        assert torch.equal(value, full.bert.state_dict()[name]), name
    assert full.cls.predictions.transform.LayerNorm.weight.eq(1).all()
    assert full.cls.predictions.bias.abs().max() == 0
