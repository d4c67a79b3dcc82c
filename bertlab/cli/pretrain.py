"""`bertlab pretrain`: a corpus and a tokenizer in, a pre-trained BERT out (`OUT/final/`).

The same command runs under `torchrun --nproc_per_node N` (DistributedDataParallel: gloo on the
CPU, NCCL on GPUs); torchrun's RANK, WORLD_SIZE and LOCAL_RANK are read here.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path

from bertlab.budget import (
    LARGER_MODEL,
    LARGER_MODEL_MINUTES,
    POSITION_INITS,
    BudgetRecipe,
    init_positions,
    restore_finetune_dropout,
)
from bertlab.cli.common import CommandError

DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")
SECONDS_PER_UNIT = (3600.0, 60.0, 1.0)
CORPUS_CACHE_DIR = "corpus"
TOKENIZER_DIR = "tokenizer"  # --budget without --tokenizer: the vocabulary trained on the corpus
DEFAULT_MODEL_SIZE = "mini"
# Training memory per layer and token, from Korthikanti et al. 2022 ("Reducing Activation
# Recomputation in Large Transformer Models", §4.1): s·b·h·(34 + 5·a·s/h) bytes in 16-bit, twice
# that in fp32. Weights, gradients and Adam's two moments: 16 bytes per parameter in fp32.
ACTIVATION_BYTES_PER_HIDDEN = 34
ATTENTION_BYTES_PER_HEAD_POSITION = 5
FP32_FACTOR = 2
TRAINING_BYTES_PER_PARAMETER = 16
MEMORY_HEADROOM = 0.9  # refuse when the estimate exceeds this share of physical memory


def parse_duration(text: str) -> float:
    """Seconds in `30m`, `1h`, `1h30m`, `90s` or `90` (seconds)."""
    match = DURATION.match(text.strip().lower())
    if not text.strip() or match is None or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (examples: 30m, 1h, 90s)")
    return sum(
        float(v) * unit for v, unit in zip(match.groups(), SECONDS_PER_UNIT, strict=True) if v
    )


def add_pretrain_command(subparsers: argparse._SubParsersAction) -> None:
    from bertlab.config import OBJECTIVES, PRESETS, PretrainConfig, PretrainDataConfig

    parser = subparsers.add_parser(
        "pretrain",
        help="pre-train a BERT on your own corpus (masked LM + next-sentence prediction)",
        description="Pre-train a BERT from raw text: the corpus is tokenized once (cached), "
        "checked (a pre-flight report), then trained with masked LM (+ NSP). Checkpoints, "
        "metrics.jsonl and curves.png go to --out; the model to OUT/final/ (Hugging Face layout, "
        "with the tokenizer). Run under `torchrun --nproc_per_node N` for several processes.",
    )
    data, train = PretrainDataConfig, PretrainConfig
    add = parser.add_argument
    add("--corpus", nargs="+", required=True, help="text files (.txt/.gz), Google's layout")
    add("--tokenizer", help="vocab.txt or tokenizer directory (default: the --init-from model's)")
    add("--out", required=True, help="run directory: checkpoints, metrics, final model")
    add("--model-size", choices=list(PRESETS), help="preset (default: mini)")
    add("--config", help="config.json of the architecture (instead of --model-size)")
    add("--init-from", help="continue pre-training this model directory (domain adaptation)")
    add("--objective", choices=OBJECTIVES, help=f"(default: {data.objective})")
    add("--max-seq-length", type=int, help=f"tokens per sequence (default: {data.max_seq_length})")
    add("--mlm-probability", type=float, help=f"share masked (default: {data.mlm_probability})")
    add("--max-predictions-per-seq", type=int, help="(default: ceil(length * probability))")
    add("--short-seq-prob", type=float, default=data.short_seq_prob, help="shorter targets")
    add("--whole-word-mask", action="store_true", help="mask whole words (zh: jieba words)")
    add(
        "--position-init",
        choices=POSITION_INITS,
        help="initial position embeddings of a new model (not with --init-from): normal "
        "(BERT's) or sinusoidal (the Transformer's sinusoids, still learned; leaves the unigram "
        "plateau sooner) (default: normal; sinusoidal with --budget)",
    )
    add(
        "--pack-sequences",
        action=argparse.BooleanOptionalAction,
        help="mlm/clm: fill every sequence to the full length across sentence boundaries "
        "(default: off; on with --budget)",
    )
    add("--lang", default="auto", choices=("auto", "en", "zh"), help="sentence splitting")
    add(
        "--batch-size",
        type=int,
        help=f"sequences per step and process (default: {train.batch_size})",
    )
    add("--gradient-accumulation-steps", type=int, default=train.gradient_accumulation_steps)
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--max-steps", type=int, help="optimizer steps to train")
    budget.add_argument("--max-time", type=parse_duration, help="training time, e.g. 30m, 1h")
    budget.add_argument(
        "--budget",
        type=parse_duration,
        help="training time with the budget recipe (docs/budget.md): model size "
        f"{LARGER_MODEL} from {LARGER_MODEL_MINUTES:g} min ({BudgetRecipe.model_size} below), "
        f"a vocabulary trained on the corpus, packed MLM at {BudgetRecipe.mlm_probability:.0%}%, "
        "one-cycle; any flag given explicitly still wins",
    )
    add("--learning-rate", type=float, help=f"peak (default: {train.learning_rate})")
    add("--warmup", type=float, help=f"warmup share of the run (default: {train.warmup_fraction})")
    add(
        "--schedule",
        choices=("linear", "one-cycle"),
        help="learning rate over --max-steps or --max-time: linear (BERT's warmup and decay) or "
        "one-cycle (cosine rise and fall) (default: linear)",
    )
    add("--weight-decay", type=float, default=train.weight_decay)
    add("--dropout", type=float, help="hidden and attention dropout (default: the config's)")
    add("--seed", type=int, default=train.seed)
    add("--checkpoint-every", type=int, help="checkpoint every N steps")
    add("--checkpoint-minutes", type=float, help="checkpoint every M minutes")
    add("--keep-checkpoints", type=int, default=train.keep_checkpoints, help="0 keeps all")
    add("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    add("--eval-every", type=int, default=train.eval_every_steps, help="steps; 0: only at end")
    add("--eval-examples", type=int, default=train.eval_examples, help="held-out sequences")
    add("--log-every", type=int, default=train.log_every_steps, help="steps per metrics record")
    add("--precision", default="auto", choices=("auto", "fp32", "bf16"), help="auto: bf16 if fast")
    add("--compile", action="store_true", help="torch.compile the model")
    add("--num-workers", type=int, choices=(0, 1), default=train.num_workers, help="0: inline")
    add("--corpus-cache", help=f"tokenized corpus directory (default: OUT/{CORPUS_CACHE_DIR})")
    add("--no-progress", action="store_true", help="hide progress bars")
    parser.set_defaults(handler=run_pretrain)


def run_pretrain(args: argparse.Namespace) -> int:
    from bertlab.training.runtime import DistributedContext, distributed

    context = DistributedContext(
        rank=int(os.environ.get("RANK", "0")),
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
    )
    with distributed(context):
        return _pretrain(args, context)


def _pretrain(args: argparse.Namespace, context) -> int:
    from bertlab.data.corpus import build_corpus, check_objective, preflight_report
    from bertlab.modeling import BertForPreTraining
    from bertlab.training.loop import pretrain
    from bertlab.training.runtime import barrier, set_seed

    recipe = _fill_defaults(args)
    data_config, config = _configs(args)
    out = Path(args.out)
    _check_out(out, args.resume)
    say = print if context.is_main else (lambda *_: None)
    if recipe is not None:
        say(f"budget recipe for {args.budget / 60:g} min: {_describe(recipe, args)}")
    tokenizer = _tokenizer(args, recipe, out, context)
    model_config = _model_config(args, tokenizer)
    cache = Path(args.corpus_cache) if args.corpus_cache else out / CORPUS_CACHE_DIR
    show = not args.no_progress
    if context.is_main:
        corpus = build_corpus(args.corpus, tokenizer, cache, args.lang, show, args.whole_word_mask)
    barrier(context)
    if not context.is_main:
        corpus = build_corpus(args.corpus, tokenizer, cache, args.lang, False, args.whole_word_mask)
    report = preflight_report(corpus, tokenizer, data_config.objective, data_config.max_seq_length)
    for line in report.summary():
        say(line)
    check_objective(report, data_config.objective)
    _check_memory(model_config, config.micro_batch_size, data_config.max_seq_length)
    set_seed(config.seed)
    if args.init_from:
        model = BertForPreTraining.from_pretrained(args.init_from, config=model_config)
    else:
        model = BertForPreTraining(model_config)
        init_positions(model.bert.embeddings, args.position_init, model_config.initializer_range)
    num_parameters = sum(p.numel() for p in model.parameters())
    global_batch = config.batch_size * context.world_size
    say(
        f"model: {num_parameters / 1e6:.1f}M parameters, {model_config.num_hidden_layers} layers, "
        f"hidden {model_config.hidden_size}; global batch {global_batch} x "
        f"{data_config.max_seq_length} tokens; {context.world_size} process(es)"
    )
    result = pretrain(
        model, tokenizer, corpus, data_config, config, out, context, args.resume, show
    )
    progress = result.progress
    say(
        f"trained {progress.step:,} steps, {progress.tokens:,} tokens in "
        f"{progress.elapsed / 60:.1f} min"
    )
    if result.last_eval:
        say("held-out: " + ", ".join(f"{k} {v:.4f}" for k, v in result.last_eval.items()))
    if recipe is not None and args.dropout is None and context.is_main:
        restore_finetune_dropout(result.final_dir)
        say(f"pre-trained without dropout; {result.final_dir}/config.json has BERT's 0.1 again")
    say(f"wrote {result.final_dir}")
    return 0


# Flags whose default depends on --budget: (name, PretrainDataConfig / PretrainConfig field).
_RECIPE_FLAGS = (
    ("objective", "objective"),
    ("max_seq_length", "max_seq_length"),
    ("mlm_probability", "mlm_probability"),
    ("batch_size", "batch_size"),
    ("learning_rate", "learning_rate"),
    ("warmup", "warmup_fraction"),
    ("schedule", "schedule"),
)


def _fill_defaults(args: argparse.Namespace):
    """Fill the flags the user left unset: from the budget recipe with --budget, else from the
    configs' defaults. Returns the recipe, or None without --budget."""
    from bertlab.budget import budget_recipe
    from bertlab.config import PretrainConfig, PretrainDataConfig

    recipe = None
    if args.budget is not None:
        recipe = budget_recipe(args.budget)
        args.max_time = args.budget
    for flag, field in _RECIPE_FLAGS:
        if getattr(args, flag) is None:
            if recipe is not None:
                value = getattr(recipe, field)
            else:
                defaults = (
                    PretrainDataConfig if hasattr(PretrainDataConfig, field) else PretrainConfig
                )
                value = getattr(defaults, field)
            setattr(args, flag, value)
    if args.pack_sequences is None:
        args.pack_sequences = (
            recipe is not None and recipe.pack_sequences and args.objective != "mlm+nsp"
        )
    if recipe is not None and args.dropout is None and not args.init_from:
        args.pretrain_dropout = recipe.dropout
    else:
        args.pretrain_dropout = args.dropout
    if args.position_init is not None and args.init_from:
        raise CommandError(
            "--position-init sets a new model's positions; --init-from keeps the model's own"
        )
    if args.position_init is None:
        args.position_init = recipe.position_init if recipe is not None else "normal"
    if args.model_size is None and not (args.config or args.init_from):
        args.model_size = recipe.model_size if recipe is not None else DEFAULT_MODEL_SIZE
    return recipe


