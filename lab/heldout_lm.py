"""Held-out perplexity per piece of finished left-to-right runs, and of each run's untrained start.

Every left-to-right model bertlab pre-trains (`--architecture nnlm|elmo|awd-lstm`, and a BERT
with `--objective clm`) logs `lm_perplexity` on its held-out documents. This scores the final
models again on the same held-out sequences (the corpus's last documents, packed, the loop's
evaluation seed) and, beside each, the same network freshly initialized (its config, seed 0):
what its training bought. ELMo is scored by its forward LM.

    python lab/heldout_lm.py --corpus-cache runs/lstm/corpus \\
        nnlm=runs/lstm/nnlm elmo=runs/lstm/elmo awd=runs/lstm/awd-lstm

The runs must share the tokenized corpus's vocabulary (`bertlab pretrain --tokenizer`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from bertlab.core.config import BertConfig, PretrainConfig, PretrainDataConfig
from bertlab.core.lstm_config import lstm_config_from_dict
from bertlab.core.run_folder import FINAL_DIR
from bertlab.core.runtime import set_seed
from bertlab.corpus.format import TokenizedCorpus
from bertlab.corpus.prepare import held_out_split
from bertlab.data.pretraining import SpecialIds
from bertlab.data.stream import EVAL_SEED_OFFSET, StreamSpec, held_out_batches
from bertlab.network.bert import BertForPreTraining
from bertlab.network.lm_architectures import lm_architecture
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.pretraining.lm_objectives import LM_OBJECTIVES
from bertlab.training.pretraining.objectives import OBJECTIVES
from bertlab.training.pretraining.stats import evaluate


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="NAME=DIR: a `bertlab pretrain --out` directory")
    parser.add_argument("--corpus-cache", required=True, help="the runs' tokenized corpus")
    parser.add_argument("--examples", type=int, default=PretrainConfig.eval_examples)
    parser.add_argument("--max-seq-length", type=int, default=128)
    return parser.parse_args()


def _models(final: Path):
    """(objective, trained model, untrained model of the same config) of a run's OUT/final."""
    values = json.loads((final / "config.json").read_text(encoding="utf-8"))
    if "architecture" in values:  # an LSTM-era network's config.json
        config = lstm_config_from_dict({k: v for k, v in values.items() if k != "architectures"})
        model_class = lm_architecture(config.architecture)[1]
        set_seed(0)
        untrained = model_class.build_for_checkpoint(
            config, model_class.from_pretrained(final).state_dict(), {}
        )
        return LM_OBJECTIVES[config.architecture], model_class.from_pretrained(final), untrained
    config = BertConfig.from_json_file(final / "config.json")
    set_seed(0)
    return OBJECTIVES["clm"], BertForPreTraining.from_pretrained(final), BertForPreTraining(config)


def main() -> None:
    args = _parse()
    runs = [run.split("=", 1) for run in args.runs]
    if any(len(run) != 2 for run in runs):
        raise SystemExit("heldout_lm: give each run as NAME=DIR")
    tokenizer = Tokenizer.from_pretrained(Path(runs[0][1]) / FINAL_DIR)
    corpus = TokenizedCorpus.open(Path(args.corpus_cache))
    num_train, num_held_out = held_out_split(corpus.num_documents, args.examples)
    data_config = PretrainDataConfig(
        max_seq_length=args.max_seq_length, objective="clm", pack_sequences=True
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
    print(f"{len(batches)} batches of held-out text from {num_held_out} documents")
    cpu = torch.device("cpu")
    for name, directory in runs:
        objective, trained, untrained = _models(Path(directory) / FINAL_DIR)
        figures = []
        for model in (untrained, trained):
            values = evaluate(
                model.eval(), batches, cpu, "fp32", objective.batch_stats,
                objective.detection_scores, objective.forward,
            )  # fmt: skip
            figures.append(objective.named(values)["lm_perplexity"])
        print(
            f"{name}: held-out perplexity per piece untrained {figures[0]:,.1f}, trained "
            f"{figures[1]:,.1f} ({figures[1] / figures[0]:.3f} of the untrained)"
        )


if __name__ == "__main__":
    main()
