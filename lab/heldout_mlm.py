"""Held-out masked-LM loss and accuracy of finished pre-training runs, all at one masking rate.

`bertlab pretrain` evaluates each run at its own `--mlm-probability`, so runs with different
masking rates are not comparable on its curves: more masking leaves less context and a harder
task. This scores every run's final model on the same held-out sequences with the same masks
(the corpus's last documents, as the training loop holds them out; the loop's evaluation seed),
so the masking rate is the only difference left. A model directory (a run's checkpoint, say)
is scored as it is, so one run's curve can be re-scored at another rate.

    python lab/heldout_mlm.py --corpus-cache runs/mini/pretrain/corpus \\
        --mlm-probability 0.15 m15=runs/mask/m15 m20=runs/mask/m20 m40=runs/mask/m40

The runs must share the tokenized corpus's vocabulary (`bertlab pretrain --tokenizer`).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import torch

from bertlab.core.config import PretrainConfig, PretrainDataConfig
from bertlab.core.run_folder import FINAL_DIR
from bertlab.corpus.format import TokenizedCorpus
from bertlab.corpus.prepare import held_out_split
from bertlab.data.pretraining import SpecialIds
from bertlab.data.stream import EVAL_SEED_OFFSET, StreamSpec, held_out_batches
from bertlab.network.bert import IGNORE_INDEX, BertForPreTraining
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.pretraining.objectives import OBJECTIVES
from bertlab.training.pretraining.stats import evaluate


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "runs",
        nargs="+",
        help="NAME=DIR: a `bertlab pretrain --out` directory (its final model) or a model",
    )
    parser.add_argument("--corpus-cache", required=True, help="the runs' tokenized corpus")
    parser.add_argument("--mlm-probability", type=float, default=0.15)
    parser.add_argument("--examples", type=int, default=2048, help="held-out sequences, at most")
    parser.add_argument("--max-seq-length", type=int, default=128)
    return parser.parse_args()


def _model_dir(directory: str) -> Path:
    """A run directory's final model, or the model directory itself."""
    path = Path(directory)
    return path / FINAL_DIR if (path / FINAL_DIR).is_dir() else path


def main() -> None:
    args = _parse()
    runs = [run.split("=", 1) for run in args.runs]
    if any(len(run) != 2 for run in runs):
        raise SystemExit("heldout_mlm: give each run as NAME=DIR")
    tokenizer = Tokenizer.from_pretrained(_model_dir(runs[0][1]))
    corpus = TokenizedCorpus.open(Path(args.corpus_cache))
    num_train, num_held_out = held_out_split(corpus.num_documents, PretrainConfig.eval_examples)
    data_config = PretrainDataConfig(
        max_seq_length=args.max_seq_length,
        mlm_probability=args.mlm_probability,
        max_predictions_per_seq=math.ceil(args.max_seq_length * args.mlm_probability),
        objective="mlm",
        pack_sequences=True,
    )
    spec = StreamSpec(
        corpus.directory,
        (num_train, num_train + num_held_out),
        data_config,
        SpecialIds.from_vocab(tokenizer.get_vocab()),
        len(tokenizer.get_vocab()),
        PretrainConfig.seed + EVAL_SEED_OFFSET,
        batch_size=64,
    )
    batches = held_out_batches(spec, args.examples)
    count = sum(int((batch["labels"] != IGNORE_INDEX).sum()) for batch in batches)
    print(
        f"{len(batches)} batches, {count:,} masked tokens at {args.mlm_probability:.0%} "
        f"from {num_held_out} held-out documents"
    )
    for name, directory in runs:
        model = BertForPreTraining.from_pretrained(_model_dir(directory)).eval()
        if model.config.vocab_size != spec.vocab_size:
            raise SystemExit(f"heldout_mlm: {name} has another vocabulary than the corpus cache")
        mlm = OBJECTIVES["mlm"]
        cpu = torch.device("cpu")
        values = evaluate(
            model, batches, cpu, "fp32", mlm.batch_stats, mlm.detection_scores, mlm.forward
        )
        print(
            f"{name}: held-out MLM loss {values['mlm_loss']:.3f}, "
            f"accuracy {values['mlm_accuracy']:.1%}"
        )


if __name__ == "__main__":
    main()
