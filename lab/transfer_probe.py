"""Fine-tune one task of `bertlab experiment transfer` with one setting changed, for both models.

Uses the experiment's own splits, seeds and fine-tuning function (`transfer.scratch_model`,
`fine_tunable_copy` and `finetune_cell`, on purpose: a probe must differ from the experiment only
in the setting it changes), on a finished pre-training run. Prints the test score of every seed,
then median (min–max) per model.

    python lab/transfer_probe.py --pretrain runs/mini/pretrain --task sst2-1k --tag base
    python lab/transfer_probe.py --pretrain runs/mini/pretrain --task sst2-1k --tag ep30 \\
        --epochs 30
    python lab/transfer_probe.py --pretrain runs/mini/pretrain --task stsb --tag segment \\
        --model pretrained --copy-segment-a
    python lab/transfer_probe.py --pretrain runs/mini/pretrain --task stsb --tag overlap \\
        --word-overlap

Runs land in runs/probes/TAG (a run already there is reused, so a tag is one setting).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import time
from pathlib import Path

from bertlab.apps.experiments import transfer as ex
from bertlab.apps.experiments.transfer_config import TransferConfig
from bertlab.apps.experiments.transfer_data import task_splits
from bertlab.apps.experiments.transfer_rows import FINETUNE_LEARNING_RATE, ROWS
from bertlab.apps.flows import summary
from bertlab.training.pretraining.budget import FINETUNE_DROPOUT


def _parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrain", required=True, help="a `bertlab pretrain --out` directory")
    parser.add_argument("--task", required=True, help="a task name of the experiment")
    parser.add_argument("--tag", required=True, help="the probe's name: runs/probes/TAG")
    parser.add_argument(
        "--model",
        default="scratch,pretrained",
        help="which models to fine-tune, comma-separated: scratch, pretrained "
        "(default: scratch,pretrained)",
    )
    parser.add_argument("--data", default="../shared/data")
    parser.add_argument("--lang", default="en")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--learning-rate", type=float, default=FINETUNE_LEARNING_RATE)
    parser.add_argument("--epochs", type=int, help="default: the experiment's for the task")
    parser.add_argument("--dropout", type=float, default=FINETUNE_DROPOUT)
    parser.add_argument(
        "--reinit-top",
        type=int,
        default=0,
        help="re-initialize the pre-trained model's top K "
        "layers and its pooler before fine-tuning (Zhang et al. 2021)",
    )
    parser.add_argument(
        "--copy-segment-a",
        action="store_true",
        help="start the pre-trained model's segment-B "
        "embedding as its segment-A one (packed MLM pre-training never trains segment B)",
    )
    parser.add_argument(
        "--word-overlap",
        action="store_true",
        help="fine-tune nothing; print the test score of a "
        "baseline that reads only the Jaccard overlap of the two sentences' lowercased words "
        "(Spearman for a regression task)",
    )
    return parser.parse_args()


def _edited_copy(model_dir: Path, suffix: str, edit) -> Path:
    """A copy of a model directory with `edit(model)` applied to its weights."""
    import torch

    from bertlab.network.bert import BertModel
    from bertlab.tokenizer.wordpiece import Tokenizer

    target = model_dir.with_name(f"{model_dir.name}-{suffix}")
    if not (target / "model.safetensors").is_file():
        model = BertModel.from_pretrained(model_dir)
        torch.manual_seed(0)
        with torch.no_grad():
            edit(model)
        model.save_pretrained(target)
        Tokenizer.from_pretrained(model_dir).save_pretrained(target)
    return target


def _reinit_top(count: int):
    def edit(model) -> None:
        for layer in model.encoder.layer[-count:]:
            layer.apply(model._init_weights)
        model.pooler.apply(model._init_weights)

    return edit


def _copy_segment_a(model) -> None:
    weight = model.embeddings.token_type_embeddings.weight  # (type_vocab_size, H)
    weight[1] = weight[0]


def _word_overlap(test: list) -> float:
    """Spearman correlation between the gold scores and each pair's word overlap (Jaccard)."""
    from bertlab.core.metrics import pearson_spearman

    def words(text: str) -> set[str]:
        return set(re.findall(r"\w+", text.lower()))

    overlaps = []
    for example in test:
        a, b = words(example.text_a), words(example.text_b or "")
        overlaps.append(len(a & b) / max(len(a | b), 1))
    return pearson_spearman(overlaps, [float(example.label) for example in test])["spearman"]


def main() -> None:
    args = _parse()
    models = args.model.split(",")
    unknown = sorted(set(models) - {"scratch", "pretrained"})
    if unknown:
        raise SystemExit(
            f"transfer_probe: unknown --model {', '.join(unknown)}; choose scratch, pretrained"
        )
    pretrain = Path(args.pretrain)
    out = Path("runs/probes") / args.tag
    config = TransferConfig(
        data_dir=Path(args.data),
        out=out,
        lang=args.lang,
        learning_rate=args.learning_rate,
        finetune_dropout=args.dropout,
        points=(),
    )
    spec = next((t for t in ROWS[args.lang] if t.name == args.task), None)
    if spec is None:
        raise SystemExit(f"transfer_probe: unknown task {args.task!r}")
    if args.epochs:
        spec = dataclasses.replace(spec, epochs=args.epochs)
    task, data, test = task_splits(config.data_dir, spec)
    if args.word_overlap:
        if test[0].text_b is None or not isinstance(test[0].label, float):
            raise SystemExit("transfer_probe: --word-overlap needs a sentence-pair regression task")
        print(f"{spec.name}: word overlap, test Spearman {_word_overlap(test):.3f}")
        return
    points = out / "points"
    for which in models:
        if which == "scratch":
            model_dir = ex.scratch_model(pretrain / "final", points)
        else:
            final = pretrain / "final"
            model_dir = ex.fine_tunable_copy(final, final, points / which, args.dropout)
            if args.reinit_top:
                model_dir = _edited_copy(
                    model_dir, f"reinit{args.reinit_top}", _reinit_top(args.reinit_top)
                )
            if args.copy_segment_a:
                model_dir = _edited_copy(model_dir, "segment-a", _copy_segment_a)
        values, dev_values = [], []
        started = time.perf_counter()
        for seed in map(int, args.seeds.split(",")):
            run_dir = out / "finetune" / spec.name / which / f"seed-{seed}"
            metrics = ex.finetune_cell(
                config, spec, task, data, test, model_dir, seed, run_dir, False
            )
            dev = json.loads((run_dir / "result.json").read_text())["dev"][task.primary_metric]
            values.append(metrics[task.primary_metric])
            dev_values.append(dev)
            print(f"  {which} seed {seed}: test {values[-1]:.4f}, dev {dev:.4f}", flush=True)
        print(
            f"{args.tag} {spec.name} {which}: test {task.primary_metric} {summary(values)}, "
            f"dev median {statistics.median(dev_values):.3f} "
            f"({time.perf_counter() - started:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
