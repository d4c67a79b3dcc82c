"""Does `--precision auto` pick the faster precision on this CPU? Pre-training and fine-tuning at
auto, fp32 and bf16, interleaved, on a quiet machine.

Runs real commands, each in a fresh process after waiting for a quiet machine (`quiet.py`):

- pretrain: `bertlab pretrain --objective mlm --pack-sequences --model-size mini` on a slice of the
  IMDB reviews with the shipped English model's 8,000-piece vocabulary, batch 32 x 128,
  `--max-steps` warm-up + timed steps, one record a step; the figure is the loop's tokens/s over
  the timed steps (metrics.jsonl: training time only).
- finetune: `bertlab finetune --task sst2 --model bertlab:mini-reviews-en`, `--sentences` SST-2
  training sentences, one epoch, no dev file; the figure is training sentences per second of the
  epoch (metrics.jsonl's epoch seconds).

Each round runs every precision once per command, the order turning between rounds. The end
prints, per command, each precision's median and `auto`'s speed over the faster of fp32 and bf16
in each round (the bar: at least 0.95x). bf16 where the CPU has no bf16 units is emulated and
tens to hundreds of times slower: there the bf16 arms are kept short (`--slow-steps` steps after
one warm-up step; `--slow-sentences` sentences), enough to show which is faster.

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/bench_precision.py
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from quiet import wait_until_quiet
from step_vs_trainer import cpu_name

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared" / "data"
REVIEWS = SHARED / "corpus_reviews_en" / "imdb_reviews.txt.gz"
SST2 = SHARED / "glue" / "SST-2" / "train.tsv"
VOCAB = REPO_ROOT / "bertlab" / "models" / "mini-reviews-en" / "vocab.txt"
MODEL = "bertlab:mini-reviews-en"
PRECISIONS = ("auto", "fp32", "bf16")
CORPUS_DOCUMENTS = 2000  # reviews in the pre-training slice: more than any arm reads


def bf16_units() -> bool:
    """Whether /proc/cpuinfo names bf16 units (avx512_bf16, amx_bf16)."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    return "avx512_bf16" in text or "amx_bf16" in text


def write_inputs(work: Path) -> dict[str, Path]:
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
    return {"corpus": corpus, "cache": work / "corpus-cache"}


def sst2_slice(work: Path, sentences: int) -> Path:
    lines = SST2.read_text(encoding="utf-8").splitlines()
    train = work / f"sst2-{sentences}.tsv"
    train.write_text("\n".join(lines[: sentences + 1]) + "\n", encoding="utf-8")
    return train


def argv_of(case: str, precision: str, inputs: dict[str, Path], out: Path, steps: int) -> list:
    """The command of one arm: `steps` pre-training steps, or one epoch over inputs["train"]."""
    if case == "pretrain":
        return [
            "pretrain", "--corpus", str(inputs["corpus"]), "--corpus-cache", str(inputs["cache"]),
            "--tokenizer", str(VOCAB), "--model-size", "mini", "--objective", "mlm",
            "--pack-sequences", "--batch-size", "32", "--max-seq-length", "128",
            "--max-steps", str(steps), "--log-every", "1", "--eval-examples", "0",
            "--precision", precision, "--no-progress", "--out", str(out),
        ]  # fmt: skip
    return [
        "finetune", "--task", "sst2", "--model", MODEL, "--train", str(inputs["train"]),
        "--epochs", "1", "--learning-rate", "3e-4", "--precision", precision,
        "--no-progress", "--out", str(out),
    ]  # fmt: skip


def run_arm(case: str, precision: str, inputs: dict, work: Path, args) -> dict:
    out = work / "out"
    shutil.rmtree(out, ignore_errors=True)
    slow = precision == "bf16" and not bf16_units()
    warmup = 1 if slow else args.warmup
    steps = warmup + (args.slow_steps if slow else args.steps)
    sentences = args.slow_sentences if slow else args.sentences
    inputs = inputs | {"train": sst2_slice(work, sentences)}
    state = wait_until_quiet()
    done = subprocess.run(
        [sys.executable, "-m", "bertlab", *argv_of(case, precision, inputs, out, steps)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"{case} {precision} failed:\n{done.stderr[-3000:]}")
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    said = [line for line in done.stderr.splitlines() if "fp32 (" in line or "bf16 (" in line]
    if case == "pretrain":
        train = [r for r in records if r["kind"] == "train"]
        timed = [r for r in train if r["step"] > warmup]
        first = next(r for r in train if r["step"] == warmup)
        seconds = timed[-1]["elapsed_seconds"] - first["elapsed_seconds"]
        speed = (timed[-1]["tokens"] - first["tokens"]) / seconds
    else:
        epoch = next(r for r in records if r["kind"] == "eval")
        speed = sentences / epoch["seconds"]
    return {"speed": speed, "machine": state, "said": said[-1].strip() if said else ""}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="pretrain,finetune")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3, help="untimed pre-training steps")
    parser.add_argument("--steps", type=int, default=20, help="timed pre-training steps")
    parser.add_argument("--sentences", type=int, default=2000, help="SST-2 sentences")
    parser.add_argument(
        "--slow-steps", type=int, default=2, help="timed steps of emulated bf16 (no bf16 units)"
    )
    parser.add_argument(
        "--slow-sentences", type=int, default=64, help="sentences of emulated bf16 fine-tuning"
    )
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "bench_precision"))
    parser.add_argument("--json", default=None, help="write every arm here")
    args = parser.parse_args()
    work = Path(args.work)
    inputs = write_inputs(work)
    print(cpu_name(), flush=True)
    cases = args.cases.split(",")
    units = {"pretrain": "tokens/s", "finetune": "sentences/s"}
    runs = []
    for number in range(args.rounds):
        order = PRECISIONS[number % 3 :] + PRECISIONS[: number % 3]
        for case in cases:
            for precision in order:
                result = run_arm(case, precision, inputs, work, args)
                result |= {"round": number, "case": case, "precision": precision}
                runs.append(result)
                machine = result["machine"]
                busy = "" if machine["quiet"] else f"; busy: {', '.join(machine['busy'])}"
                print(f"round {number + 1} {case} {precision}: {result['speed']:,.1f} "
                      f"{units[case]} (load before {machine['load']:.2f}{busy}) "
                      f"[{result['said']}]", flush=True)  # fmt: skip
    for case in cases:
        mine = [r for r in runs if r["case"] == case]
        medians = {
            p: statistics.median(r["speed"] for r in mine if r["precision"] == p)
            for p in PRECISIONS
        }
        ratios = []
        for number in range(args.rounds):
            speed = {r["precision"]: r["speed"] for r in mine if r["round"] == number}
            ratios.append(speed["auto"] / max(speed["fp32"], speed["bf16"]))
        figures = ", ".join(f"{p} {medians[p]:,.1f}" for p in PRECISIONS)
        each = ", ".join(f"{r:.2f}" for r in ratios)
        quiet = all(r["machine"]["quiet"] for r in mine)
        print(f"{case} ({units[case]}, medians): {figures}; auto / the faster of fp32 and bf16: "
              f"median {statistics.median(ratios):.2f}x (rounds {each}); "
              f"{'every arm on a quiet machine' if quiet else 'NOT every arm quiet'}")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
