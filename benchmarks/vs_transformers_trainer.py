"""bertlab against the Hugging Face Trainer way, end to end: raw text to a model, and fine-tuning.

Pre-training (`pretrain`): the same text (a slice of the shared English Wikipedia plus a slice of
the IMDB reviews), the same tokenizer (the bert-base-uncased WordPiece vocabulary), the same model
shape, masking rate (15%, 80/10/10), batch (32 x 128; 8 x 128 at base), peak learning rate,
weight decay, warmup share, gradient clipping, dropout and fp32, each side in its own fresh
process for the same wall time, counted from the process's launch (tokenization included):

- the Trainer way, as transformers' examples/pytorch/language-modeling/run_mlm.py does it: a
  `BertTokenizerFast` over the text line by line (batches of 1,000 lines, as `datasets.map`
  hands them), every line's ids concatenated and cut into blocks of 128 ("grouped texts"),
  `DataCollatorForLanguageModeling`, `BertForMaskedLM` (SDPA attention), `Trainer` with its
  fastest documented CPU options: `optim="adamw_torch_fused"`, one dataloader worker (as
  bertlab), no `torch_compile` (minutes of compilation on 2 cores do not pay back in a run of
  minutes; see docs/performance.md). The `datasets` library is not used: it stores the same ids
  in an Arrow cache; the tokenizer calls are the same.
- bertlab: `run_pretraining(PretrainRun(...))`, what `bertlab pretrain --objective mlm
  --pack-sequences --max-time T` runs, on the same text file.

Both learning-rate schedules are BERT's linear warmup and decay over the run's wall-clock budget:
bertlab's `--max-time` schedule does this itself; the Trainer gets the same shape through its
documented `create_scheduler` hook (a `LambdaLR` over elapsed time instead of steps), since a
step count cannot be known before a fixed-time run.

Each side saves its weights at regular wall-clock marks. Afterwards one evaluator loads every
saved model into `transformers.BertForMaskedLM` and measures the masked-LM loss on the same
held-out blocks (documents of both corpora that neither side trains on; [CLS] + 126 tokens +
[SEP], 15% masked 80/10/10 with a fixed seed): loss against wall time and against tokens.

Throughput counts real (non-padding) tokens. MFU is FLOPs per second of training time over the
fp32 matmul peak measured in the same run (best of five 2048^2 `torch.mm`, at the start and the
end of the run; the higher is used): "computed" counts what each side computes (the Trainer's
MLM head over every position, bertlab's over the masked ones), "model" counts the MLM head at the
masked positions only, for both. Peak memory is the largest resident set of one process of the
side's process tree (`wait4`).

Fine-tuning (`finetune`): SST-2 (a slice of the train file, and a held-out part of it as dev: the
official dev set is kept elsewhere) and CoNLL-2003 (train.txt, valid.txt as dev), one epoch, from
the same start model (the bertlab mini model this run pre-trained, or `--start-model`), batch 32,
the same learning rate, fp32:

- the Trainer way as run_glue.py (`pad_to_max_length`: every sentence padded to 128) and
  run_ner.py (first piece of each word labelled, `DataCollatorForTokenClassification` padding to
  the longest in the batch, seqeval's entity F1), `optim="adamw_torch_fused"`, one worker;
- bertlab: `bertlab finetune --task sst2|conll2003 --epochs 1` (length-grouped batches).

The figure is the time of the epoch (training only), the dev score reached and the whole
command's wall time.

    flock /tmp/bertlab-bench.lock .venv/bin/python benchmarks/vs_transformers_trainer.py run \\
        --sizes mini:300,base:150 --finetune --json results.json

Speed alone, each side's training step in steady state at equal precision, and where a step's
time goes: `benchmarks/step_vs_trainer.py`.
"""

