"""The pre-training step in steady state: bertlab against the Hugging Face Trainer way, on a CPU,
at equal precision.

Both sides train BERT-mini (or `--size`) with masked LM at 15% (80/10/10), batches of 32 packed
sequences of 128 tokens, dropout 0.1, AdamW (torch's fused kernel) at 1e-4 with weight decay
0.01, gradient clipping at 1.0, on the same text (the first `--lines` lines of the shared English
Wikipedia sample) and the same WordPiece vocabulary: `--vocab-size` pieces trained on that text by
`bertlab tokenizer train` (the budget recipe's 8,000 by default), or `--vocab` (e.g. Google's
bert-base-uncased, 30,522 pieces; the MLM head's width is the vocabulary's size).

- the Trainer way, as transformers' run_mlm.py: `BertTokenizerFast`, every line's ids
  concatenated and cut into blocks of 128, `DataCollatorForLanguageModeling`, `BertForMaskedLM`
  (SDPA attention), `Trainer` with `optim="adamw_torch_fused"`, `use_cpu=True`, its default
  `dataloader_num_workers=0`, and `bf16=True` for bf16;
- bertlab: `run_pretraining(PretrainRun(...))`, what `bertlab pretrain --objective mlm
  --pack-sequences --precision P` runs, with its defaults otherwise.

Each arm (side x precision) runs in a fresh process; its data are prepared before the clock
starts. A step's time is the wall time from one optimizer step to the next, taken on both sides
by the same clock (torch's global optimizer step hook): everything either loop does once a step
(data, forward, backward, clipping, optimizer, statistics, logging); the first `--warmup` steps
are left out and `--steps` are timed. Every batch holds B x L tokens of text on both sides
(grouped texts; packed documents, whose only short sequence is the last). The arms
alternate in each of `--rounds` rounds; each round prints bertlab's tokens/s over the Trainer's at
the same precision, and the end their medians. `--precisions` may name `auto` as well: bertlab at
its default precision, against the Trainer at its own default (fp32).

Before each arm the script waits until no other process is busy (`quiet.py`: none above a fifth
of a core over a second) and prints the load average; an arm that found the machine busy marks
its round "not quiet". `--loaded-rounds N` adds N rounds with one other CPU-bound process
(`python -c "while True: pass"`) running beside every arm. Quiet and loaded rounds are reported
apart.

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/step_vs_trainer.py
    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/step_vs_trainer.py \\
        --vocab ../shared/data/vocab/bert-base-uncased-vocab.txt
    .venv/bin/python benchmarks/step_vs_trainer.py --profile 5  # where a step's time goes
"""

# Shapes: B batch (32), L sequence length (128), V vocab.

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from quiet import wait_until_quiet

REPO_ROOT = Path(__file__).resolve().parents[1]
WIKI = REPO_ROOT.parent / "shared" / "data" / "corpus_en" / "enwiki_sample_2021.txt.gz"
SEQ_LEN = 128
BATCH_SIZE = 32
MLM_PROBABILITY = 0.15  # BERT paper Sec. 3.1; DataCollatorForLanguageModeling's default
LEARNING_RATE = 1e-4  # BERT paper A.2
WEIGHT_DECAY = 0.01  # BERT paper A.2
MAX_GRAD_NORM = 1.0
DROPOUT = 0.1
SEED = 0
# bertlab's presets, written out so that the Trainer's process never imports bertlab.
SHAPES = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "base": (12, 768, 12),
}  # layers, hidden size, heads
SIDES = ("hf", "bertlab")
PRECISIONS = ("fp32", "bf16")
# Self CPU time of torch's operators, grouped for --profile (the first pattern a name has wins).
OP_GROUPS = (
    ("MLM loss", ("log_softmax", "nll_loss")),
    ("attention", ("scaled_dot_product", "_flash_attention", "softmax", "bmm")),
    ("GELU", ("gelu",)),
    ("LayerNorm", ("layer_norm",)),
    ("dropout", ("bernoulli", "dropout", "native_dropout")),
    ("matmul", ("addmm", "aten::mm", "matmul", "linear", "mkldnn")),
    ("AdamW", ("adam",)),
    ("clipping", ("foreach_norm", "clip_grad", "linalg_vector_norm", "_foreach_mul")),
    ("embedding", ("embedding",)),
    ("gather/index", ("index", "gather", "masked_select", "nonzero", "where", "argmax")),
    ("copy/cast", ("copy_", "_to_copy", "aten::to", "contiguous", "clone")),
    ("elementwise", ("add", "mul", "fill_", "zero_", "sum", "div", "sub", "isfinite", "ne")),
)


