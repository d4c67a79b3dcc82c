"""What a pre-training run trains and evaluates on: the corpus's last documents held out for
evaluation, the rest as the batch stream of `bertlab.data.stream`, built by data workers the
same for any number of them.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from bertlab.core.config import PretrainConfig, PretrainDataConfig
from bertlab.core.runtime import SINGLE_PROCESS, DistributedContext
from bertlab.corpus.format import TokenizedCorpus
from bertlab.corpus.prepare import held_out_split
from bertlab.data.pretraining import SpecialIds
from bertlab.data.stream import PretrainingStream, StreamPosition, StreamSpec

EVAL_SEED_OFFSET = 1_000_003  # held-out masks differ from any training seed's
PREFETCH_BATCHES = 8  # batches a data worker keeps ready


def training_stream(
    corpus: TokenizedCorpus,
    special: SpecialIds,
    vocab_size: int,
    data_config: PretrainDataConfig,
    config: PretrainConfig,
    context: DistributedContext = SINGLE_PROCESS,
) -> StreamSpec:
    """The batch stream a run trains on: the corpus's documents before the held-out ones."""
    num_train, _ = held_out_split(corpus.num_documents, config.eval_examples)
    return StreamSpec(
        corpus.directory,
        (0, num_train),
        data_config,
        special,
        vocab_size,
        config.seed,
        config.micro_batch_size,
        context.rank,
        context.world_size,
    )


def training_batches(
    spec: StreamSpec, start: StreamPosition, num_workers: int, pin_memory: bool = False
) -> Iterator[tuple[dict[str, torch.Tensor], StreamPosition]]:
    """`PretrainingStream(spec, start)`'s batches and positions, built by `num_workers` worker
    processes (0: in this process), the same for any number of them.

    Args:
        spec: the stream.
        start: where it starts (a resumed run's `Progress.position`).
        num_workers: DataLoader worker processes, each `PREFETCH_BATCHES` batches ahead.
        pin_memory: batches in page-locked memory, for copies to CUDA that do not block.
    """
    loader = torch.utils.data.DataLoader(
        PretrainingStream(spec, start),
        batch_size=None,
        num_workers=num_workers,
        prefetch_factor=PREFETCH_BATCHES if num_workers else None,
        pin_memory=pin_memory,
        # Its own generator: creating the iterator must not draw from the global RNG,
        # or a resumed run's dropout would differ from the uninterrupted run's.
        generator=torch.Generator(),
    )
    return iter(loader)