# Shapes: B batch, L sequence length (128), V vocab.

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared" / "data"
VOCAB = SHARED / "vocab" / "bert-base-uncased-vocab.txt"
WIKI = SHARED / "corpus_en" / "enwiki_sample_2021.txt.gz"
REVIEWS = SHARED / "corpus_reviews_en" / "imdb_reviews.txt.gz"
SST2 = SHARED / "glue" / "SST-2" / "train.tsv"
CONLL = SHARED / "conll2003"
SEQ_LEN = 128  # run_mlm.py's block size for BERT (max_seq_length 128 in BERT's phase 1)
BATCH_SIZES = {"base": 8}  # sequences per step (the step benchmark's); 32 for the smaller sizes
BATCH_SIZE = 32
MLM_PROBABILITY = 0.15  # BERT paper Sec. 3.1, DataCollatorForLanguageModeling's default
LEARNING_RATE = 1e-4  # BERT paper A.2; bertlab's default
WEIGHT_DECAY = 0.01  # BERT paper A.2
WARMUP_FRACTION = 0.01  # bertlab's default (BERT: 10k of 1M steps)
MAX_GRAD_NORM = 1.0  # both defaults
SEED = 0
TOKENIZE_BATCH = 1000  # lines per tokenizer call: datasets.map's default batch_size
HELD_OUT_DOCUMENTS = 100  # per corpus, taken after the training slice
HELD_OUT_BLOCKS = 256
EVAL_BLOCKS = {"base": 64}  # the first of the held-out blocks used at a size (all by default)
EVAL_BATCH = 32
FINETUNE_LEARNING_RATE = 5e-5  # TrainingArguments' default; one of BERT's (paper A.3)
SST2_TRAIN, SST2_DEV = 8000, 2000
MARKS = {"mini": 6, "base": 2}  # weight snapshots per run (the last at the end)
# bertlab's presets (BertConfig.from_preset), written out so that the Trainer's process never
# imports bertlab (whose import sets OpenMP's wait policy: bertlab.core.threads).
SHAPES = {
    "tiny": {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2},
    "mini": {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4},
    "small": {"hidden_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8},
    "base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12},
}
VOCAB_SIZE = 30522  # bert-base-uncased
PRECISIONS = ("fp32", "bf16")  # bf16: autocast on both sides (TrainingArguments(bf16=True))


def use_vocab(path: str | None) -> None:
    """Use the WordPiece vocabulary at `path` (one piece a line) instead of bert-base-uncased's,
    on both sides: the tokenizer and the model's vocabulary size (the MLM head's width)."""
    global VOCAB, VOCAB_SIZE
    if path:
        VOCAB = Path(path).resolve()
        VOCAB_SIZE = len(VOCAB.read_text(encoding="utf-8").splitlines())


# --- inputs ---------------------------------------------------------------------------------------


def write_corpus_slices(work: Path, megabytes: float) -> dict[str, Path]:
    """train.txt: the first `megabytes` MB of each corpus, cut at a document end (blank line);
    held_out.txt: the next HELD_OUT_DOCUMENTS documents of each."""
    train, held_out = work / "train.txt", work / "held_out.txt"
    if train.is_file() and held_out.is_file():
        return {"train": train, "held_out": held_out}
    with train.open("w", encoding="utf-8") as train_file, held_out.open("w") as held_file:
        for source in (WIKI, REVIEWS):
            written, held_documents, target = 0, 0, train_file
            with gzip.open(source, "rt", encoding="utf-8") as reader:
                for line in reader:
                    target.write(line)
                    if line.strip():
                        written += len(line.encode("utf-8"))
                    elif target is train_file and written >= megabytes * 1e6:
                        target = held_file
                    elif target is held_file:
                        held_documents += 1
                        if held_documents >= HELD_OUT_DOCUMENTS:
                            break
            train_file.write("\n")
            held_file.write("\n")
    return {"train": train, "held_out": held_out}


def held_out_blocks(path: Path, out: Path) -> Path:
    """HELD_OUT_BLOCKS blocks of [CLS] + 126 tokens + [SEP], masked once (fixed seed)."""
    import torch
    from tokenizers import BertWordPieceTokenizer

    if out.is_file():
        return out
    tokenizer = BertWordPieceTokenizer(str(VOCAB), lowercase=True)
    vocab = tokenizer.get_vocab()
    cls, sep, mask = vocab["[CLS]"], vocab["[SEP]"], vocab["[MASK]"]
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    ids: list[int] = []
    for encoding in tokenizer.encode_batch(lines, add_special_tokens=False):
        ids += encoding.ids
    inner = SEQ_LEN - 2
    blocks = [ids[i : i + inner] for i in range(0, len(ids) - inner, inner)]
    rng = random.Random(f"held-out:{SEED}")
    rng.shuffle(blocks)
    blocks = blocks[:HELD_OUT_BLOCKS]
    input_ids = torch.tensor([[cls, *block, sep] for block in blocks])  # (B, L)
    generator = torch.Generator().manual_seed(SEED)
    chosen = torch.rand(input_ids.shape, generator=generator) < MLM_PROBABILITY
    chosen[:, 0] = chosen[:, -1] = False
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, -100))
    draw = torch.rand(input_ids.shape, generator=generator)
    random_ids = torch.randint(len(vocab), input_ids.shape, generator=generator)
    masked = input_ids.clone()
    masked[chosen & (draw < 0.8)] = mask  # BERT paper Sec. 3.1: 80% [MASK]
    swap = chosen & (draw >= 0.8) & (draw < 0.9)  # 10% a random token, 10% unchanged
    masked[swap] = random_ids[swap]
    torch.save({"input_ids": masked, "labels": labels}, out)
    return out


# --- the peak -------------------------------------------------------------------------------------


def matmul_peak(size: int = 2048, repeats: int = 5) -> float:
    """fp32 FLOP/s of the best of `repeats` square matmuls (2 n^3 FLOPs each)."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    return 2 * size**3 / best


def hf_config(size: str):
    """transformers' BertConfig of a bertlab preset at the bert-base-uncased vocabulary."""
    import transformers

    shape = SHAPES[size]
    return transformers.BertConfig(
        vocab_size=VOCAB_SIZE,
        intermediate_size=4 * shape["hidden_size"],
        attn_implementation="sdpa",
        **shape,
    )


def pretraining_flops_per_sequence(size: str, predicted: float) -> float:
    """Forward + backward FLOPs of one sequence of SEQ_LEN tokens with `predicted` MLM positions
    (2 FLOPs per multiply-add, x3 for forward and backward; bench_model.py's formula)."""
    shape = SHAPES[size]
    hidden, layers = shape["hidden_size"], shape["num_hidden_layers"]
    inter = 4 * hidden
    encoder = 6 * layers * (4 * hidden**2 + 2 * hidden * inter) * SEQ_LEN
    attention = 6 * layers * 2 * SEQ_LEN**2 * hidden
    mlm_head = 6 * (hidden**2 + hidden * VOCAB_SIZE) * predicted
    return float(encoder + attention + mlm_head)


