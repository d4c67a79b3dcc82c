"""Parity with Hugging Face `transformers` (random weights, fp32, eval mode), both ways."""

import pytest
import torch

from bertlab.core.config import BertConfig
from bertlab.network.bert import BertForPreTraining, BertModel

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.golden

ATOL = 1e-5


def hf_config(config: BertConfig, attn_implementation: str):
    return transformers.BertConfig(**config.to_dict(), attn_implementation=attn_implementation)


@pytest.fixture(params=["tiny", "all_sizes_different"])
def parity_config(request, odd_config) -> BertConfig:
    """Google's BERT-Tiny sizes, and a config whose sizes are all different."""
    if request.param == "tiny":
        return BertConfig.tiny(vocab_size=99, max_position_embeddings=64)
    return odd_config


def padded_batch(config: BertConfig):
    generator = torch.Generator().manual_seed(3)
    input_ids = torch.randint(1, config.vocab_size, (3, 13), generator=generator)
    attention_mask = torch.ones(3, 13, dtype=torch.int64)
    attention_mask[1, 9:] = 0
    attention_mask[2, 4:] = 0
    input_ids[attention_mask == 0] = config.pad_token_id
    token_type_ids = torch.randint(0, config.type_vocab_size, (3, 13), generator=generator)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "token_type_ids": token_type_ids,
    }


def assert_same(ours, theirs, hf_body, batch):
    rows, seq_len = batch["input_ids"].shape
    positions = torch.tensor([[0, 5, seq_len - 1], [1, 2, 8], [3, 3, 0]])[:rows]
    with torch.no_grad():
        body = ours.bert(**batch)
        reference_body = hf_body(**batch)
        output = ours(**batch)
        sparse = ours(**batch, masked_positions=positions)
        reference = theirs(**batch)
    torch.testing.assert_close(
        body.last_hidden_state, reference_body.last_hidden_state, rtol=0, atol=ATOL
    )
    torch.testing.assert_close(body.pooler_output, reference_body.pooler_output, rtol=0, atol=ATOL)
    torch.testing.assert_close(output.mlm_logits, reference.prediction_logits, rtol=0, atol=ATOL)
    torch.testing.assert_close(
        output.nsp_logits, reference.seq_relationship_logits, rtol=0, atol=ATOL
    )
    gathered = torch.stack([reference.prediction_logits[b, positions[b]] for b in range(rows)])
    torch.testing.assert_close(sparse.mlm_logits, gathered, rtol=0, atol=ATOL)


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
def test_bertlab_checkpoint_loads_in_transformers_with_equal_outputs(
    tmp_path, parity_config, attn_implementation
):
    config = parity_config
    torch.manual_seed(0)
    ours = BertForPreTraining(config).eval()
    ours.save_pretrained(tmp_path)
    theirs, info = transformers.BertForPreTraining.from_pretrained(
        tmp_path, output_loading_info=True, attn_implementation=attn_implementation
    )
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert not info["mismatched_keys"], info
    theirs.eval()
    assert_same(ours, theirs, theirs.bert, padded_batch(config))


def test_transformers_checkpoint_loads_in_bertlab_with_equal_outputs(tmp_path, parity_config):
    config = parity_config
    torch.manual_seed(1)
    theirs = transformers.BertForPreTraining(hf_config(config, "sdpa")).eval()
    with torch.no_grad():  # make the MLM bias non-zero so that a lost bias would show
        theirs.cls.predictions.bias.normal_()
    theirs.save_pretrained(tmp_path)
    ours = BertForPreTraining.from_pretrained(tmp_path).eval()
    assert ours.config == config
    assert_same(ours, theirs, theirs.bert, padded_batch(config))


def test_state_dict_loads_strictly_both_ways(tiny_config, batch):
    torch.manual_seed(2)
    ours = BertForPreTraining(tiny_config).eval()
    theirs = transformers.BertForPreTraining(hf_config(tiny_config, "sdpa")).eval()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    assert_same(ours, theirs, theirs.bert, batch)
    torch.manual_seed(3)
    theirs = transformers.BertForPreTraining(hf_config(tiny_config, "sdpa")).eval()
    ours.load_state_dict(theirs.state_dict(), strict=True)
    assert_same(ours, theirs, theirs.bert, batch)


def test_bare_model_matches_transformers_bert_model(tmp_path, odd_config):
    torch.manual_seed(4)
    theirs = transformers.BertModel(hf_config(odd_config, "sdpa")).eval()
    theirs.save_pretrained(tmp_path)
    ours = BertModel.from_pretrained(tmp_path).eval()
    batch = padded_batch(odd_config)
    with torch.no_grad():
        mine, reference = ours(**batch), theirs(**batch)
    torch.testing.assert_close(
        mine.last_hidden_state, reference.last_hidden_state, rtol=0, atol=ATOL
    )
    torch.testing.assert_close(mine.pooler_output, reference.pooler_output, rtol=0, atol=ATOL)


def test_hidden_states_and_attentions_match_transformers(tiny_config, batch):
    torch.manual_seed(5)
    ours = BertModel(tiny_config).eval()
    theirs = transformers.BertModel(hf_config(tiny_config, "eager")).eval()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    with torch.no_grad():
        mine = ours(**batch, output_hidden_states=True, output_attentions=True)
        reference = theirs(**batch, output_hidden_states=True, output_attentions=True)
    assert len(mine.hidden_states) == len(reference.hidden_states)
    for a, b in zip(mine.hidden_states, reference.hidden_states, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=ATOL)
    for a, b in zip(mine.attentions, reference.attentions, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=ATOL)


def test_causal_checkpoint_stays_causal_in_transformers(tmp_path, tiny_config, batch):
    causal = tiny_config.replace(is_causal=True)
    torch.manual_seed(6)
    ours = BertModel(causal).eval()
    ours.save_pretrained(tmp_path)
    theirs = transformers.BertModel.from_pretrained(tmp_path).eval()
    assert theirs.config.is_decoder
    with torch.no_grad():
        mine = ours(**batch)
        reference = theirs(**batch, use_cache=False)
    torch.testing.assert_close(
        mine.last_hidden_state, reference.last_hidden_state, rtol=0, atol=ATOL
    )


def test_training_gradients_match_transformers(tiny_config, batch):
    """Same loss and same gradients for one MLM + NSP step (dropout off)."""
    config = tiny_config.replace(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(7)
    ours = BertForPreTraining(config).train()
    theirs = transformers.BertForPreTraining(hf_config(config, "sdpa")).train()
    theirs.load_state_dict(ours.state_dict(), strict=True)
    positions = torch.tensor([[1, 4, 9], [0, 2, 6]])
    sparse_labels = torch.tensor([[7, 8, 9], [9, 10, 11]])
    dense_labels = torch.full((2, 11), -100)
    for b in range(2):
        dense_labels[b, positions[b]] = sparse_labels[b]
    nsp = torch.tensor([0, 1])
    loss = ours(
        **batch, masked_positions=positions, labels=sparse_labels, next_sentence_label=nsp
    ).loss
    reference = theirs(**batch, labels=dense_labels, next_sentence_label=nsp).loss
    loss.backward()
    reference.backward()
    torch.testing.assert_close(loss, reference, rtol=0, atol=ATOL)
    grads = dict(theirs.named_parameters())
    for name, parameter in ours.named_parameters():
        torch.testing.assert_close(parameter.grad, grads[name].grad, rtol=1e-4, atol=1e-6, msg=name)
