"""A positive control for `--objective electra`: bertlab's ELECTRA or transformers' on the same
batches, so that a discriminator that does not learn can be told from a bug in ours.

    python lab/electra_control.py ours runs/control/ours.jsonl --corpus-run runs/electra/pretrain
    python lab/electra_control.py hf runs/control/hf.jsonl --corpus-run runs/electra/pretrain

`--corpus-run` is a pre-training run directory with its `tokenizer/` and `corpus/` cache (any
`bertlab pretrain` run on the corpus). Both sides: a BERT-mini discriminator (4 x 256), a generator
of `--generator-size` of its width with the same depth, the embeddings shared and the generator's
output layer tied to them, loss = MLM + `--rtd-weight` x detection; no dropout, BERT's normal
initialization; the pre-training loop's AdamW (`build_optimizer`), gradient norm clipped to 1,
BERT's linear warm-up over 10% of `--total-steps` then linear decay to 0; packed sequences of 128,
batch 32, one seed. The hf side is transformers' `ElectraForPreTraining` and `ElectraForMaskedLM`;
the sampling and the replacement are bertlab's (`sample_tokens`, `replace_tokens`), so the two
sides differ only in the models. The batches come from `PretrainingStream` over all but the last
500 documents; the held-out AUC (every 250 steps) is over 512 sequences of the last 500.

Prints nothing; writes one JSON line per 50 steps (training losses, gradient norm, seconds) and,
every 250, the held-out generator loss, detection AUC and share of replaced positions.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.core.config import BertConfig, ElectraConfig, PretrainDataConfig
from bertlab.core.metrics import roc_auc
from bertlab.corpus.format import TokenizedCorpus
from bertlab.data.pretraining import SpecialIds
from bertlab.data.stream import PretrainingStream, StreamSpec, held_out_batches
from bertlab.network.bert import IGNORE_INDEX
from bertlab.network.electra import (
    ElectraForPreTraining,
    generator_config,
    replace_tokens,
    sample_tokens,
)
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.optim import build_optimizer, linear_warmup_decay

HELD_OUT_DOCUMENTS = 500
HELD_OUT_SEQUENCES = 512
LOG_EVERY, EVAL_EVERY = 50, 250
# What a step returns: loss, generator MLM loss, detection loss, (B, L) logits, (B, L) labels.
Step = Callable[[dict[str, torch.Tensor]], tuple[torch.Tensor, ...]]


def bertlab_side(config: BertConfig, args: argparse.Namespace) -> tuple[nn.Module, Step]:
    electra = ElectraConfig(generator_size=args.generator_size, rtd_weight=args.rtd_weight)
    model = ElectraForPreTraining(config, electra)

    def step(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        out = model(**batch)
        return out.loss, out.mlm_loss, out.rtd_loss, out.rtd_logits, out.rtd_labels

    return model, step


def transformers_side(config: BertConfig, args: argparse.Namespace) -> tuple[nn.Module, Step]:
    from transformers import ElectraConfig as HFConfig
    from transformers import ElectraForMaskedLM
    from transformers import ElectraForPreTraining as HFDiscriminator

    shared = {
        "vocab_size": config.vocab_size,
        "embedding_size": config.hidden_size,
        "num_hidden_layers": config.num_hidden_layers,
        "max_position_embeddings": config.max_position_embeddings,
        "type_vocab_size": config.type_vocab_size,
        "hidden_dropout_prob": 0.0,
        "attention_probs_dropout_prob": 0.0,
    }
    small = generator_config(config, args.generator_size)
    discriminator = HFDiscriminator(
        HFConfig(
            hidden_size=config.hidden_size,
            num_attention_heads=config.num_attention_heads,
            intermediate_size=config.intermediate_size,
            **shared,
        )
    )
    generator = ElectraForMaskedLM(
        HFConfig(
            hidden_size=small.hidden_size,
            num_attention_heads=small.num_attention_heads,
            intermediate_size=small.intermediate_size,
            **shared,
        )
    )
    generator.electra.embeddings = discriminator.electra.embeddings
    generator.generator_lm_head.weight = discriminator.electra.embeddings.word_embeddings.weight
    model = nn.ModuleDict({"discriminator": discriminator, "generator": generator})
    vocab = config.vocab_size

    def step(batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, ...]:
        ids, positions, labels = batch["input_ids"], batch["masked_positions"], batch["labels"]
        mask, types = batch["attention_mask"], batch["token_type_ids"]
        # (B, L) labels: the originals at the masked positions; padded slots write -100 at [CLS]
        full = torch.full_like(ids, IGNORE_INDEX).scatter(1, positions, labels)
        out = generator(input_ids=ids, attention_mask=mask, token_type_ids=types, labels=full)
        logits = out.logits.gather(1, positions[..., None].expand(-1, -1, vocab))  # (B, P, V)
        with torch.no_grad():
            replaced, rtd_labels = replace_tokens(
                ids, positions, labels, sample_tokens(logits), mask
            )
        rtd_logits = discriminator(
            input_ids=replaced, attention_mask=mask, token_type_ids=types
        ).logits
        real = rtd_labels != IGNORE_INDEX
        rtd = F.binary_cross_entropy_with_logits(rtd_logits[real], rtd_labels[real].float())
        return out.loss + args.rtd_weight * rtd, out.loss, rtd, rtd_logits, rtd_labels

    return model, step


def evaluate(model: nn.Module, step: Step, held: list[dict[str, torch.Tensor]]) -> dict:
    model.eval()
    labels, scores, losses = [], [], []
    state = torch.get_rng_state()
    torch.manual_seed(123)  # the same samples for both sides at the same weights
    with torch.no_grad():
        for batch in held:
            _, mlm_loss, _, logits, rtd_labels = step(batch)
            real = rtd_labels != IGNORE_INDEX
            labels.append(rtd_labels[real])
            scores.append(logits[real])
            losses.append(float(mlm_loss))
    torch.set_rng_state(state)
    model.train()
    y, s = torch.cat(labels), torch.cat(scores)
    return {
        "mlm_loss": sum(losses) / len(losses),
        "rtd_auc": roc_auc(s.tolist(), y.tolist()),
        "replaced": float(y.float().mean()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("side", choices=["ours", "hf"])
    parser.add_argument("out", type=Path, help="JSON lines file to write")
    parser.add_argument("--corpus-run", type=Path, required=True)
    parser.add_argument("--mask", type=float, default=0.15, help="share of tokens masked")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--steps", type=int, default=1000, help="steps to run")
    parser.add_argument("--total-steps", type=int, default=4600, help="the schedule's length")
    parser.add_argument("--rtd-weight", type=float, default=50.0)
    parser.add_argument("--generator-size", type=float, default=0.25)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)

    vocab = Tokenizer.from_pretrained(args.corpus_run / "tokenizer").get_vocab()
    special = SpecialIds.from_vocab(vocab)
    data = PretrainDataConfig(
        objective="electra",
        mlm_probability=args.mask,
        pack_sequences=True,
        max_predictions_per_seq=math.ceil(128 * args.mask),
    )
    corpus = args.corpus_run / "corpus"
    documents = len(TokenizedCorpus.open(corpus).documents)
    split = documents - HELD_OUT_DOCUMENTS
    train = StreamSpec(corpus, (0, split), data, special, len(vocab), 0, 32)
    held_spec = StreamSpec(corpus, (split, documents), data, special, len(vocab), 1, 32)
    held = held_out_batches(held_spec, HELD_OUT_SEQUENCES)

    config = BertConfig.from_preset(
        "mini", vocab_size=len(vocab), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
    )
    side = bertlab_side if args.side == "ours" else transformers_side
    model, step = side(config, args)
    params = list(model.parameters())
    optimizer = build_optimizer(model, args.learning_rate)  # the loop's AdamW and its groups
    schedule = linear_warmup_decay(optimizer, int(0.1 * args.total_steps), args.total_steps)
    started = time.time()
    with args.out.open("w", encoding="utf-8") as log:
        for index, (batch, _) in enumerate(PretrainingStream(train)):
            if index == args.steps:
                break
            loss, mlm_loss, rtd_loss, _, _ = step(batch)
            loss.backward()
            norm = nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            schedule.step()
            done = index + 1
            if done % LOG_EVERY:
                continue
            record = {
                "step": done,
                "mlm": float(mlm_loss.detach()),
                "rtd": float(rtd_loss.detach()),
                "norm": float(norm),
                "seconds": round(time.time() - started, 1),
            }
            if done % EVAL_EVERY == 0:
                record |= evaluate(model, step, held)
            print(json.dumps(record), file=log, flush=True)


if __name__ == "__main__":
    main()