def cpu_name() -> str:
    """The CPU's model name and its bf16 units (avx512_bf16, amx_bf16), from /proc/cpuinfo."""
    name, flags = "unknown CPU", set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name") and name == "unknown CPU":
            name = line.split(":", 1)[1].strip()
        elif line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[1].split())
    units = [flag for flag in ("avx512_bf16", "amx_bf16") if flag in flags]
    return f"{name}, {os.cpu_count()} cores ({', '.join(units) or 'no bf16 units'})"


# --- inputs, made once ----------------------------------------------------------------------------


def prepare(work: Path, lines: int, vocab: str | None, vocab_size: int) -> tuple[Path, Path]:
    """(text.txt, vocab.txt): the first `lines` lines of the Wikipedia sample, and `vocab` or a
    vocabulary of `vocab_size` pieces trained on that text."""
    work.mkdir(parents=True, exist_ok=True)
    text = work / f"wiki-{lines}.txt"
    if not text.is_file():
        with gzip.open(WIKI, "rt", encoding="utf-8") as reader:
            text.write_text("".join(next(reader) for _ in range(lines)), encoding="utf-8")
    if vocab is not None:
        return text, Path(vocab).resolve()
    folder = work / f"tokenizer-{lines}-{vocab_size}"
    if not (folder / "vocab.txt").is_file():
        command = [sys.executable, "-m", "bertlab", "tokenizer", "train", str(text)]
        command += ["--vocab-size", str(vocab_size), "--out", str(folder), "--no-progress"]
        subprocess.run(command, check=True, capture_output=True)
    return text, folder / "vocab.txt"


# --- one arm, in its own process ------------------------------------------------------------------


class StepClock:
    """The time of every optimizer step (any optimizer's, through torch's global hook);
    `torch.profiler` over `profile` steps after the warm-up."""

    def __init__(self, warmup: int, profile: int) -> None:
        import torch
        from torch.optim.optimizer import register_optimizer_step_pre_hook

        self.starts: list[float] = []
        self.warmup, self.profiled, self.profiler = warmup, profile, None
        register_optimizer_step_pre_hook(lambda *_: self.tick())
        if profile:
            self.profiler = torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU],
                schedule=torch.profiler.schedule(wait=warmup, warmup=1, active=profile),
            )
            self.profiler.start()

    def tick(self) -> None:
        self.starts.append(time.perf_counter())
        if self.profiler is not None:
            self.profiler.step()

    def result(self) -> dict:
        """Tokens/s of the steps after the warm-up, from one optimizer step to the next."""
        timed = range(self.warmup, len(self.starts) - 1)
        seconds = self.starts[timed[-1] + 1] - self.starts[timed[0]]
        result = {
            "tokens_per_second": BATCH_SIZE * SEQ_LEN * len(timed) / seconds,
            "step_ms": [1e3 * (self.starts[i + 1] - self.starts[i]) for i in timed],
        }
        if self.profiler is not None:
            self.profiler.stop()
            groups: dict[str, float] = {}
            other: dict[str, float] = {}
            for event in self.profiler.key_averages():
                lower = event.key.lower()
                group = next(
                    (name for name, patterns in OP_GROUPS if any(p in lower for p in patterns)),
                    "other",
                )
                ms = event.self_cpu_time_total / 1e3 / self.profiled  # a step's
                groups[group] = groups.get(group, 0.0) + ms
                if group == "other":
                    other[event.key] = ms
            result["profile_ms"] = groups
            result["other_ms"] = dict(sorted(other.items(), key=lambda item: -item[1])[:4])
        return result


