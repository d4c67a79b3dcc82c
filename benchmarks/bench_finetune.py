"""One epoch of SST-2 fine-tuning at mini size: dynamic padding with length-grouped batches against
padding every batch to 128 (what `transformers`' run_glue.py does by default, pad_to_max_length).

Both sides run in this process on copies of the same initial model, with the same optimizer step
(forward, backward, clipping, fused AdamW, schedule); only the batches differ. They are
interleaved in blocks of steps, so drifts of this shared virtual machine hit both alike. Wall times
are summed per side and the ratio printed. `--limit N` times a random sample of N sentences and
also prints the epoch time extrapolated to the whole file.

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_finetune.py [--limit 6400]
"""

# Shapes: B batch, L sequence length.

from __future__ import annotations

import argparse
import copy
import math
import random
import time
from pathlib import Path

import torch

from bertlab.core.config import BertConfig
from bertlab.core.finetune_config import FinetuneConfig
from bertlab.data.collate import collate_task_batch, length_grouped_batches, pad_rows
from bertlab.data.tasks.classification import read_glue
from bertlab.data.tasks.encoding import encode_classification
from bertlab.network.heads import BertForSequenceClassification
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.optim import build_optimizer, linear_warmup_decay

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
PADDED_LENGTH = 128  # run_glue.py max_seq_length default, with pad_to_max_length=True
BLOCK_STEPS = 10  # steps of one side before switching to the other


def padded_batch(features: list[dict], length: int, pad_token_id: int) -> dict[str, torch.Tensor]:
    """Every row padded to `length`, as a tokenizer called with padding="max_length" does."""
    rows = [feature["input_ids"] for feature in features]
    return {
        "input_ids": pad_rows(rows, length, pad_token_id),  # (B, 128)
        "attention_mask": pad_rows([[1] * len(row) for row in rows], length, 0),  # (B, 128)
        "token_type_ids": pad_rows([f["token_type_ids"] for f in features], length, 0),
        "labels": torch.tensor([feature["labels"] for feature in features]),  # (B,)
    }


class Side:
    """One way of batching, with its own copy of the model, optimizer and clock."""

    def __init__(self, name: str, model, batches: list, config: FinetuneConfig) -> None:
        self.name, self.model, self.batches = name, model, batches
        self.optimizer = build_optimizer(model, config.learning_rate, config.weight_decay)
        total = len(batches)
        self.scheduler = linear_warmup_decay(
            self.optimizer, round(config.warmup_proportion * total), total
        )
        self.max_grad_norm = config.max_grad_norm
        self.seconds = 0.0
        self.next = 0
        self.tokens = 0

    def run(self, num_steps: int) -> None:
        self.model.train()
        for batch in self.batches[self.next : self.next + num_steps]:
            started = time.perf_counter()
            loss = self.model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.max_grad_norm)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)
            self.seconds += time.perf_counter() - started
            self.tokens += batch["input_ids"].numel()
        self.next += num_steps

    @property
    def done(self) -> bool:
        return self.next >= len(self.batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", default=str(SHARED / "glue" / "SST-2" / "train.tsv"))
    parser.add_argument("--vocab", default=str(SHARED / "vocab" / "bert-base-uncased-vocab.txt"))
    parser.add_argument("--size", default="mini")
    parser.add_argument("--limit", type=int, default=None, help="time a sample of N sentences")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: all)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    config = FinetuneConfig()
    tokenizer = Tokenizer.from_pretrained(args.vocab)
    examples = read_glue("sst2", args.train)
    num_total = len(examples)
    if args.limit is not None and args.limit < num_total:
        examples = random.Random(0).sample(examples, args.limit)
    started = time.perf_counter()
    features = encode_classification(examples, tokenizer, PADDED_LENGTH, {"0": 0, "1": 1})
    print(f"encoded {len(features)} sentences in {time.perf_counter() - started:.1f} s", flush=True)
    lengths = [len(feature["input_ids"]) for feature in features]
    print(f"tokens per sentence: mean {sum(lengths) / len(lengths):.1f}, max {max(lengths)}")

    torch.manual_seed(0)
    model_config = BertConfig.from_preset(args.size, vocab_size=tokenizer.vocab_size)
    model = BertForSequenceClassification(model_config, id2label={0: "0", 1: "1"})
    pad = tokenizer.pad_token_id
    batch_size = config.batch_size
    grouped = length_grouped_batches(lengths, batch_size, random.Random(0))
    order = list(range(len(features)))
    random.Random(0).shuffle(order)
    plain = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    sides = [
        Side(
            "dynamic padding, length-grouped",
            copy.deepcopy(model),
            [collate_task_batch([features[i] for i in b], pad) for b in grouped],
            config,
        ),
        Side(
            f"every batch padded to {PADDED_LENGTH}",
            copy.deepcopy(model),
            [padded_batch([features[i] for i in b], PADDED_LENGTH, pad) for b in plain],
            config,
        ),
    ]
    print(f"{len(grouped)} steps of batch {batch_size} per side, {args.size}, fp32, "
          f"{torch.get_num_threads()} threads, interleaved in blocks of {BLOCK_STEPS}")  # fmt: skip
    while not all(side.done for side in sides):
        for side in sides:
            if not side.done:
                side.run(BLOCK_STEPS)
    scale = num_total / len(features)
    for side in sides:
        print(
            f"{side.name:<36} {side.seconds:8.1f} s  ({side.tokens / side.seconds:8.0f} "
            f"tokens/s incl. padding)  epoch of {num_total}: ~{side.seconds * scale / 60:.1f} min"
        )
    ratio = sides[1].seconds / sides[0].seconds
    print(f"speed-up of dynamic padding: {ratio:.2f}x (target >= 3x)")
    if not math.isfinite(ratio):
        raise SystemExit("no steps timed")


if __name__ == "__main__":
    main()