def _describe(recipe, args: argparse.Namespace) -> str:
    shape = f"BERT-{args.model_size}" if args.model_size else "model as given"
    vocabulary = (
        f"{recipe.vocab_size:,}-piece vocabulary trained on the corpus"
        if not (args.tokenizer or args.init_from)
        else "tokenizer as given"
    )
    return (
        f"{shape}, {vocabulary}, {args.objective} at {args.mlm_probability:.0%} masking, "
        f"{'packed ' if args.pack_sequences else ''}sequences of {args.max_seq_length}, "
        f"batch {args.batch_size}, {args.schedule} to "
        f"{args.learning_rate:g}, dropout {args.pretrain_dropout:g}"
    )


def _configs(args: argparse.Namespace):
    from bertlab.config import PretrainConfig, PretrainDataConfig

    max_predictions = args.max_predictions_per_seq or math.ceil(
        args.max_seq_length * args.mlm_probability
    )
    data_config = PretrainDataConfig(
        max_seq_length=args.max_seq_length,
        short_seq_prob=args.short_seq_prob,
        mlm_probability=args.mlm_probability,
        max_predictions_per_seq=max_predictions,
        objective=args.objective,
        do_whole_word_mask=args.whole_word_mask,
        pack_sequences=args.pack_sequences,
    )
    config = PretrainConfig(
        learning_rate=args.learning_rate,
        weight_decay=args.weight_decay,
        warmup_fraction=args.warmup,
        schedule=args.schedule,
        batch_size=args.batch_size,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        max_steps=args.max_steps,
        max_time=args.max_time,
        seed=args.seed,
        log_every_steps=args.log_every,
        eval_every_steps=args.eval_every,
        eval_examples=args.eval_examples,
        checkpoint_every_steps=args.checkpoint_every,
        checkpoint_every_minutes=args.checkpoint_minutes,
        keep_checkpoints=args.keep_checkpoints,
        precision=args.precision,
        do_compile=args.compile,
        num_workers=args.num_workers,
    )
    return data_config, config