def run_hf(args: argparse.Namespace) -> dict:
    import numpy as np
    import torch
    import transformers
    from transformers import (
        BertForMaskedLM,
        BertTokenizerFast,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainingArguments,
    )

    folder = Path(args.work) / "hf-tokenizer"
    folder.mkdir(exist_ok=True)
    (folder / "vocab.txt").write_text(Path(args.vocab).read_text(encoding="utf-8"), "utf-8")
    tokenizer = BertTokenizerFast.from_pretrained(folder, do_lower_case=True)
    lines = [line for line in Path(args.text).read_text("utf-8").splitlines() if line.strip()]
    flat = np.concatenate(
        [np.asarray(ids, dtype=np.int64) for ids in tokenizer(lines)["input_ids"]]
    )
    blocks = torch.from_numpy(flat[: len(flat) // SEQ_LEN * SEQ_LEN]).view(-1, SEQ_LEN)

    class Blocks(torch.utils.data.Dataset):  # run_mlm.py's grouped texts
        def __len__(self) -> int:
            return len(blocks)

        def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
            return {"input_ids": blocks[index]}

    transformers.set_seed(SEED)
    layers, hidden, heads = SHAPES[args.size]
    config = transformers.BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        hidden_dropout_prob=DROPOUT,
        attention_probs_dropout_prob=DROPOUT,
        attn_implementation="sdpa",
    )
    clock = StepClock(args.warmup, args.profile)
    training = TrainingArguments(
        output_dir=str(Path(args.work) / "trainer"),
        per_device_train_batch_size=BATCH_SIZE,
        learning_rate=LEARNING_RATE,
        weight_decay=WEIGHT_DECAY,
        max_grad_norm=MAX_GRAD_NORM,
        max_steps=args.warmup + args.steps + 1,
        optim="adamw_torch_fused",
        bf16=args.precision == "bf16",
        use_cpu=True,
        save_strategy="no",
        logging_steps=10**7,
        report_to="none",
        seed=SEED,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=BertForMaskedLM(config),
        args=training,
        train_dataset=Blocks(),
        data_collator=DataCollatorForLanguageModeling(tokenizer, mlm_probability=MLM_PROBABILITY),
    )
    trainer.train()
    return clock.result() | {"transformers": transformers.__version__}


def run_bertlab(args: argparse.Namespace) -> dict:
    from bertlab.training.pretraining.run import PretrainRun
    from bertlab.training.pretraining.runner import run_pretraining

    clock = StepClock(args.warmup, args.profile)
    run = PretrainRun(
        corpus=(args.text,),
        out=Path(args.work) / f"bertlab-{os.getpid()}",
        max_steps=args.warmup + args.steps + 1,
        tokenizer=args.vocab,
        model_size=args.size,
        lang="en",
        corpus_cache=Path(args.work) / f"corpus-{Path(args.vocab).parent.name}",
        objective="mlm",
        pack_sequences=True,
        mlm_probability=MLM_PROBABILITY,
        batch_size=BATCH_SIZE,
        learning_rate=LEARNING_RATE,
        weight_decay=WEIGHT_DECAY,
        dropout=DROPOUT,
        seed=SEED,
        eval_examples=0,
        precision=args.precision,
        num_workers=args.workers,
    )
    run_pretraining(run, show_progress=False, say=lambda line: None)
    return clock.result()


def arm(args: argparse.Namespace) -> None:
    result = (run_hf if args.side == "hf" else run_bertlab)(args)
    print("RESULT " + json.dumps(result), flush=True)


# --- the rounds -----------------------------------------------------------------------------------


HOG = "while True: pass"  # the other CPU-bound process of a loaded round


def launch(
    args: argparse.Namespace, side: str, precision: str, text: Path, vocab: Path, loaded: bool
) -> dict:
    """One arm in its own process, after waiting for a quiet machine; `loaded`: beside HOG."""
    command = [sys.executable, __file__, "--arm", side, "--precision", precision]
    command += ["--work", str(args.work), "--text", str(text), "--vocab", str(vocab)]
    command += ["--size", args.size, "--steps", str(args.steps), "--warmup", str(args.warmup)]
    command += ["--profile", str(args.profile)]
    command += [] if args.workers is None else ["--workers", str(args.workers)]
    state = wait_until_quiet()
    hog = subprocess.Popen([sys.executable, "-c", HOG]) if loaded else None
    try:
        done = subprocess.run(command, capture_output=True, text=True, cwd=REPO_ROOT)
    finally:
        if hog is not None:
            hog.kill()
            hog.wait()
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not lines:
        raise SystemExit(f"{side} {precision} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT ")) | {"machine": state}


def arms_of(precisions: list[str]) -> list[tuple[str, str]]:
    """(side, precision) of every arm: both sides at each precision; `auto` is bertlab's alone
    (the Trainer's default is fp32)."""
    return [
        (side, precision)
        for precision in precisions
        for side in SIDES
        if not (precision == "auto" and side == "hf")
    ]


def ratio_of(row: dict, precision: str) -> float:
    """bertlab over the Trainer at `precision`; `auto` against the Trainer's default, fp32."""
    trainer = "fp32" if precision == "auto" else precision
    return row["bertlab", precision] / row["hf", trainer]