# --- the Trainer way ------------------------------------------------------------------------------


def hf_tokenizer(tokenizer_class, out: Path):
    """The fast WordPiece tokenizer of the vocabulary, loaded the documented way: from_pretrained
    of a folder holding vocab.txt (transformers 5 reads a vocab.txt only so)."""
    import shutil

    folder = out / "hf_tokenizer"
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(VOCAB, folder / "vocab.txt")
    return tokenizer_class.from_pretrained(folder, do_lower_case=True)


def linear_over_time(fraction: float) -> float:
    """BERT's schedule over the share of the run done: linear warmup, then linear decay to 0."""
    if fraction < WARMUP_FRACTION:
        return fraction / WARMUP_FRACTION
    return max(0.0, (1.0 - fraction) / (1.0 - WARMUP_FRACTION))


def hf_pretrain(args: argparse.Namespace) -> None:
    import numpy as np
    import torch
    import transformers
    from transformers import (
        BertForMaskedLM,
        BertTokenizerFast,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    use_vocab(args.vocab)
    deadline = args.launch_time + args.budget
    batch_size = BATCH_SIZES.get(args.size, BATCH_SIZE)
    tokenizer = hf_tokenizer(BertTokenizerFast, Path(args.out))
    lines = [line for line in Path(args.text).read_text(encoding="utf-8").splitlines()]
    lines = [line for line in lines if line.strip()]  # run_mlm.py: empty lines are dropped
    ids: list[np.ndarray] = []
    for start in range(0, len(lines), TOKENIZE_BATCH):
        encoded = tokenizer(lines[start : start + TOKENIZE_BATCH])["input_ids"]
        ids += [np.asarray(row, dtype=np.int32) for row in encoded]
    flat = np.concatenate(ids)
    num_blocks = len(flat) // SEQ_LEN  # group_texts drops the remainder
    blocks = torch.from_numpy(flat[: num_blocks * SEQ_LEN].astype(np.int64)).view(-1, SEQ_LEN)
    tokenized_at = time.time()

    class Blocks(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return len(blocks)

        def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
            return {"input_ids": blocks[index]}

    transformers.set_seed(SEED)
    model = BertForMaskedLM(hf_config(args.size))
    training_args = TrainingArguments(
        output_dir=str(Path(args.out) / "trainer"),
        per_device_train_batch_size=batch_size,
        learning_rate=LEARNING_RATE,
        weight_decay=WEIGHT_DECAY,
        max_grad_norm=MAX_GRAD_NORM,
        max_steps=10**7,  # the budget callback stops the run
        optim="adamw_torch_fused",
        bf16=args.precision == "bf16",  # autocast to bf16 on the CPU (accelerate), fp32 weights
        dataloader_num_workers=1,
        dataloader_pin_memory=False,
        use_cpu=True,
        save_strategy="no",
        logging_steps=10**7,
        report_to="none",
        seed=SEED,
        disable_tqdm=True,
    )
    train_start: list[float] = []

    class TimeBudgetTrainer(Trainer):
        def create_scheduler(self, num_training_steps, optimizer=None):
            if self.lr_scheduler is None:
                self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
                    optimizer or self.optimizer,
                    lambda _step: linear_over_time(
                        (time.time() - train_start[0]) / (deadline - train_start[0])
                        if train_start
                        else 0.0
                    ),
                )
            return self.lr_scheduler

    snapshots = Snapshots(Path(args.out), args.launch_time, args.budget, args.marks)

    class Budget(TrainerCallback):
        def on_train_begin(self, _args, state, control, **kwargs):
            train_start.append(time.time())

        def on_step_end(self, _args, state, control, **kwargs):
            tokens = state.global_step * batch_size * SEQ_LEN  # grouped texts: no padding
            seconds = time.time() - train_start[0]
            snapshots.maybe_save(kwargs["model"].state_dict(), state.global_step, tokens, seconds)
            if time.time() >= deadline:
                control.should_training_stop = True

    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=MLM_PROBABILITY)
    trainer = TimeBudgetTrainer(
        model=model,
        args=training_args,
        train_dataset=Blocks(),
        data_collator=collator,
        callbacks=[Budget()],
    )
    trainer.train()
    state = trainer.state
    tokens = state.global_step * batch_size * SEQ_LEN
    snapshots.save(model.state_dict(), state.global_step, tokens, time.time() - train_start[0])
    write_json(
        Path(args.out) / "side.json",
        {
            "side": "transformers",
            "tokenize_s": tokenized_at - args.launch_time,
            "train_start_s": train_start[0] - args.launch_time,
            "steps": state.global_step,
            "tokens": tokens,
            "predicted_per_sequence": SEQ_LEN,  # the MLM head runs over every position
            "corpus_tokens": int(len(flat)),
            "transformers": transformers.__version__,
            "precision": args.precision,
            "vocab_size": VOCAB_SIZE,
            "wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"),
            "threads": torch.get_num_threads(),
        },
    )


