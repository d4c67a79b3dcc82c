import json
import shutil
from pathlib import Path

import pytest
import torch

import bertlab
from bertlab.apps.serve import inference
from bertlab.apps.serve.models import ServedModel
from bertlab.cli import main
from bertlab.data.collate import sorted_length_batches
from bertlab.network.bert import BertModel
from bertlab.use.features import (
    CAUSAL_REFUSED_POOLINGS,
    PER_TEXT,
    POOLINGS,
    check_pooling,
    iterate_encoded,
    load_features,
    pad_sequences,
    pooled_features,
)
from bertlab.use.inspection import load_encoder


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


# --- one pooling vocabulary: `bertlab embed`, `PretrainedBert.embed` and the server's embed -------

TEXTS = ["a good film", "the cat sat on the mat"]


def _served(folder: Path) -> ServedModel:
    encoder, tokenizer = load_encoder(folder)
    return ServedModel("m", "BertForPreTraining", encoder, tokenizer, has_pooler=True)


def _cli_embed(folder: Path, out: Path, pooling: str) -> int:
    argv = ["embed", "--model", str(folder), "--out", str(out), "--pooling", pooling]
    return main([*argv, "--text", TEXTS[0], "--text", TEXTS[1]])


@pytest.fixture
def causal_folder(tmp_path, hub_model_folder) -> Path:
    """The tiny model, left-to-right."""
    folder = tmp_path / "causal"
    shutil.copytree(hub_model_folder, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | {"is_causal": True}))
    return folder


def test_the_api_the_cli_and_serve_take_the_same_poolings_alike(hub_model_folder, tmp_path):
    """Every name of POOLINGS gives the same vectors through the three; any other is refused."""
    assert POOLINGS == ("pieces", "first", "mean-pieces", "cls", "mean", "last", "pooler")
    bert, served = bertlab.load(hub_model_folder), _served(hub_model_folder)
    for pooling in POOLINGS:
        assert _cli_embed(hub_model_folder, tmp_path / pooling, pooling) == 0
        from_cli = load_features(tmp_path / pooling)
        assert from_cli.pooling == pooling
        from_api = bert.embed(TEXTS, pooling=pooling)
        from_serve = inference.embed(served, TEXTS, pooling)
        for index, record in enumerate(from_serve):
            rows = torch.from_numpy(from_cli.rows(index)[:, 0])  # (units, H)
            if pooling in PER_TEXT:
                assert rows.shape[0] == 1 and record["vectors"] is None
                torch.testing.assert_close(from_api[index], rows[0], rtol=0, atol=0)
                torch.testing.assert_close(torch.tensor(record["vector"]), rows[0])
            else:
                assert record["vector"] is None
                torch.testing.assert_close(from_api[index], rows, rtol=0, atol=0)
                torch.testing.assert_close(torch.tensor(record["vectors"]), rows)
    with pytest.raises(ValueError, match="unknown pooling 'max'; choose one of pieces, first"):
        bert.embed(TEXTS, pooling="max")
    with pytest.raises(ValueError, match="unknown pooling 'max'; choose one of pieces, first"):
        inference.embed(served, TEXTS, "max")
    with pytest.raises(SystemExit):  # argparse's choices: exit code 2
        _cli_embed(hub_model_folder, tmp_path / "max", "max")


def test_pieces_give_a_vector_per_piece_in_the_api_and_serve(hub_model_folder):
    bert, served = bertlab.load(hub_model_folder), _served(hub_model_folder)
    expected = bert.embed(TEXTS, pooling="pieces")
    assert [len(vectors) for vectors in expected] == [5, 8]  # [CLS] ... [SEP]
    pieces = inference.embed(served, TEXTS, "pieces")
    for record, vectors in zip(pieces, expected, strict=True):
        torch.testing.assert_close(torch.tensor(record["vectors"]), vectors, rtol=0, atol=1e-6)
    assert pieces[0]["tokens"] == ["[CLS]", "a", "good", "film", "[SEP]"]


def test_a_left_to_right_model_refuses_cls_and_pooler_everywhere(causal_folder, tmp_path, capsys):
    """Its [CLS] has seen only itself: every text would get one vector. Its default is "last"."""
    bert, served = bertlab.load(causal_folder), _served(causal_folder)
    refusal = "gives a left-to-right model the same vector for every text"
    for pooling in CAUSAL_REFUSED_POOLINGS:
        with pytest.raises(ValueError, match=refusal):
            bert.embed(TEXTS, pooling=pooling)
        with pytest.raises(ValueError, match=refusal):
            inference.embed(served, TEXTS, pooling)
        assert _cli_embed(causal_folder, tmp_path / pooling, pooling) == 1
        assert refusal in capsys.readouterr().err
        assert not (tmp_path / pooling).exists()
    assert check_pooling(None, is_causal=True) == "last"
    assert check_pooling(None, is_causal=False) == "cls"
    last = bert.embed(TEXTS, pooling="last")
    assert torch.equal(bert.embed(TEXTS), last) and not torch.allclose(last[0], last[1])
    assert inference.embed(served, TEXTS, None) == inference.embed(served, TEXTS, "last")
    assert _cli_embed(causal_folder, tmp_path / "last", "last") == 0
    torch.testing.assert_close(
        torch.from_numpy(load_features(tmp_path / "last").vectors[:, 0]), last
    )
