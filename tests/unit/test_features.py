import pytest
import torch

from bertlab.data.collate import sorted_length_batches
from bertlab.features import iterate_encoded, pad_sequences, pooled_features
from bertlab.modeling import BertModel


def test_sorted_length_batches_cover_every_index_once():
    lengths = [5, 2, 9, 3, 9, 1, 4]
    batches = sorted_length_batches(lengths, 3)
    assert batches[0] == [2, 4, 0]
    assert sorted(i for batch in batches for i in batch) == list(range(7))
    assert all(len(batch) <= 3 for batch in batches)
    with pytest.raises(ValueError, match="batch_size"):
        sorted_length_batches(lengths, 0)


def test_pad_sequences_pads_to_the_longest():
    values, mask = pad_sequences([[4, 5, 6], [7]], pad_value=0)
    assert values.tolist() == [[4, 5, 6], [7, 0, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_pooled_features_equal_one_at_a_time_in_input_order(tiny_config):
    torch.manual_seed(0)
    model = BertModel(tiny_config).eval()
    generator = torch.Generator().manual_seed(1)
    sequences = [
        torch.randint(1, 99, (int(n),), generator=generator).tolist()
        for n in torch.randint(1, 20, (13,), generator=generator)
    ]
    batched = pooled_features(model, sequences, batch_size=4)
    with torch.no_grad():
        alone = torch.cat([model(torch.tensor([s])).pooler_output for s in sequences])
    torch.testing.assert_close(batched, alone, rtol=0, atol=1e-5)
    in_bf16 = pooled_features(model, sequences, batch_size=4, use_bf16=True)
    assert (in_bf16 - alone).abs().max() < 0.05


def test_token_features_keep_real_positions(tiny_config):
    model = BertModel(tiny_config).eval()
    sequences = [[5, 6, 7, 8], [9, 10]]
    seen = {}
    for indices, hidden, _, mask in iterate_encoded(model, sequences, batch_size=2):
        for row, index in enumerate(indices):
            seen[index] = hidden[row, : int(mask[row].sum())]
    assert seen[0].shape == (4, 32) and seen[1].shape == (2, 32)
    with pytest.raises(ValueError, match="at least one token"):
        next(iterate_encoded(model, [[]]))