class Snapshots:
    """Weights saved at regular wall-clock marks, with when (since launch) and how far."""

    def __init__(self, out: Path, launch_time: float, budget: float, marks: int) -> None:
        self.directory = out / "snapshots"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.launch_time = launch_time
        self.marks = [launch_time + budget * (i + 1) / marks for i in range(marks - 1)]
        self.records: list[dict[str, Any]] = []

    def maybe_save(self, state_dict, step: int, tokens: int, train_seconds: float) -> None:
        if self.marks and time.time() >= self.marks[0]:
            self.marks.pop(0)
            self.save(state_dict, step, tokens, train_seconds)

    def save(self, state_dict, step: int, tokens: int, train_seconds: float) -> None:
        import torch

        wall = time.time() - self.launch_time
        path = self.directory / f"step{step:07d}.pt"
        torch.save(state_dict, path)
        self.records.append(
            {
                "path": str(path),
                "step": step,
                "tokens": tokens,
                "wall_s": wall,
                "train_s": train_seconds,
            }
        )
        write_json(self.directory / "index.json", self.records)


# --- bertlab --------------------------------------------------------------------------------------


def bertlab_pretrain(args: argparse.Namespace) -> None:
    import torch

    import bertlab
    from bertlab.corpus.build import build_corpus
    from bertlab.tokenizer.wordpiece import Tokenizer
    from bertlab.training.pretraining.checkpointing import list_checkpoints, load_state
    from bertlab.training.pretraining.run import PretrainRun
    from bertlab.training.pretraining.runner import run_pretraining

    use_vocab(args.vocab)
    out = Path(args.out)
    tokenizer = Tokenizer.from_pretrained(VOCAB)
    cache = out.parent / f"{out.name}-corpus"
    corpus = build_corpus([Path(args.text)], tokenizer, cache, "en", show_progress=False)
    tokenized_at = time.time()
    final_save = 8.0 if args.size == "base" else 2.0  # seconds to write the last checkpoint
    remaining = args.launch_time + args.budget - time.time() - final_save
    run = PretrainRun(
        corpus=(args.text,),
        out=out / "run",
        max_time=remaining,
        tokenizer=VOCAB,
        model_size=args.size,
        lang="en",
        corpus_cache=cache,
        objective="mlm",
        pack_sequences=True,
        mlm_probability=MLM_PROBABILITY,
        batch_size=BATCH_SIZES.get(args.size, BATCH_SIZE),
        learning_rate=LEARNING_RATE,
        warmup_proportion=WARMUP_FRACTION,
        schedule="linear",
        weight_decay=WEIGHT_DECAY,
        seed=SEED,
        eval_examples=0,
        checkpoint_every_minutes=remaining / args.marks / 60 if args.marks > 1 else None,
        keep_checkpoints=0,
        precision=args.precision,
    )
    train_start = time.time()
    result = run_pretraining(run, show_progress=False, say=lambda line: print(line, flush=True))
    records = []
    for checkpoint in list_checkpoints(out / "run"):
        progress = load_state(checkpoint)["progress"]
        records.append(
            {
                "path": str(checkpoint),
                "step": progress["step"],
                "tokens": progress["tokens"],
                "wall_s": checkpoint.stat().st_mtime - args.launch_time,
                "train_s": progress["elapsed"],
            }
        )
    progress = result.progress
    final = out / "run" / "final"
    records.append(
        {
            "path": str(final),
            "step": progress.step,
            "tokens": progress.tokens,
            "wall_s": time.time() - args.launch_time,
            "train_s": progress.elapsed,
        }
    )
    write_json(out / "snapshots" / "index.json", sorted(records, key=lambda r: r["step"]))
    write_json(
        out / "side.json",
        {
            "side": "bertlab",
            "tokenize_s": tokenized_at - args.launch_time,
            "train_start_s": train_start - args.launch_time,
            "steps": progress.step,
            "tokens": progress.tokens,
            "predicted_per_sequence": SEQ_LEN * MLM_PROBABILITY,  # masked positions only
            "corpus_tokens": corpus.meta.get("counts", {}).get("tokens"),
            "precision": args.precision,
            "vocab_size": VOCAB_SIZE,
            "wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"),
            "threads": torch.get_num_threads(),
            "bertlab": str(Path(bertlab.__file__).parent),
        },
    )


# --- one evaluator for both -----------------------------------------------------------------------


def load_masked_lm(size: str, path: Path):
    """A transformers `BertForMaskedLM` holding the weights at `path` (either side's)."""
    import torch
    import transformers

    from bertlab.network.checkpoint import read_weights

    model = transformers.BertForMaskedLM(hf_config(size))
    if path.is_dir():
        state_dict = read_weights(path)
    else:
        state_dict = torch.load(path, weights_only=True)
    missing, _ = model.load_state_dict(state_dict, strict=False)
    tied = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    if set(missing) - tied:
        raise SystemExit(f"{path}: missing weights {sorted(set(missing) - tied)}")
    model.tie_weights()
    return model.eval()