def _check_out(out: Path, resume: bool) -> None:
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out {out} exists and is not a directory")
    if not resume and ((out / "checkpoints").exists() or (out / "final").exists()):
        raise CommandError(f"--out {out} already holds a run; add --resume or choose another --out")


def _tokenizer(args: argparse.Namespace, recipe, out: Path, context):
    from bertlab.tokenization import Tokenizer
    from bertlab.training.runtime import barrier

    path = args.tokenizer or args.init_from
    if path is not None:
        return Tokenizer.from_pretrained(path)
    if recipe is None:
        raise CommandError("give --tokenizer (vocab.txt or a tokenizer directory), or --budget")
    directory = out / TOKENIZER_DIR
    if context.is_main and not (directory / "vocab.txt").is_file():
        _train_budget_tokenizer(args, recipe, directory)
    barrier(context)
    return Tokenizer.from_pretrained(directory)


def _train_budget_tokenizer(args: argparse.Namespace, recipe, directory: Path) -> None:
    from bertlab.data.corpus_encode import sniff_lang
    from bertlab.tokenizer_training import TokenizerTrainingConfig, train_tokenizer
    from bertlab.training.checkpointing import replace_directory

    lang = sniff_lang(Path(args.corpus[0]), args.lang)
    config = TokenizerTrainingConfig(
        vocab_size=recipe.vocab_size, min_ideograph_frequency=recipe.ideograph_frequency(lang)
    )
    print(f"training a vocabulary of {recipe.vocab_size:,} pieces on the corpus ({lang})")
    tokenizer, report = train_tokenizer(args.corpus, config, show_progress=not args.no_progress)
    for line in report.summary():
        print(f"  {line}")
    replace_directory(directory, tokenizer.save_pretrained)


