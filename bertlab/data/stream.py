"""The endless, resumable stream of pre-training batches over a tokenized corpus.

Each epoch visits the training documents in a fresh random order, in blocks of `BLOCK_DOCUMENTS`.
The instances of one block (`create_instances_from_document`, one rng per document and epoch) are
shuffled together and masked one by one (`make_example` with `example_rng(seed, epoch, index)`), so
masks are fresh every epoch (dynamic masking) and do not depend on how the stream was cut.

The position in the stream is `StreamPosition(epoch, block, offset, index)`. Resuming rebuilds
one block and skips `offset` instances: constant time, no replay of earlier batches.

Distributed training: every process walks the same stream of global micro-batches of
`batch_size * world_size` instances and takes its own `batch_size` slice, so the data of a
global batch does not depend on the number of processes.

DataLoader workers: with N workers, worker k masks and collates batches k, k + N, k + 2N, ...
of the same stream (every worker walks all instances, which is cheap; masking and collating
are the work). The DataLoader fetches from its workers in turn, so the batches, their order
and their positions are those of one process, whatever N.

A run trains on the corpus's documents before the held-out ones (`training_stream`, the split
of `bertlab.corpus.prepare.held_out_split`), its batches built by DataLoader workers
(`training_batches`); the held-out ones are masked once, with seeds EVAL_SEED_OFFSET away from
the training seed's (`held_out_batches`).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from bertlab.core.config import PretrainConfig, PretrainDataConfig
from bertlab.core.runtime import SINGLE_PROCESS, DistributedContext
from bertlab.corpus.format import TokenizedCorpus
from bertlab.corpus.prepare import held_out_split
from bertlab.data.collate import collate_pretraining
from bertlab.data.masking import example_rng, make_example
from bertlab.data.pretraining import (
    Instance,
    SpecialIds,
    create_instances_from_document,
    pack_documents,
)

# Documents whose instances are shuffled together. Google shuffles all instances of the corpus;
# with the document order itself shuffled, a few hundred documents (thousands of instances) mix
# the batches well, and a resume rebuilds only one block.
BLOCK_DOCUMENTS = 256
EVAL_SEED_OFFSET = 1_000_003  # held-out masks differ from any training seed's
PREFETCH_BATCHES = 8  # batches a data worker keeps ready


@dataclass(frozen=True)
class StreamPosition:
    """Where the next instance comes from: `offset` instances into `block` of `epoch`; `index`
    counts the epoch's instances before it (it seeds the masks)."""

    epoch: int = 0
    block: int = 0
    offset: int = 0
    index: int = 0

    def to_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


class DocumentRange(Sequence):
    """Documents `start..stop` of a sequence of documents, re-indexed from 0 (a train or
    held-out split: random NotNext sentences then come from the same split)."""

    def __init__(self, documents: Sequence, start: int, stop: int) -> None:
        if not 0 <= start <= stop <= len(documents):
            raise ValueError(f"bad document range {start}..{stop} of {len(documents)}")
        self._documents, self._start, self._stop = documents, start, stop

    def __len__(self) -> int:
        return self._stop - self._start

    def __getitem__(self, index: int):
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._documents[self._start + index]


@dataclass(frozen=True)
class StreamSpec:
    """Everything that defines a stream; picklable, so a DataLoader worker can rebuild it."""

    corpus_dir: Path
    documents: tuple[int, int]  # [start, stop) of the corpus's documents
    data_config: PretrainDataConfig
    special: SpecialIds
    vocab_size: int
    seed: int
    batch_size: int  # examples per process and micro-batch
    rank: int = 0
    world_size: int = 1


class PretrainingStream(torch.utils.data.IterableDataset):
    """Yields `(batch, position_after_batch)` forever, starting at `start`.

    `batch` is `collate_pretraining`'s dict for this process's slice of the global micro-batch.
    In DataLoader worker k of N, only batches k, k + N, ... (the module's docstring).
    """

    def __init__(self, spec: StreamSpec, start: StreamPosition = StreamPosition()) -> None:
        super().__init__()
        self.spec, self.start = spec, start

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], StreamPosition]]:
        spec = self.spec
        worker = torch.utils.data.get_worker_info()
        share, num_shares = (worker.id, worker.num_workers) if worker is not None else (0, 1)
        corpus = TokenizedCorpus.open(spec.corpus_dir)
        documents = DocumentRange(corpus.documents, *spec.documents)
        word_starts = None
        if spec.data_config.do_whole_word_mask:
            if corpus.word_starts is None:
                raise ValueError("whole-word masking needs a corpus built with whole_word=True")
            word_starts = DocumentRange(corpus.word_starts, *spec.documents)
        global_size = spec.batch_size * spec.world_size
        mine = range(spec.rank * spec.batch_size, (spec.rank + 1) * spec.batch_size)
        pending: list[tuple[Instance, StreamPosition]] = []
        number = 0  # of the global micro-batch being gathered
        for item in _instances(documents, word_starts, spec, self.start):
            pending.append(item)
            if len(pending) < global_size:
                continue
            if number % num_shares == share:  # this worker's batch
                examples = [
                    make_example(
                        pending[i][0],
                        spec.data_config,
                        spec.special,
                        spec.vocab_size,
                        example_rng(spec.seed, pending[i][1].epoch, pending[i][1].index),
                    )
                    for i in mine
                ]
                yield collate_pretraining(examples, spec.special.pad), _after(pending[-1][1])
            number += 1
            pending = []