def held_out_loss(size: str, path: Path, blocks: dict) -> float:
    """Mean cross-entropy over the masked positions of the held-out blocks."""
    import torch

    model = load_masked_lm(size, path)
    total, count = 0.0, 0
    num_blocks = EVAL_BLOCKS.get(size, len(blocks["input_ids"]))
    with torch.inference_mode():
        for start in range(0, num_blocks, EVAL_BATCH):
            input_ids = blocks["input_ids"][start : start + EVAL_BATCH]
            labels = blocks["labels"][start : start + EVAL_BATCH]
            logits = model(input_ids=input_ids).logits  # (B, L, V)
            chosen = labels != -100
            loss = torch.nn.functional.cross_entropy(
                logits[chosen], labels[chosen], reduction="sum"
            )
            total, count = total + float(loss), count + int(chosen.sum())
    return total / count


# --- fine-tuning ----------------------------------------------------------------------------------


def write_finetune_data(work: Path, limit: int | None) -> dict[str, Path]:
    """SST-2: SST2_TRAIN training rows and SST2_DEV held-out rows of train.tsv; CoNLL-2003's
    train.txt and valid.txt (`limit`: at most that many training rows or sentences, for a check
    of the script)."""
    lines = SST2.read_text(encoding="utf-8").splitlines()
    header, rows = lines[0], lines[1:]
    train, dev = work / "sst2_train.tsv", work / "sst2_dev.tsv"
    train_rows = rows[: min(SST2_TRAIN, limit or SST2_TRAIN)]
    train.write_text("\n".join([header, *train_rows]) + "\n", encoding="utf-8")
    dev.write_text("\n".join([header, *rows[-SST2_DEV:]]) + "\n", encoding="utf-8")
    conll_train = CONLL / "train.txt"
    if limit:
        blocks = conll_train.read_text(encoding="utf-8").split("\n\n")[:limit]
        conll_train = work / "conll_train.txt"
        conll_train.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return {
        "sst2_train": train,
        "sst2_dev": dev,
        "conll2003_train": conll_train,
        "conll2003_dev": CONLL / "valid.txt",
    }