def _model_config(args: argparse.Namespace, tokenizer):
    from bertlab.config import BertConfig

    if args.init_from:
        config = BertConfig.from_json_file(Path(args.init_from) / "config.json")
    elif args.config:
        config = BertConfig.from_json_file(args.config)
    else:
        config = BertConfig.from_preset(
            args.model_size, vocab_size=tokenizer.vocab_size, pad_token_id=tokenizer.pad_token_id
        )
    if config.vocab_size != tokenizer.vocab_size:
        raise CommandError(
            f"the tokenizer has {tokenizer.vocab_size} tokens but the model's vocabulary has "
            f"{config.vocab_size}; use the model's own tokenizer (or a --config with "
            f"vocab_size {tokenizer.vocab_size})"
        )
    if args.max_seq_length > config.max_position_embeddings:
        raise CommandError(
            f"--max-seq-length {args.max_seq_length} exceeds the model's "
            f"max_position_embeddings {config.max_position_embeddings}"
        )
    if args.objective == "clm":
        config = config.replace(is_causal=True)
    if args.pretrain_dropout is not None:
        config = config.replace(
            hidden_dropout_prob=args.pretrain_dropout,
            attention_probs_dropout_prob=args.pretrain_dropout,
        )
    return config


def _check_memory(config, batch_size: int, length: int) -> None:
    """Refuse a micro-batch whose training memory clearly exceeds the machine's RAM."""
    layer = batch_size * length * config.hidden_size
    per_layer = layer * (
        ACTIVATION_BYTES_PER_HIDDEN
        + ATTENTION_BYTES_PER_HEAD_POSITION
        * config.num_attention_heads
        * length
        / config.hidden_size
    )
    parameters = config.vocab_size * config.hidden_size + config.num_hidden_layers * (
        12 * config.hidden_size**2
    )
    needed = FP32_FACTOR * per_layer * config.num_hidden_layers
    needed += TRAINING_BYTES_PER_PARAMETER * parameters
    available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if needed > MEMORY_HEADROOM * available:
        raise CommandError(
            f"a micro-batch of {batch_size} x {length} tokens needs about {needed / 2**30:.0f} GiB "
            f"to train, more than this machine's {available / 2**30:.0f} GiB; lower --batch-size "
            "and raise --gradient-accumulation-steps"
        )