def _after(position: StreamPosition) -> StreamPosition:
    return dataclasses.replace(position, offset=position.offset + 1, index=position.index + 1)


def _document_order(seed: int, epoch: int, num_documents: int) -> np.ndarray:
    return np.random.default_rng([seed, epoch]).permutation(num_documents)


def block_instances(
    documents: Sequence,
    word_starts: Sequence | None,
    spec: StreamSpec,
    epoch: int,
    block: int,
) -> list[Instance]:
    """The shuffled instances of one block of one epoch (empty past the last block)."""
    order = _document_order(spec.seed, epoch, len(documents))
    block_documents = order[block * BLOCK_DOCUMENTS : (block + 1) * BLOCK_DOCUMENTS]
    config = spec.data_config
    if config.pack_sequences:
        instances = pack_documents(
            documents,
            block_documents.tolist(),
            config.max_seq_length,
            spec.special.sep,
            word_starts,
        )
        random.Random(f"bertlab-shuffle:{spec.seed}:{epoch}:{block}").shuffle(instances)
        return instances
    instances = []
    for doc_index in block_documents.tolist():
        rng = random.Random(f"bertlab-instances:{spec.seed}:{epoch}:{doc_index}")
        instances += create_instances_from_document(
            documents,
            doc_index,
            config.max_seq_length,
            config.short_seq_prob,
            rng,
            config.objective,
            config.random_next_prob,
            word_starts,
        )
    random.Random(f"bertlab-shuffle:{spec.seed}:{epoch}:{block}").shuffle(instances)
    return instances


def _instances(
    documents: Sequence, word_starts: Sequence | None, spec: StreamSpec, start: StreamPosition
) -> Iterator[tuple[Instance, StreamPosition]]:
    """Every instance with its position, from `start` on, epoch after epoch."""
    if len(documents) == 0:
        raise ValueError("no documents to build pre-training instances from")
    num_blocks = -(-len(documents) // BLOCK_DOCUMENTS)
    epoch, block, offset, index = start.epoch, start.block, start.offset, start.index
    while True:
        produced = False
        while block < num_blocks:
            instances = block_instances(documents, word_starts, spec, epoch, block)
            for position in range(offset, len(instances)):
                produced = True
                yield instances[position], StreamPosition(epoch, block, position, index)
                index += 1
            block, offset = block + 1, 0
        if not produced and start.block == 0 and start.offset == 0:
            raise ValueError("the corpus yields no pre-training instances")
        epoch, block, offset, index = epoch + 1, 0, 0, 0
        start = StreamPosition(epoch)


def held_out_batches(spec: StreamSpec, num_examples: int) -> list[dict[str, torch.Tensor]]:
    """Up to `num_examples` examples of one pass over `spec`'s documents, masked once, in
    batches of `spec.batch_size`: a fixed evaluation set."""
    corpus = TokenizedCorpus.open(spec.corpus_dir)
    documents = DocumentRange(corpus.documents, *spec.documents)
    word_starts = None
    if spec.data_config.do_whole_word_mask:
        word_starts = DocumentRange(corpus.word_starts, *spec.documents)
    examples = []
    num_blocks = -(-len(documents) // BLOCK_DOCUMENTS)
    for block in range(num_blocks):
        for instance in block_instances(documents, word_starts, spec, 0, block):
            if len(examples) == num_examples:
                break
            rng = example_rng(spec.seed, 0, len(examples))
            examples.append(
                make_example(instance, spec.data_config, spec.special, spec.vocab_size, rng)
            )
    return [
        collate_pretraining(examples[start : start + spec.batch_size], spec.special.pad)
        for start in range(0, len(examples), spec.batch_size)
    ]


# --- a run's stream ----------------------------------------------------------------------------


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