def run_round(args, precisions, text, vocab, number: int, loaded: bool) -> tuple[dict, bool]:
    """One round of every arm, the sides' order alternating between rounds; (tokens/s by arm,
    whether every arm found the machine quiet)."""
    arms = arms_of(precisions)
    if number % 2:
        arms = [(side, p) for p in precisions for side, q in arms[::-1] if q == p]
    row, quiet = {}, True
    for side, precision in arms:
        result = launch(args, side, precision, text, vocab, loaded)
        row[side, precision] = result["tokens_per_second"]
        machine = result["machine"]
        quiet = quiet and machine["quiet"]
        busy = "" if machine["quiet"] else "; busy: " + ", ".join(machine["busy"])
        speed = f"{row[side, precision]:,.0f} tokens/s"
        load = f"load before {machine['load']:.2f}{busy}"
        print(f"  {side} {precision}: {speed} ({load})", flush=True)
        if args.profile:
            ms = sorted(result["profile_ms"].items(), key=lambda item: -item[1])
            groups = ", ".join(f"{name} {value:.0f}" for name, value in ms)
            step = statistics.median(result["step_ms"])
            other = ", ".join(f"{k} {v:.0f}" for k, v in result["other_ms"].items())
            print(f"    step {step:.0f} ms; self CPU ms a step: {groups}; largest in other: "
                  f"{other}", flush=True)  # fmt: skip
    return row, quiet


def report(kind: str, rounds: list[dict], precisions: list[str]) -> None:
    if not rounds:
        return
    print(f"{kind} ({len(rounds)} rounds):")
    for side, precision in arms_of(precisions):
        values = [row[side, precision] for row in rounds]
        print(f"  {side} {precision}: median {statistics.median(values):,.0f} tokens/s")
    for precision in precisions:
        values = [ratio_of(row, precision) for row in rounds]
        against = " (Trainer fp32)" if precision == "auto" else ""
        each = ", ".join(f"{value:.2f}" for value in values)
        print(f"  bertlab / Trainer, {precision}{against}: median {statistics.median(values):.2f}x "
              f"({min(values):.2f}-{max(values):.2f}; rounds {each})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", help="a vocab.txt (default: one trained on the text)")
    parser.add_argument("--vocab-size", type=int, default=8000, help="pieces of that vocabulary")
    parser.add_argument("--size", choices=SHAPES, default="mini")
    parser.add_argument(
        "--precisions", default="fp32,bf16,auto", help="comma-separated: fp32, bf16, auto"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds on a quiet machine")
    parser.add_argument(
        "--loaded-rounds", type=int, default=0, help="rounds beside one CPU-bound process"
    )
    parser.add_argument("--steps", type=int, default=30, help="timed steps an arm")
    parser.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    parser.add_argument("--lines", type=int, default=20_000, help="lines of Wikipedia")
    parser.add_argument("--profile", type=int, default=0, help="profile this many steps")
    parser.add_argument(
        "--workers", type=int, default=None, help="bertlab's data workers (default: its own)"
    )
    parser.add_argument("--work", default="runs/step-vs-trainer", help="data and runs")
    parser.add_argument("--arm", choices=SIDES, dest="side", help=argparse.SUPPRESS)
    parser.add_argument("--precision", help=argparse.SUPPRESS)
    parser.add_argument("--text", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        return arm(args)
    args.work = Path(args.work).resolve()
    text, vocab = prepare(args.work, args.lines, args.vocab, args.vocab_size)
    precisions = [p for p in args.precisions.split(",") if p]
    if "auto" in precisions and "fp32" not in precisions:
        precisions.insert(0, "fp32")  # auto is compared with the Trainer's fp32
    pieces = len(vocab.read_text(encoding="utf-8").splitlines())
    print(f"{cpu_name()}; BERT-{args.size}, {pieces:,} pieces, masked LM at 15%, batch "
          f"{BATCH_SIZE} x {SEQ_LEN} packed; tokens/s over {args.steps} steps after "
          f"{args.warmup}", flush=True)  # fmt: skip
    quiet_rounds, busy_rounds, loaded_rounds = [], [], []
    for number in range(args.rounds + args.loaded_rounds):
        loaded = number >= args.rounds
        row, quiet = run_round(args, precisions, text, vocab, number, loaded)
        kind = "loaded" if loaded else ("quiet" if quiet else "not quiet")
        line = "; ".join(f"{p} {ratio_of(row, p):.2f}x" for p in precisions)
        print(f"round {number + 1} ({kind}): bertlab / Trainer {line}", flush=True)
        (loaded_rounds if loaded else quiet_rounds if quiet else busy_rounds).append(row)
    report("quiet machine", quiet_rounds, precisions)
    report("machine busy before an arm (not quiet)", busy_rounds, precisions)
    report("beside one other CPU-bound process", loaded_rounds, precisions)


if __name__ == "__main__":
    main()
