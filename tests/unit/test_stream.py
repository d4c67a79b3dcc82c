import dataclasses

import pytest
import torch

from bertlab.core.config import PretrainDataConfig
from bertlab.corpus.build import build_corpus
from bertlab.data.pretraining import SpecialIds
from bertlab.data.stream import (
    PretrainingStream,
    StreamPosition,
    StreamSpec,
    held_out_batches,
    training_batches,
)
from bertlab.tokenizer.wordpiece import Tokenizer


@pytest.fixture(scope="module", params=["mlm+nsp", "mlm packed"])
def spec(request, tmp_path_factory, pretrain_files) -> StreamSpec:
    vocab, corpus_file = pretrain_files
    tokenizer = Tokenizer.from_pretrained(vocab)
    directory = tmp_path_factory.mktemp("stream")
    corpus = build_corpus([corpus_file], tokenizer, directory / "corpus", show_progress=False)
    return StreamSpec(
        corpus.directory,
        (0, corpus.num_documents),
        PretrainDataConfig(
            max_seq_length=32,
            max_predictions_per_seq=5,
            objective=request.param.split()[0],
            pack_sequences=request.param.endswith("packed"),
        ),
        SpecialIds.from_vocab(tokenizer.get_vocab()),
        tokenizer.vocab_size,
        seed=3,
        batch_size=4,
    )


def _take(stream: PretrainingStream, count: int) -> list:
    iterator = iter(stream)
    return [next(iterator) for _ in range(count)]


def _same(first: dict, second: dict) -> bool:
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_stream_resumes_from_any_position_without_replay(spec) -> None:
    batches = _take(PretrainingStream(spec), 60)  # several epochs of a 20-document corpus
    assert len({position.epoch for _, position in batches}) > 1
    for cut in (1, 7, 23, 41):
        resumed = _take(PretrainingStream(spec, batches[cut - 1][1]), 10)
        for (expected, _), (actual, _) in zip(batches[cut : cut + 10], resumed, strict=True):
            assert _same(expected, actual)


@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # 3 workers on 2 cores
@pytest.mark.parametrize("num_workers", [0, 1, 2, 3])
def test_any_number_of_workers_gives_the_batches_and_positions_of_one_process(
    spec, num_workers
) -> None:
    """Worker k of N builds batches k, k + N, ... and the loader returns them in the stream's
    order: the same batches and positions from the start and from a resumed position."""
    uninterrupted = _take(PretrainingStream(spec), 40)  # past the end of the first epoch
    assert len({position.epoch for _, position in uninterrupted}) > 1
    for cut in (0, 13):
        start = uninterrupted[cut - 1][1] if cut else StreamPosition()
        loader = training_batches(spec, start, num_workers)
        actual = [next(loader) for _ in range(len(uninterrupted) - cut)]
        for (expected, expected_at), (batch, at) in zip(uninterrupted[cut:], actual, strict=True):
            assert _same(expected, batch)
            assert at == expected_at


def test_ranks_split_the_global_batch_of_one_process(spec) -> None:
    whole = _take(PretrainingStream(dataclasses.replace(spec, batch_size=8)), 5)
    halves = [
        _take(PretrainingStream(dataclasses.replace(spec, rank=rank, world_size=2)), 5)
        for rank in (0, 1)
    ]
    for step in range(5):
        for key in ("next_sentence_label", "masked_positions", "input_ids"):
            if key not in whole[step][0]:
                continue
            joined = torch.cat([halves[0][step][0][key], halves[1][step][0][key]])
            length = min(joined.shape[-1], whole[step][0][key].shape[-1])
            assert torch.equal(joined[..., :length], whole[step][0][key][..., :length])
        assert halves[0][step][1] == whole[step][1]


def test_masks_change_between_epochs(spec) -> None:
    first = _take(PretrainingStream(spec), 1)[0][0]
    next_epoch = _take(PretrainingStream(spec, StreamPosition(epoch=1)), 1)[0][0]
    assert not _same(first, next_epoch)


def test_held_out_batches_are_fixed_and_limited(spec) -> None:
    first = held_out_batches(spec, 10)
    assert [len(batch["input_ids"]) for batch in first] == [4, 4, 2]
    assert all(_same(a, b) for a, b in zip(first, held_out_batches(spec, 10), strict=True))


def test_packed_batches_are_full(spec) -> None:
    if not spec.data_config.pack_sequences:
        pytest.skip("packing only")
    batches = _take(PretrainingStream(spec), 20)
    full = [batch["attention_mask"].all().item() for batch, _ in batches]
    assert sum(full) >= len(full) - 2  # only a block's last sequence is short