def read_conll(path: Path) -> list[tuple[list[str], list[str]]]:
    sentences, words, tags = [], [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("-DOCSTART-"):
            if words:
                sentences.append((words, tags))
            words, tags = [], []
            continue
        fields = line.split()
        words.append(fields[0])
        tags.append(fields[-1])
    if words:
        sentences.append((words, tags))
    return sentences


def hf_finetune(args: argparse.Namespace) -> None:
    import numpy as np
    import torch
    import transformers
    from transformers import (
        BertTokenizerFast,
        DataCollatorForTokenClassification,
        Trainer,
        TrainingArguments,
    )

    tokenizer = hf_tokenizer(BertTokenizerFast, Path(args.out))
    train_path, dev_path = Path(args.train), Path(args.dev)
    if args.task == "sst2":

        def read(path: Path) -> list[dict[str, Any]]:
            rows = [line.split("\t") for line in path.read_text().splitlines()[1:]]
            encoded = tokenizer(
                [row[0] for row in rows], padding="max_length", max_length=SEQ_LEN, truncation=True
            )  # run_glue.py: pad_to_max_length=True by default
            return [
                {key: encoded[key][i] for key in encoded} | {"labels": int(rows[i][1])}
                for i in range(len(rows))
            ]

        label_list = ["0", "1"]
        model_class, collator = transformers.BertForSequenceClassification, None

        def compute_metrics(prediction) -> dict[str, float]:
            predicted = np.argmax(prediction.predictions, axis=-1)
            return {"accuracy": float((predicted == prediction.label_ids).mean())}

    else:
        from seqeval.metrics import f1_score

        label_list = sorted({tag for _, tags in read_conll(train_path) for tag in tags})
        label_ids = {label: i for i, label in enumerate(label_list)}

        def read(path: Path) -> list[dict[str, Any]]:
            sentences = read_conll(path)
            encoded = tokenizer(
                [words for words, _ in sentences],
                is_split_into_words=True,
                truncation=True,
                max_length=SEQ_LEN,
            )  # run_ner.py: padding to the longest in the batch, by the collator
            features = []
            for i, (_, tags) in enumerate(sentences):
                labels, previous = [], None
                for word in encoded.word_ids(i):  # run_ner.py: label_all_tokens=False
                    labels.append(
                        -100 if word is None or word == previous else label_ids[tags[word]]
                    )
                    previous = word
                features.append({key: encoded[key][i] for key in encoded} | {"labels": labels})
            return features

        model_class = transformers.BertForTokenClassification
        collator = DataCollatorForTokenClassification(tokenizer)

        def compute_metrics(prediction) -> dict[str, float]:
            predicted = np.argmax(prediction.predictions, axis=-1)
            truth, guess = [], []
            for row_pred, row_label in zip(predicted, prediction.label_ids, strict=True):
                kept = row_label != -100
                truth.append([label_list[i] for i in row_label[kept]])
                guess.append([label_list[i] for i in row_pred[kept]])
            return {"entity_f1": float(f1_score(truth, guess))}

    train, dev = read(train_path), read(dev_path)
    transformers.set_seed(SEED)
    model = model_class.from_pretrained(
        args.start_model,
        num_labels=len(label_list),
        attn_implementation="sdpa",
    )
    training_args = TrainingArguments(
        output_dir=str(Path(args.out) / "trainer"),
        per_device_train_batch_size=BATCH_SIZE,
        per_device_eval_batch_size=64,
        learning_rate=FINETUNE_LEARNING_RATE,
        weight_decay=WEIGHT_DECAY,
        warmup_steps=0.1,  # a share of the steps: run_glue's examples use 0.1 as BERT
        num_train_epochs=1,
        optim="adamw_torch_fused",
        dataloader_num_workers=1,
        dataloader_pin_memory=False,
        use_cpu=True,
        save_strategy="no",
        report_to="none",
        seed=SEED,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train,
        eval_dataset=dev,
        data_collator=collator,
        compute_metrics=compute_metrics,
    )
    output = trainer.train()
    started = time.perf_counter()
    metrics = trainer.evaluate()
    write_json(
        Path(args.out) / "side.json",
        {
            "side": "transformers",
            "epoch_train_s": output.metrics["train_runtime"],
            "eval_s": time.perf_counter() - started,
            "score": metrics.get("eval_accuracy", metrics.get("eval_entity_f1")),
            "train_tokens_incl_padding": int(
                sum(len(f["input_ids"]) for f in train) if collator is None else 0
            ),
            "threads": torch.get_num_threads(),
        },
    )


def bertlab_finetune_command(task: str, train: Path, dev: Path, start: Path, out: Path) -> list:
    return [
        sys.executable, "-m", "bertlab", "finetune", "--task", task, "--train", str(train),
        "--dev", str(dev), "--model", str(start), "--epochs", "1", "--learning-rate",
        str(FINETUNE_LEARNING_RATE), "--seed", str(SEED), "--no-progress", "--out", str(out),
    ]  # fmt: skip


def bertlab_finetune_result(out: Path, task: str) -> dict[str, Any]:
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    epoch = [m for m in metrics if m["kind"] == "eval"][-1]
    score = epoch.get("accuracy", epoch.get("entity_f1", epoch.get("f1")))
    return {"side": "bertlab", "epoch_with_eval_s": epoch["seconds"], "score": score}


# --- running the sides ----------------------------------------------------------------------------


def write_json(path: Path, value: Any) -> None:
    """Not bertlab.core.atomic.write_json: the Trainer's process must not import bertlab
    (SHAPES)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1))


def tree_peak_rss_kib(root: int) -> int:
    """The largest VmHWM (peak resident set) of `root` and its descendants now, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    peak, pending = 0, [root]
    while pending:
        pid = pending.pop()
        pending += children.get(pid, [])
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                peak = max(peak, int(line.split()[1]))
    return peak


def run_process(argv: list[str], log: Path, env: dict | None = None) -> dict[str, float]:
    """Run `argv`; its wall time, CPU time and peak RSS (the largest process of its tree, polled
    from /proc every 0.2 s: a fork's rusage would also count the parent's pages)."""
    started = time.perf_counter()
    peak = 0
    with log.open("w") as output:
        process = subprocess.Popen(
            argv, stdout=output, stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=env
        )
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            peak = max(peak, tree_peak_rss_kib(process.pid))
            time.sleep(0.2)
    process.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {' '.join(argv)}; see {log}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mib": peak / 1024}


def pretrain_side(
    side: str,
    size: str,
    budget: float,
    inputs,
    work: Path,
    precision: str = "fp32",
    marks: int | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """One side's run in a fresh process."""
    out = work / (name or f"{side}-{size}")
    subprocess.run(["rm", "-rf", str(out), f"{out}-corpus"], check=True)
    out.mkdir(parents=True)
    env = dict(os.environ)
    launch = time.time()
    argv = [
        sys.executable, __file__, f"{side}-pretrain", "--size", size, "--budget", str(budget),
        "--launch-time", repr(launch), "--text", str(inputs["train"]), "--out", str(out),
        "--marks", str(marks or MARKS.get(size, 4)), "--precision", precision,
        "--vocab", str(VOCAB),
    ]  # fmt: skip
    process = run_process(argv, out / "log.txt", env)
    side_record = json.loads((out / "side.json").read_text())
    snapshots = json.loads((out / "snapshots" / "index.json").read_text())
    return {"process": process, "side": side_record, "snapshots": snapshots}


def interpolate(points: list[tuple[float, float]], x: float) -> float | None:
    """Loss at `x` on the piecewise-linear curve through (x, loss) points, in log x."""
    points = sorted(points)
    if not points or x < points[0][0] or x > points[-1][0]:
        return None
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if x0 <= x <= x1:
            if x1 == x0:
                return y1
            share = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + share * (y1 - y0)
    return points[-1][1]


def first_reaching(points: list[tuple[float, float]], loss: float) -> float | None:
    """The x at which the curve (log-linear between points) first reaches `loss`."""
    points = sorted(points)
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if y0 > loss >= y1:
            share = (y0 - loss) / (y0 - y1)
            return math.exp(math.log(x0) + share * (math.log(x1) - math.log(x0)))
    if points and points[0][1] <= loss:
        return points[0][0]
    return None


def compare_pretraining(size: str, sides: dict[str, dict], peak: float) -> dict[str, Any]:
    """The table row of one size from both sides' runs and evaluated snapshots."""
    row: dict[str, Any] = {"size": size}
    for name, result in sides.items():
        side, process = result["side"], result["process"]
        last = result["snapshots"][-1]
        train_s = last["train_s"]
        tokens_per_second = side["tokens"] / train_s
        sequences_per_second = tokens_per_second / SEQ_LEN
        computed = pretraining_flops_per_sequence(size, side["predicted_per_sequence"])
        model = pretraining_flops_per_sequence(size, SEQ_LEN * MLM_PROBABILITY)
        row[name] = {
            "wall_s": process["wall_s"],
            "tokenize_s": side["tokenize_s"],
            "train_start_s": side["train_start_s"],
            "train_s": train_s,
            "steps": side["steps"],
            "tokens": side["tokens"],
            "tokens_per_second_train": tokens_per_second,
            "tokens_per_second_wall": side["tokens"] / process["wall_s"],
            "mfu_computed": sequences_per_second * computed / peak,
            "mfu_model": sequences_per_second * model / peak,
            "peak_rss_mib": process["peak_rss_mib"],
            "cpu_s": process["cpu_s"],
            "final_loss": result["snapshots"][-1]["loss"],
            "curve": [
                {k: s[k] for k in ("step", "tokens", "wall_s", "train_s", "loss")}
                for s in result["snapshots"]
            ],
        }
    bertlab, hf = sides["bertlab"]["snapshots"], sides["transformers"]["snapshots"]
    common_wall = min(bertlab[-1]["wall_s"], hf[-1]["wall_s"])
    common_tokens = min(bertlab[-1]["tokens"], hf[-1]["tokens"])
    by_wall = {n: [(s["wall_s"], s["loss"]) for s in r["snapshots"]] for n, r in sides.items()}
    by_tokens = {n: [(s["tokens"], s["loss"]) for s in r["snapshots"]] for n, r in sides.items()}
    row["equal_wall_s"] = common_wall
    row["loss_at_equal_wall"] = {n: interpolate(p, common_wall) for n, p in by_wall.items()}
    row["equal_tokens"] = common_tokens
    row["loss_at_equal_tokens"] = {n: interpolate(p, common_tokens) for n, p in by_tokens.items()}
    target_loss = hf[-1]["loss"]
    reached = first_reaching(by_wall["bertlab"], target_loss)
    row["hf_final_loss"] = target_loss
    row["bertlab_wall_to_hf_final_loss_s"] = reached
    row["time_to_equal_loss_ratio"] = None if reached is None else reached / hf[-1]["wall_s"]
    row["tokens_per_second_ratio"] = (
        row["bertlab"]["tokens_per_second_train"] / row["transformers"]["tokens_per_second_train"]
    )
    return row


def run(args: argparse.Namespace) -> None:
    import torch

    use_vocab(args.vocab)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "cores": os.cpu_count(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "pretraining": [],
        "finetuning": [],
    }
    peaks = [matmul_peak()]
    print(f"fp32 matmul peak at the start: {peaks[0] / 1e9:.1f} GFLOP/s", flush=True)
    inputs = write_corpus_slices(work, args.megabytes)
    blocks_path = held_out_blocks(inputs["held_out"], work / "held_out_blocks.pt")
    blocks = torch.load(blocks_path, weights_only=True)
    start_model = Path(args.start_model) if args.start_model else None
    runs = {}
    for item in args.sizes.split(","):
        if not item:
            continue
        size, budget = item.split(":")
        sides = {}
        for side in ("transformers", "bertlab") if args.hf_first else ("bertlab", "transformers"):
            tag = "hf" if side == "transformers" else "bertlab"
            print(f"{size}: {side} for {budget} s of wall time", flush=True)
            sides[side] = pretrain_side(tag, size, float(budget), inputs, work)
            for snapshot in sides[side]["snapshots"]:
                snapshot["loss"] = held_out_loss(size, Path(snapshot["path"]), blocks)
            print(json.dumps(sides[side]["side"]), json.dumps(sides[side]["process"]), flush=True)
            print(
                "  " + ", ".join(f"{s['wall_s']:.0f}s {s['tokens']:,} tok {s['loss']:.3f}"
                                 for s in sides[side]["snapshots"]),
                flush=True,
            )  # fmt: skip
        runs[size] = sides
        if size == "mini" and start_model is None:
            start_model = work / "bertlab-mini" / "run" / "final"
    peaks.append(matmul_peak())
    peak = max(peaks)
    results["matmul_peak_flops"] = peaks
    print(f"fp32 matmul peak at the end: {peaks[-1] / 1e9:.1f} GFLOP/s", flush=True)
    for size, sides in runs.items():
        results["pretraining"].append(compare_pretraining(size, sides, peak))
    if args.finetune:
        if start_model is None:
            raise SystemExit("fine-tuning needs --start-model or a mini pre-training run")
        data = write_finetune_data(work, args.finetune_limit)
        for task in ("sst2", "conll2003"):
            row = {"task": task, "start_model": str(start_model)}
            train, dev = data[f"{task}_train"], data[f"{task}_dev"]
            for side in ("transformers", "bertlab"):
                out = work / f"finetune-{side}-{task}"
                subprocess.run(["rm", "-rf", str(out)], check=True)
                out.mkdir(parents=True)
                if side == "transformers":
                    argv = [
                        sys.executable, __file__, "hf-finetune", "--task", task, "--train",
                        str(train), "--dev", str(dev), "--start-model", str(start_model),
                        "--out", str(out),
                    ]  # fmt: skip
                    process = run_process(argv, work / f"finetune-{side}-{task}.log")
                    record = json.loads((out / "side.json").read_text())
                else:
                    argv = bertlab_finetune_command(task, train, dev, start_model, out)
                    process = run_process(argv, work / f"finetune-{side}-{task}.log")
                    record = bertlab_finetune_result(out, task)
                row[side] = record | process
                print(task, side, json.dumps(row[side]), flush=True)
            results["finetuning"].append(row)
    print(markdown(results))
    if args.json:
        write_json(Path(args.json), results)


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "fp32 matmul peak (start, end): "
        + ", ".join(f"{p / 1e9:.1f}" for p in results["matmul_peak_flops"])
        + " GFLOP/s",
        "",
        "| size | side | wall s (tokenize) | steps | tokens/s train (wall) | loss at equal wall "
        "| loss at equal tokens | MFU computed (model) | peak RSS MiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["pretraining"]:
        for name in ("transformers", "bertlab"):
            side = row[name]
            lines.append(
                f"| {row['size']} | {name} | {side['wall_s']:.0f} ({side['tokenize_s']:.0f}) | "
                f"{side['steps']} | {side['tokens_per_second_train']:,.0f} "
                f"({side['tokens_per_second_wall']:,.0f}) | "
                f"{_fmt(row['loss_at_equal_wall'][name])} @ {row['equal_wall_s']:.0f} s | "
                f"{_fmt(row['loss_at_equal_tokens'][name])} @ {row['equal_tokens']:,} | "
                f"{side['mfu_computed']:.0%} ({side['mfu_model']:.0%}) | "
                f"{side['peak_rss_mib']:,.0f} |"
            )
        lines.append(
            f"| {row['size']} | ratio | | | **{row['tokens_per_second_ratio']:.2f}x** | | | | |"
        )
        ratio = row["time_to_equal_loss_ratio"]
        lines.append(
            f"\n{row['size']}: the Trainer's final loss {row['hf_final_loss']:.3f}; bertlab "
            + (
                f"reached it after {row['bertlab_wall_to_hf_final_loss_s']:.0f} s = "
                f"**{ratio:.2f}** of the Trainer's time\n"
                if ratio is not None
                else "did not reach it within its run\n"
            )
        )
    if results["finetuning"]:
        lines += [
            "| task | side | epoch + dev evaluation s (train only) | dev score | command wall s "
            "| peak RSS MiB |",
            "|---|---|---|---|---|---|",
        ]
        for row in results["finetuning"]:
            for name in ("transformers", "bertlab"):
                side = row[name]
                if name == "transformers":
                    epoch = f"{side['epoch_train_s'] + side['eval_s']:.1f} "
                    epoch += f"({side['epoch_train_s']:.1f})"
                else:
                    epoch = f"{side['epoch_with_eval_s']:.1f}"
                lines.append(
                    f"| {row['task']} | {name} | {epoch} | {_fmt(side['score'])} | "
                    f"{side['wall_s']:.1f} | {side['peak_rss_mib']:,.0f} |"
                )
            ratio = row["transformers"]["wall_s"] / row["bertlab"]["wall_s"]
            lines.append(f"| {row['task']} | ratio (command wall) | | | **{ratio:.2f}x** | |")
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    everything = commands.add_parser("run", help="every side, the evaluation and the table")
    everything.add_argument("--sizes", default="mini:600,base:300", help="SIZE:SECONDS,...")
    everything.add_argument("--megabytes", type=float, default=4.0, help="per corpus")
    everything.add_argument("--finetune", action="store_true")
    everything.add_argument("--start-model", default=None)
    everything.add_argument("--finetune-limit", type=int, default=None, help="for a quick check")
    everything.add_argument("--hf-first", action="store_true")
    everything.add_argument("--work-dir", default="/tmp/vs_transformers_trainer")
    everything.add_argument("--json", default=None)
    everything.add_argument("--vocab", default=None, help="vocab.txt (bert-base-uncased's)")
    everything.set_defaults(handler=run)
    for name, handler in (("hf-pretrain", hf_pretrain), ("bertlab-pretrain", bertlab_pretrain)):
        side = commands.add_parser(name)
        side.add_argument("--size", required=True)
        side.add_argument("--budget", type=float, required=True)
        side.add_argument("--launch-time", type=float, required=True)
        side.add_argument("--text", required=True)
        side.add_argument("--out", required=True)
        side.add_argument("--marks", type=int, default=4)
        side.add_argument("--precision", choices=PRECISIONS, default="fp32")
        side.add_argument("--vocab", default=None)
        side.set_defaults(handler=handler)
    finetune = commands.add_parser("hf-finetune")
    finetune.add_argument("--task", choices=("sst2", "conll2003"), required=True)
    finetune.add_argument("--train", required=True)
    finetune.add_argument("--dev", required=True)
    finetune.add_argument("--start-model", required=True)
    finetune.add_argument("--out", required=True)
    finetune.set_defaults(handler=hf_finetune)
    args = parser.parse_args()
    args.handler(args)


if __name__ == "__main__":
    main()
