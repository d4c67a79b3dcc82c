"""bertlab's default settings on a machine that is doing something else: idle against loaded.

Runs real `bertlab pretrain` and `bertlab finetune` commands (BERT-tiny and BERT-mini, default
settings) as separate processes, each once on the idle machine and once beside one other
CPU-bound process (`--hog`: `python -c "while True: pass"`, or a PyTorch job on two threads;
started just before the command and ended just after it), idle and loaded alternating, for
every source tree given (e.g. the code before and after a change) and every extra flag set, in
rounds. One run of this script gives every ratio, so the machine's drift hits all sides alike.
`--nice N` runs the bertlab commands N nicer than the other process (idle runs too): the other
process then has the higher priority, as a job started with `nice -n -15` has over a command
typed in a shell.

- pretrain: `--max-time` seconds of training (default 12) with the defaults (masked LM + NSP,
  batch 32 x 128, one data worker) on a slice of the IMDB reviews with the bert-base-uncased
  vocabulary; the figure is the loop's own throughput (non-padding tokens per second of
  training time, from metrics.jsonl, the first record left out).
- finetune: SST-2, `--finetune-examples` training sentences (default 720), 1 epoch, from
  scratch, a 200-sentence dev file; the figure is the wall time of the whole command (what a
  user waits for, start-up included) and the epoch's own seconds (training + dev evaluation).

Each run also records the CPU seconds its process tree used: CPU time far above wall time x the
cores it got is threads spinning, not working.

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_loaded.py \\
        --tree before=/tmp/bertlab-before --tree after=. --json loaded.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared" / "data"
VOCAB = SHARED / "vocab" / "bert-base-uncased-vocab.txt"
REVIEWS = SHARED / "corpus_reviews_en" / "imdb_reviews.txt.gz"
SST2 = SHARED / "glue" / "SST-2" / "train.tsv"
# The other process (`--hog`): a pure-Python loop, or another PyTorch job training a small
# model with its own two threads (as a second bertlab command, a test suite or a notebook would),
# its OpenMP threads spinning (ACTIVE), spinning a while and then sleeping (no policy set:
# OpenMP's default, what torch and bertlab do) or sleeping at once (PASSIVE) when they wait.
_TORCH_HOG = (
    "import torch\n"
    "x = torch.randn(2048, 128)\n"
    "w = torch.randn(128, 512) / 12\n"
    "v = torch.randn(512, 128) / 24\n"
    "while True:\n"
    "    x = torch.nn.functional.layer_norm(x + torch.nn.functional.gelu(x @ w) @ v, (128,))\n"
)
HOGS = {
    "python": ("while True: pass", {}),
    "torch": (_TORCH_HOG, {"OMP_WAIT_POLICY": "ACTIVE"}),
    "torch-passive": (_TORCH_HOG, {"OMP_WAIT_POLICY": "PASSIVE"}),
    "torch-default": (_TORCH_HOG, {}),
}
DEV_SENTENCES = 200
CORPUS_DOCUMENTS = 3000  # reviews in the pre-training slice (~0.8M tokens: never exhausted)
SIZES = ("tiny", "mini")


def write_inputs(work: Path, finetune_examples: int) -> dict[str, Path]:
    """The pre-training slice and the SST-2 train/dev files (not timed)."""
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "reviews.txt"
    if not corpus.is_file():
        documents = 0
        with gzip.open(REVIEWS, "rt", encoding="utf-8") as reader, corpus.open("w") as writer:
            for line in reader:
                writer.write(line)
                documents += not line.strip()
                if documents >= CORPUS_DOCUMENTS:
                    break
    lines = SST2.read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], lines[1:]
    train, dev = work / "sst2_train.tsv", work / "sst2_dev.tsv"
    train.write_text("\n".join([header, *rows[:finetune_examples]]) + "\n", encoding="utf-8")
    dev_rows = rows[-DEV_SENTENCES:]
    dev.write_text("\n".join([header, *dev_rows]) + "\n", encoding="utf-8")
    return {"corpus": corpus, "train": train, "dev": dev, "cache": work / "corpus_cache"}


def command(case: str, size: str, inputs: dict[str, Path], out: Path, args) -> list[str]:
    if case == "pretrain":
        return [
            "pretrain", "--corpus", str(inputs["corpus"]), "--corpus-cache", str(inputs["cache"]),
            "--tokenizer", str(VOCAB), "--model-size", size, "--max-time", f"{args.max_time}s",
            "--eval-examples", "0", "--log-every", "5", "--no-progress", "--out", str(out),
        ]  # fmt: skip
    return [
        "finetune", "--task", "sst2", "--train", str(inputs["train"]), "--dev", str(inputs["dev"]),
        "--from-scratch", "--model-size", size, "--tokenizer", str(VOCAB), "--epochs", "1",
        "--no-progress", "--out", str(out),
    ]  # fmt: skip


def check_tree(tree: Path) -> None:
    """Refuse a tree whose commands would import bertlab from somewhere else."""
    found = subprocess.run(
        [sys.executable, "-c", "import bertlab; print(bertlab.__file__)"],
        env=dict(os.environ, PYTHONPATH=str(tree)),
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to(tree):
        raise SystemExit(f"{tree}: bertlab is imported from {found}, not from this tree")


def _without_wait_policy() -> dict[str, str]:
    """This environment less OMP_WAIT_POLICY: each hog waits exactly as HOGS says."""
    return {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(
    tree: Path,
    argv: list[str],
    out: Path,
    loaded: bool,
    niceness: int = 0,
    hogs: int = 1,
    hog: str = "python",
    extra_env: dict[str, str] | None = None,
) -> dict:
    """One command in a fresh process (with `hogs` processes of kind `hog` beside it when
    `loaded`), `niceness` below the hogs' priority (0: the same)."""
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, PYTHONPATH=str(tree)) | (extra_env or {})
    code, hog_env = HOGS[hog]
    hog_processes = [
        subprocess.Popen([sys.executable, "-c", code], env=_without_wait_policy() | hog_env)
        for _ in range(hogs * loaded)
    ]
    try:
        if hog_processes:
            time.sleep(0.5)  # the hogs are running before the command starts
        cpu_before, started = children_cpu_seconds(), time.perf_counter()
        prefix = ["nice", "-n", str(niceness)] if niceness else []
        result = subprocess.run(  # in the tree: `-m` puts the working directory first on sys.path
            [*prefix, sys.executable, "-m", "bertlab", *argv],
            env=env,
            cwd=tree,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - started
        cpu = children_cpu_seconds() - cpu_before  # before the hog is reaped and counted
    finally:
        for hog in hog_processes:
            hog.kill()
            hog.wait()
    if result.returncode != 0:
        raise SystemExit(f"failed ({result.returncode}): {' '.join(argv)}\n{result.stderr[-3000:]}")
    record = {"wall_s": wall, "cpu_s": cpu}
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    if argv[0] == "pretrain":
        train = [m for m in metrics if m["kind"] == "train"]
        first = train[0] if len(train) > 2 else {"tokens": 0, "elapsed_seconds": 0.0}
        tokens = train[-1]["tokens"] - first["tokens"]  # the first record holds the start
        seconds = train[-1]["elapsed_seconds"] - first["elapsed_seconds"]
        record["tokens_per_second"] = tokens / seconds
        record["steps"] = train[-1]["step"]
    else:
        record["epoch_s"] = sum(m["seconds"] for m in metrics if m["kind"] == "eval")
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tree",
        action="append",
        required=True,
        help="NAME=PATH of a source tree holding bertlab/ (repeat for each side)",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="NAME=TREE:FLAGS, e.g. 'after-1-thread=after:--threads 1' (repeatable)",
    )
    parser.add_argument(
        "--env-variant",
        action="append",
        default=[],
        help="NAME=TREE:VAR=VALUE[,VAR=VALUE], e.g. 'spin2k=after:GOMP_SPINCOUNT=2000': the "
        "tree's commands with these environment variables (repeatable)",
    )
    parser.add_argument("--cases", default="pretrain,finetune")
    parser.add_argument("--sizes", default=",".join(SIZES))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-time", type=float, default=12.0, help="pretrain seconds per run")
    parser.add_argument("--finetune-examples", type=int, default=720)
    parser.add_argument("--work-dir", default=str(Path(tempfile.gettempdir()) / "bench_loaded"))
    parser.add_argument(
        "--nice",
        type=int,
        default=0,
        help="run the bertlab commands this much nicer than the hog (e.g. 15: the other "
        "process has the priority of a job started with nice -15); default 0, equal priority",
    )
    parser.add_argument("--hogs", type=int, default=1, help="CPU-bound processes when loaded")
    parser.add_argument(
        "--hog",
        choices=list(HOGS),
        default="python",
        help="what the other process runs: a Python loop, or a PyTorch job on two threads "
        "that spin (torch: OMP_WAIT_POLICY=ACTIVE), sleep at once (torch-passive) or follow "
        "OpenMP's default, spin a while then sleep (torch-default), when they wait (default: "
        "python)",
    )
    parser.add_argument("--json", default=None, help="write every run and the summary here")
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in args.tree)
    settings = {name: (Path(path).resolve(), [], {}) for name, path in trees.items()}
    for item in args.variant:
        name, spec = item.split("=", 1)
        tree, flags = spec.split(":", 1)
        settings[name] = (Path(trees[tree]).resolve(), flags.split(), {})
    for item in args.env_variant:
        name, spec = item.split("=", 1)
        tree, variables = spec.split(":", 1)
        env = dict(pair.split("=", 1) for pair in variables.split(","))
        settings[name] = (Path(trees[tree]).resolve(), [], env)
    for tree, _, _ in settings.values():
        check_tree(tree)
    work = Path(args.work_dir)
    inputs = write_inputs(work, args.finetune_examples)
    first_tree = next(iter(settings.values()))[0]
    warm = command("pretrain", "tiny", inputs, work / "warm", args)
    warm[warm.index("--max-time") + 1] = "1s"
    run_once(first_tree, warm, work / "warm", loaded=False)  # builds the corpus cache (not timed)
    print(
        f"{os.cpu_count()} cores; settings: "
        + "; ".join(
            f"{n} = {t} {' '.join(f)} {' '.join(f'{k}={v}' for k, v in e.items())}".strip()
            for n, (t, f, e) in settings.items()
        ),
        flush=True,
    )
    runs = []
    for round_index in range(args.rounds):
        for case in args.cases.split(","):
            for size in args.sizes.split(","):
                for name, (tree, flags, env) in settings.items():
                    for loaded in (False, True):
                        argv = command(case, size, inputs, work / "out", args) + flags
                        record = run_once(
                            tree, argv, work / "out", loaded, args.nice, args.hogs, args.hog, env
                        )
                        record |= {
                            "round": round_index,
                            "case": case,
                            "size": size,
                            "setting": name,
                            "loaded": loaded,
                        }
                        runs.append(record)
                        print(json.dumps(record), flush=True)
    summary = summarize(runs)
    print_table(summary)
    if args.json:
        Path(args.json).write_text(json.dumps({"runs": runs, "summary": summary}, indent=1))


