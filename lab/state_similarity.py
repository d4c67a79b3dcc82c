"""How alike an encoder's last-layer states are: a check for a collapsed pre-training.

    python lab/state_similarity.py runs/electra/pretrain/final runs/mlm/pretrain/final \
        --texts ../shared/data/glue/SST-2/train.tsv

For the first `--count` sentences of a file (one per line, or a TSV whose first column is the
text, header skipped), it prints per model:

- within: the mean cosine between the last-layer states of two different pieces of one sentence
  ([CLS] and [SEP] included), averaged over sentences;
- across: the mean cosine between the [CLS] states of two different sentences;
- [CLS] spread: the mean over dimensions of the [CLS] states' standard deviation across
  sentences, divided by their mean norm.

An encoder that gives every input the same [CLS] state reads 1.000 across and a spread near 0:
a classifier on [CLS] has nothing to read. A fully collapsed one, the same state at every
position, also reads 1.000 within. The budget recipe's masked-LM BERT-minis read 0.27-0.37
within, 0.72-0.98 across and spreads of 0.008-0.032 on SST-2's first 64 sentences; ELECTRA's
discriminators 0.80-1.00, 0.95-1.00 and at most 0.012 (lab/electra-notebook.md).
"""

from __future__ import annotations

import argparse
from itertools import islice
from pathlib import Path

import torch

from bertlab.corpus.text_files import read_lines
from bertlab.network.bert import BertModel
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.use.features import extract_features


def read_texts(path: Path, count: int) -> list[str]:
    """The first `count` texts of a plain (or .gz) or tab-separated file (a TSV's header
    skipped), read as bertlab reads a corpus (`bertlab.corpus.text_files.read_lines`)."""
    lines = read_lines([path])
    if path.suffix == ".tsv":
        next(lines, None)
        lines = (line.split("\t")[0] for line in lines)
    return list(islice(lines, count))


def mean_off_diagonal_cosine(states: torch.Tensor) -> float:
    """Mean cosine between distinct rows of (N, H) states, N >= 2."""
    unit = torch.nn.functional.normalize(states, dim=-1)
    cosine = unit @ unit.T  # (N, N)
    n = len(states)
    return ((cosine.sum() - cosine.diagonal().sum()) / (n * n - n)).item()


def similarity(model_dir: Path, texts: list[str]) -> dict[str, float]:
    """within, across and [CLS] spread (see the module's docstring) of one model."""
    model = BertModel.from_pretrained(model_dir).eval()
    tokenizer = Tokenizer.from_pretrained(model_dir)
    with torch.inference_mode():
        features = extract_features(model, tokenizer, texts, layers=(-1,), max_length=64)
    per_text = [torch.from_numpy(features.rows(i)[:, 0]) for i in range(len(texts))]  # (L, H)
    within = [mean_off_diagonal_cosine(states) for states in per_text if len(states) > 1]
    cls = torch.stack([states[0] for states in per_text])  # (T, H)
    return {
        "within": sum(within) / len(within),
        "across": mean_off_diagonal_cosine(cls),
        "spread": (cls.std(0).mean() / cls.norm(dim=-1).mean()).item(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", type=Path, help="model folders")
    parser.add_argument("--texts", type=Path, required=True, help="sentences, one per line")
    parser.add_argument("--count", type=int, default=64, help="sentences used (default: 64)")
    args = parser.parse_args()
    for path in (*args.models, args.texts):
        if not path.exists():
            parser.error(f"not found: {path}")
    texts = read_texts(args.texts, args.count)
    if len(texts) < 2:
        parser.error(f"{args.texts} has fewer than 2 texts")
    print(f"{len(texts)} sentences of {args.texts}")
    print("| model | within-sentence cosine | across-sentence [CLS] cosine | [CLS] spread |")
    print("|---|---:|---:|---:|")
    for model_dir in args.models:
        figures = similarity(model_dir, texts)
        print(
            f"| {model_dir} | {figures['within']:.3f} | {figures['across']:.3f} | "
            f"{figures['spread']:.4f} |"
        )


if __name__ == "__main__":
    main()
