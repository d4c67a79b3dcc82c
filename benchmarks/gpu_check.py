"""The GPU recipe's device check (docs/budget.md#on-a-gpu): `--budget` pre-training on the
reviews, BERT-base at the same budget, SST-2 from the budget model against its scratch twin.

Run by `benchmarks/gpu_check.sh run` on a machine with a GPU, from the repository root, on the
data `benchmarks/gpu_check.sh prepare` copied into .gpu_data/. In parallel: the budget run (the
plan chooses the shape), the same budget at `--model-size base`, and the `gpu` tests; then SST-2
fine-tuning of the budget model and of its random twin (same shape, tokenizer and sinusoidal
start, so that the two differ by the pre-training alone), 3 seeds each, scored on a fifth of
SST-2's training sentences held out (`experiment transfer`'s split). Prints one table and writes
OUT/gpu_check.json.

    python benchmarks/gpu_check.py --data .gpu_data --work /tmp/gpu-check --out OUT
    python benchmarks/gpu_check.py --budget 20s --max-train 2000 ...   # a CPU smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REVIEWS = "corpus_reviews_en/imdb_reviews.txt.gz"
FINETUNE_LEARNING_RATE = 5e-4  # experiment transfer's for these shapes
FINETUNE_BATCH_SIZE = 32
FINETUNE_THREADS = "2"  # per fine-tuning process: they run side by side


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(".gpu_data"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpu-check"))
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "runs/gpu-check")))
    parser.add_argument("--budget", default="5m")
    parser.add_argument("--base-budget", default=None, help="default: --budget; 0: skip")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--max-train", type=int, default=None, help="SST-2 training subsample")
    parser.add_argument("--tests", default="tests/gpu", help="empty: no gpu tests")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    corpus = args.data / REVIEWS
    started = time.time()

    jobs = {"budget": _pretrain(corpus, args.work / "budget", args.budget, None, args.out)}
    base_budget = args.base_budget or args.budget
    if base_budget != "0":
        jobs["base"] = _pretrain(corpus, args.work / "base", base_budget, "base", args.out)
    if args.tests:
        jobs["tests"] = _background(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-m",
                "gpu",
                "-p",
                "no:cacheprovider",
                args.tests,
            ],
            args.out / "gpu_tests.log",
        )
    codes = {name: job.wait() for name, job in jobs.items()}
    print(f"pre-training and tests done in {time.time() - started:.0f} s: {codes}", flush=True)

    runs = {
        name: _pretrain_summary(args.work / name) for name in ("budget", "base") if name in jobs
    }
    final = args.work / "budget" / "final"
    scores: dict[str, list[float]] = {}
    if codes["budget"] == 0:
        scores = _finetune_both(args, final, seeds)
    result = {
        "device": _device_name(),
        "seconds": round(time.time() - started),
        "exit_codes": codes,
        "pretraining": runs,
        "sst2_test_accuracy": scores,
        "seeds": seeds,
        "finetuning": {
            "epochs": args.epochs,
            "learning_rate": FINETUNE_LEARNING_RATE,
            "batch_size": FINETUNE_BATCH_SIZE,
            "max_train": args.max_train,
        },
    }
    (args.out / "gpu_check.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(_table(result))
    return 0 if all(code == 0 for code in codes.values()) else 1


def _background(command: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env or dict(os.environ)
    )


def _pretrain(
    corpus: Path,
    out: Path,
    budget: str | None,
    size: str | None,
    logs: Path,
    extra: Sequence[str] = (),
):
    """`bertlab pretrain` in the background, its output in LOGS/pretrain_<out's name>.log; no
    `--budget` when `budget` is None (`extra` then sets the run's length, e.g. `--max-steps`)."""
    command = [sys.executable, "-m", "bertlab", "pretrain", "--corpus", str(corpus)]
    command += ["--out", str(out), "--no-progress", "--eval-every", "500"]
    if budget is not None:
        command += ["--budget", budget]
    if size:
        command += ["--model-size", size]
    return _background([*command, *extra], logs / f"pretrain_{out.name}.log")


def _pretrain_summary(out: Path) -> dict:
    """The run's plan, counters and last held-out evaluation (metrics.jsonl)."""
    summary: dict = {}
    plan = out / "budget_plan.json"
    if plan.is_file():
        values = json.loads(plan.read_text(encoding="utf-8"))
        summary["model_size"] = values["recipe"]["model_size"]
        summary["recipe"] = values["recipe"]
        summary["measured_tokens_per_second"] = values["tokens_per_second"]
    metrics = out / "metrics.jsonl"
    if metrics.is_file():
        records = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
        train = [r for r in records if r["kind"] == "train"]
        evals = [r for r in records if r["kind"] == "eval"]
        if train:
            summary["steps"], summary["tokens"] = train[-1]["step"], train[-1]["tokens"]
            summary["tokens_per_second"] = train[-1]["tokens"] / max(
                train[-1]["elapsed_seconds"], 1
            )
        summary["evals"] = [
            {k: r.get(k) for k in ("step", "tokens", "mlm_loss", "mlm_accuracy", "on_plateau")}
            for r in evals
        ]
        if evals:
            summary["last_eval"] = evals[-1]
    return summary


def _finetune_both(args, final: Path, seeds: list[int]) -> dict[str, list[float]]:
    """SST-2 test accuracy per seed of the budget model and of its random twin."""
    jobs = [(column, seed) for column in ("scratch", "pre-trained") for seed in seeds]
    with ProcessPoolExecutor(len(jobs)) as pool:
        futures = {
            job: pool.submit(_finetune_one, args.data, args.work, final, *job, args) for job in jobs
        }
        results = {job: future.result() for job, future in futures.items()}
    return {
        column: [results[(column, seed)] for seed in seeds] for column in ("scratch", "pre-trained")
    }


def _finetune_one(data: Path, work: Path, final: Path, column: str, seed: int, args) -> float:
    import torch

    torch.set_num_threads(int(FINETUNE_THREADS))
    from bertlab.apps.experiments.transfer_data import task_splits
    from bertlab.apps.experiments.transfer_rows import ROWS
    from bertlab.apps.flows import finetune_and_test, random_twin
    from bertlab.core.config import BertConfig
    from bertlab.core.finetune_config import FinetuneConfig
    from bertlab.data.tasks.splits import subsample
    from bertlab.tokenizer.wordpiece import Tokenizer
    from bertlab.training.finetuning.finetune import TaskData
    from bertlab.training.pretraining.budget import FINETUNE_DROPOUT

    row = next(row for row in ROWS["en"] if row.name == "sst2")
    task, data_split, test = task_splits(data, row)
    if args.max_train:
        train = subsample(data_split.train, args.max_train)
        data_split = TaskData(train, data_split.dev, data_split.label_names)
    model_dir = final
    if column == "scratch":
        config = BertConfig.from_json_file(final / "config.json").replace(
            hidden_dropout_prob=FINETUNE_DROPOUT, attention_probs_dropout_prob=FINETUNE_DROPOUT
        )
        tokenizer = Tokenizer.from_pretrained(final)
        model_dir = random_twin(config, tokenizer, seed, "sinusoidal", work / f"twin-{seed}")
    config = FinetuneConfig(
        learning_rate=FINETUNE_LEARNING_RATE,
        batch_size=FINETUNE_BATCH_SIZE,
        num_train_epochs=args.epochs,
        seed=seed,
    )
    run_dir = work / "finetune" / f"{column}-seed-{seed}"
    metrics = finetune_and_test(task, data_split, test, model_dir, config, run_dir, False)
    print(f"{column} seed {seed}: {metrics} ({len(test)} test sentences)", flush=True)
    return metrics["accuracy"]


def _device_name() -> str:
    import torch

    return torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"


def _table(result: dict) -> str:
    lines = [f"device: {result['device']}; {result['seconds']} s in all", ""]
    lines.append(
        "| run | shape | steps | tokens | tokens/s | held-out MLM loss / accuracy | unigram level |"
    )
    lines.append("|---|---|---:|---:|---:|---|---:|")
    for name, run in result["pretraining"].items():
        last = run.get("last_eval") or {}
        lines.append(
            f"| {name} | {run.get('model_size')} | {run.get('steps', 0):,} | "
            f"{run.get('tokens', 0) / 1e6:.1f}M | {run.get('tokens_per_second', 0) / 1e3:,.0f}k | "
            f"{last.get('mlm_loss', float('nan')):.2f} / {last.get('mlm_accuracy', 0):.1%}"
            f"{' (plateau)' if last.get('on_plateau') else ''} | "
            f"{last.get('mlm_unigram_accuracy', 0):.1%} |"
        )
    scores = result["sst2_test_accuracy"]
    if scores:
        from bertlab.apps.experiments.transfer_report import verdict

        lines += ["", "| SST-2 (test accuracy) | per seed | median |", "|---|---|---:|"]
        for column, values in scores.items():
            per_seed = ", ".join(f"{v:.4f}" for v in values)
            lines.append(f"| {column} | {per_seed} | {statistics.median(values):.4f} |")
        lines.append("")
        lines.append(
            f"pre-trained beats scratch: {verdict(scores['scratch'], scores['pre-trained'])}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
