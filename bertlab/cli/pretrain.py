"""`bertlab pretrain`: a corpus and a tokenizer in, a pre-trained BERT out (`OUT/final/`).

The flags are the fields of `bertlab.training.pretraining.run.PretrainRun` (same names); this module
only parses them into one and calls `run_pretraining`. The same command runs under `torchrun
--nproc_per_node N` (DistributedDataParallel: gloo on the CPU, NCCL on GPUs); torchrun's RANK,
WORLD_SIZE and LOCAL_RANK are read here.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re

from bertlab.cli.common import CORPUS_HELP, add_corpus_reading_flags, add_threads_flag

DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?$")
SECONDS_PER_UNIT = (3600.0, 60.0, 1.0)
BUDGET_DOCS = "docs/budget.md#what---budget-chooses"


def parse_duration(text: str) -> float:
    """Seconds in `30m`, `1h`, `1h30m`, `90s` or `90` (seconds)."""
    match = DURATION.match(text.strip().lower())
    if not text.strip() or match is None or not any(match.groups()):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (examples: 30m, 1h, 90s)")
    return sum(
        float(v) * unit for v, unit in zip(match.groups(), SECONDS_PER_UNIT, strict=True) if v
    )


def add_pretrain_command(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "pretrain",
        help="pre-train a BERT on your own corpus (masked LM + NSP, masked LM, left-to-right or "
        "ELECTRA)",
        description="Pre-train a BERT from raw text (plain text, JSON Lines, CSV, TSV, Parquet "
        "or a saved dataset; a record is one document): the corpus is tokenized once (cached), "
        "checked (a pre-flight report), then trained with the objective (masked LM + NSP by "
        "default). Checkpoints, metrics.jsonl and curves.png go to --out; the model to OUT/final/ "
        "(Hugging Face layout, with the tokenizer). Run under `torchrun --nproc_per_node N` for "
        "several processes. Every flag is a field of the Python API's PretrainRun of the same "
        "name.",
    )
    _add_input_flags(parser)
    _add_objective_flags(parser)
    _add_length_flags(parser)
    _add_optimizer_flags(parser)
    _add_checkpoint_flags(parser)
    _add_machine_flags(parser)
    parser.set_defaults(handler=run_pretrain)


def _add_input_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.core.config import PRESETS
    from bertlab.core.lstm_config import DEFAULT_LM_PRESET, LM_PRESETS
    from bertlab.core.run_folder import CORPUS_CACHE_DIR
    from bertlab.corpus.sources import LANGS
    from bertlab.training.pretraining.budget import POSITION_INITS, BudgetRecipe
    from bertlab.training.pretraining.options import ARCHITECTURES, BERT, DEFAULT_MODEL_SIZE

    group = parser.add_argument_group("corpus, vocabulary and model")
    add = group.add_argument
    add("--corpus", nargs="+", required=True, help=CORPUS_HELP)
    add_corpus_reading_flags(group)
    add("--out", required=True, help="run directory: checkpoints, metrics, final model")
    add("--lang", default="auto", choices=LANGS, help="sentence splitting (default: auto)")
    add("--corpus-cache", help=f"tokenized corpus directory (default: OUT/{CORPUS_CACHE_DIR})")
    add(
        "--tokenizer",
        help="vocab.txt, tokenizer folder or Hub id (default: the --init-from model's, or one of "
        "--vocab-size pieces trained on the corpus)",
    )
    add(
        "--vocab-size",
        type=int,
        help="train a vocabulary of this many pieces on the corpus into OUT/tokenizer (default "
        f"with --budget: {BudgetRecipe.vocab_size:,})",
    )
    add(
        "--architecture",
        choices=ARCHITECTURES,
        help=f"the network (default: {BERT}): BERT trained by --objective, or the LSTM era's, "
        "each trained by its paper's objective on left-to-right targets: nnlm (Bengio et al. "
        "2003: the next piece from the 4 before it), elmo (Peters et al. 2018: a forward and a "
        "backward LSTM LM), awd-lstm (Merity et al. 2017, the network ULMFiT fine-tunes)",
    )
    sizes = "; ".join(f"{name}: {', '.join(presets)}" for name, presets in LM_PRESETS.items())
    add(
        "--model-size",
        help=f"preset of the network: {BERT}: {', '.join(PRESETS)} (default: "
        f"{DEFAULT_MODEL_SIZE}; with --budget the recipe's); {sizes} (default: "
        f"{DEFAULT_LM_PRESET})",
    )
    add("--config", dest="model_config", help="config.json of the architecture")
    add(
        "--init-from",
        help="continue pre-training this model folder or Hugging Face Hub id, e.g. "
        "bert-base-uncased (domain adaptation)",
    )
    add(
        "--position-init",
        choices=POSITION_INITS,
        help="initial position embeddings of a new model (not with --init-from): normal "
        "(BERT's) or sinusoidal (the Transformer's sinusoids, still learned; leaves the unigram "
        "plateau sooner) (default: normal; sinusoidal with --budget)",
    )


def _add_objective_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.core.config import OBJECTIVES, ElectraConfig, PretrainDataConfig

    group = parser.add_argument_group("objective and sequences")
    add = group.add_argument
    data = PretrainDataConfig
    add("--objective", choices=OBJECTIVES, help=f"(default: {data.objective})")
    add("--max-seq-length", type=int, help=f"tokens per sequence (default: {data.max_seq_length})")
    add("--mlm-probability", type=float, help=f"share masked (default: {data.mlm_probability})")
    add("--max-predictions-per-seq", type=int, help="(default: ceil(length * probability))")
    add("--short-seq-prob", type=float, help=f"shorter targets (default: {data.short_seq_prob})")
    add(
        "--whole-word-mask",
        dest="do_whole_word_mask",
        action="store_true",
        help="mask whole words (zh: jieba words)",
    )
    add(
        "--pack-sequences",
        action=argparse.BooleanOptionalAction,
        help="mlm/clm: fill every sequence to the full length across sentence boundaries "
        "(default: off; on with --budget)",
    )
    add(
        "--generator-size",
        type=float,
        help="objective electra: the generator's width as a share of the model's (default: "
        f"{ElectraConfig.generator_size:g}, ELECTRA-Small's)",
    )
    add(
        "--char-cnn",
        dest="use_char_cnn",
        action="store_true",
        default=None,
        help="--architecture elmo: ELMo's character CNN over each piece's characters (those of "
        "the WordPiece vocabulary: Chinese too, no byte ids) instead of piece embeddings",
    )
    add(
        "--rtd-weight",
        type=float,
        help="objective electra: the weight of replaced-token detection against the generator's "
        f"masked-LM loss (default: {ElectraConfig.rtd_weight:g}, ELECTRA's lambda)",
    )


def _add_length_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.training.pretraining.budget import LARGER_MODEL, LARGER_MODEL_MINUTES, BudgetRecipe

    group = parser.add_argument_group("how long (one of the three)")
    budget = group.add_mutually_exclusive_group(required=True)
    budget.add_argument("--max-steps", type=int, help="optimizer steps to train")
    budget.add_argument("--max-time", type=parse_duration, help="training time, e.g. 30m, 1h")
    recipe = BudgetRecipe
    budget.add_argument(
        "--budget",
        type=parse_duration,
        help=f"training time with the budget recipe ({BUDGET_DOCS}): on a CPU model size "
        f"{LARGER_MODEL} from {LARGER_MODEL_MINUTES:g} min ({recipe.model_size} below); on a GPU "
        "the largest shape that reads 20 tokens per parameter at the speed measured first, "
        f"with its batch and peak rate; a vocabulary trained on the corpus, packed MLM at "
        f"{recipe.mlm_probability:.0%}%, one-cycle; any flag given explicitly still wins",
    )


def _add_optimizer_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.core.config import PRETRAIN_SCHEDULES, PretrainConfig

    group = parser.add_argument_group("batch, optimizer and schedule")
    add = group.add_argument
    train = PretrainConfig
    add(
        "--batch-size",
        type=int,
        help=f"sequences per step and process (default: {train.batch_size})",
    )
    add(
        "--gradient-accumulation-steps",
        type=int,
        help=f"micro-batches per step (default: {train.gradient_accumulation_steps})",
    )
    add("--learning-rate", type=float, help=f"peak (default: {train.learning_rate})")
    add(
        "--warmup-proportion",
        type=float,
        help=f"warmup share of the run (default: {train.warmup_proportion})",
    )
    shapes = ", ".join(f"{name}: {shape}" for name, shape in PRETRAIN_SCHEDULES.items())
    add(
        "--schedule",
        choices=tuple(PRETRAIN_SCHEDULES),
        help=f"learning rate over the steps of --max-steps or the training time of --max-time "
        f"and --budget; {shapes} (default: {train.schedule})",
    )
    add("--weight-decay", type=float, help=f"(default: {train.weight_decay})")
    add("--dropout", type=float, help="hidden and attention dropout (default: the config's)")
    add(
        "--finetune-dropout",
        type=float,
        help="dropout written into OUT/final/config.json for fine-tuning (default: BERT's 0.1 "
        "after --budget, which pre-trains without dropout; else the dropout trained with)",
    )
    add("--seed", type=int, help=f"(default: {train.seed})")


def _add_checkpoint_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.core.config import PretrainConfig

    group = parser.add_argument_group("checkpoints, evaluation and logging")
    add = group.add_argument
    train = PretrainConfig
    add("--checkpoint-every", dest="checkpoint_every_steps", type=int, help="every N steps")
    add(
        "--checkpoint-minutes",
        dest="checkpoint_every_minutes",
        type=float,
        help="checkpoint after every M minutes of training (the clock of --max-time)",
    )
    add(
        "--keep-checkpoints",
        type=int,
        help=f"most recent kept; 0 keeps all (default: {train.keep_checkpoints})",
    )
    add("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    add(
        "--eval-every",
        dest="eval_every_steps",
        type=int,
        help=f"steps; 0: only at the end (default: {train.eval_every_steps})",
    )
    add("--eval-examples", type=int, help=f"held-out sequences (default: {train.eval_examples})")
    add(
        "--plateau-min-tokens",
        type=int,
        help="tokens after which a held-out accuracy still at the unigram level is reported as "
        f"the unigram plateau (default: {train.plateau_min_tokens:,})",
    )
    add(
        "--log-every",
        dest="log_every_steps",
        type=int,
        help=f"steps per metrics record (default: {train.log_every_steps})",
    )
    add("--no-progress", action="store_true", help="hide progress bars")


def _add_machine_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("speed")
    add = group.add_argument
    add("--precision", choices=("auto", "fp32", "bf16"), help="auto: bf16 if fast (default)")
    add("--compile", dest="do_compile", action="store_true", help="torch.compile the model")
    add(
        "--num-workers",
        type=int,
        help="processes building batches, the same batches for any number; 0: in the training "
        "process (default: 1 on the CPU; on a GPU up to 4, one core per GPU kept for training)",
    )
    add_threads_flag(group)


def pretrain_run(args: argparse.Namespace):
    """The `PretrainRun` of the flags (each flag's destination is the field of its name)."""
    from bertlab.training.pretraining.run import PretrainRun

    fields = [f.name for f in dataclasses.fields(PretrainRun)]
    return PretrainRun(**{name: getattr(args, name) for name in fields})


def run_pretrain(args: argparse.Namespace) -> int:
    from bertlab.core.runtime import DistributedContext, distributed
    from bertlab.training.pretraining.runner import run_pretraining

    run = pretrain_run(args)
    context = DistributedContext(
        rank=int(os.environ.get("RANK", "0")),
        world_size=int(os.environ.get("WORLD_SIZE", "1")),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
    )
    with distributed(context):
        result = run_pretraining(run, context, not args.no_progress, print)
    if context.is_main:
        print(f"wrote {result.final_dir}")
    return 0