def summarize(runs: list[dict]) -> list[dict]:
    """Per (case, size, setting): medians idle and loaded, and the ratio of each round's pair."""
    rows = []
    keys = sorted({(r["case"], r["size"], r["setting"]) for r in runs}, key=str)
    for case, size, setting in keys:
        mine = [r for r in runs if (r["case"], r["size"], r["setting"]) == (case, size, setting)]
        row = {"case": case, "size": size, "setting": setting}
        figures = ["wall_s", "cpu_s"] + (
            ["tokens_per_second"] if case == "pretrain" else ["epoch_s"]
        )
        for figure in figures:
            for loaded in (False, True):
                values = [r[figure] for r in mine if r["loaded"] == loaded]
                row[f"{figure}_{'loaded' if loaded else 'idle'}"] = statistics.median(values)
        main_figure = "tokens_per_second" if case == "pretrain" else "wall_s"
        ratios = []
        for round_index in sorted({r["round"] for r in mine}):
            pair = {r["loaded"]: r[main_figure] for r in mine if r["round"] == round_index}
            ratio = pair[False] / pair[True] if case == "pretrain" else pair[True] / pair[False]
            ratios.append(ratio)
        row["slowdown_per_round"] = ratios
        row["slowdown"] = statistics.median(ratios)
        rows.append(row)
    return rows


def print_table(rows: list[dict]) -> None:
    print("\n| command | size | setting | idle | loaded | slowdown (median of rounds) |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        if row["case"] == "pretrain":
            idle = f"{row['tokens_per_second_idle']:,.0f} tokens/s"
            loaded = f"{row['tokens_per_second_loaded']:,.0f} tokens/s"
        else:
            idle = f"{row['wall_s_idle']:.1f} s (epoch {row['epoch_s_idle']:.1f} s)"
            loaded = f"{row['wall_s_loaded']:.1f} s (epoch {row['epoch_s_loaded']:.1f} s)"
        rounds = ", ".join(f"{r:.2f}" for r in row["slowdown_per_round"])
        print(
            f"| {row['case']} | {row['size']} | {row['setting']} | {idle} | {loaded} | "
            f"**{row['slowdown']:.2f}x** ({rounds}) |"
        )


if __name__ == "__main__":
    main()
