"""`bertlab finetune|evaluate|predict|score`: BERT's second stage on named tasks and users' data.

Each handler builds the config dataclasses from the flags and calls
`bertlab.training.finetuning.finetune` /
`bertlab.task_families`: each training flag's destination is the `FinetuneConfig` field of its name
and each input flag's the `TaskDataConfig` field (`--epochs` is `num_train_epochs`,
`--freeze-encoder` `do_freeze_encoder`; `bertlab.cli.task_configs` copies them generically). The
task names and their defaults come from the task registry (`bertlab.data.tasks.registry`).
`evaluate` and `score` print the metrics as one JSON object on the last line of stdout; `finetune`
prints its summary the same way.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from bertlab.cli import task_configs as configs
from bertlab.cli.common import CommandError, add_threads_flag, warn
from bertlab.core.atomic import json_text
from bertlab.core.config import PRESETS
from bertlab.data.tasks.registry import (
    GENERIC_CLASSIFICATION,
    TASKS,
    task_names,
)

logger = logging.getLogger(__name__)


def add_task_commands(subparsers: argparse._SubParsersAction) -> None:
    """`bertlab finetune`, `evaluate`, `predict` and `score`."""
    _add_finetune(subparsers)
    evaluate = subparsers.add_parser(
        "evaluate",
        help="score a fine-tuned model on labelled data with the task's official metrics",
        description="Predict on labelled data and score it. The metrics are printed as one JSON "
        "object on the last line of stdout.",
    )
    _add_model_data_flags(evaluate)
    evaluate.set_defaults(handler=run_evaluate)
    predict = subparsers.add_parser(
        "predict",
        help="write a fine-tuned model's predictions for a file",
        description="Predictions as JSON Lines ({index, id, prediction}; classification adds "
        "label_name where the task names its labels, e.g. SST-2's negative/positive, and "
        "probabilities, every label's); SQuAD-style tasks: the official "
        "{question_id: answer_text} JSON; tagging: the input columns plus a predicted tag column. "
        "More: docs/finetuning.md#prediction-files",
    )
    _add_model_data_flags(predict)
    predict.add_argument(
        "--output", required=True, help="the predictions file to write (-: standard output)"
    )
    predict.add_argument(
        "--with-text",
        action="store_true",
        help="write each example's text beside its prediction (JSON Lines predictions: "
        "classification and multiple choice)",
    )
    predict.set_defaults(handler=run_predict)
    score = subparsers.add_parser(
        "score",
        help="score any system's predictions file against gold data",
        description="The official metrics of a predictions file (the format `predict` writes) "
        "against the gold file, as one JSON object on the last line of stdout.",
    )
    _add_task_flag(score)
    score.add_argument("--data", required=True, help="the gold file")
    score.add_argument("--predictions", required=True, help="the predictions file")
    _add_column_flags(score)
    score.set_defaults(handler=run_score)


def _add_finetune(subparsers: argparse._SubParsersAction) -> None:
    from bertlab.core.finetune_config import SCHEDULES, FinetuneConfig

    defaults = FinetuneConfig()
    parser = subparsers.add_parser(
        "finetune",
        help="fine-tune a task head on a pre-trained model (BERT, NNLM, ELMo, AWD-LSTM) or a "
        "from-scratch BERT",
        description="Fine-tune on a task's training file; evaluate on the dev data after every "
        "epoch and keep the best model in OUT/best. Each kind of --model fine-tunes its paper's "
        "way unless flags say otherwise: a BERT its task heads with BERT's recipe; NNLM its "
        "vectors as the embeddings of a random BERT-Tiny-shaped encoder (the word-vector start); "
        "ELMo its frozen biLM, a learned scalar mix and a BiLSTM (classification, tagging); "
        "AWD-LSTM ULMFiT's classifier and strategy (classification). "
        "docs/word2vec-to-bert.md#the-lstm-era-fine-tune-and-inspect. Tasks: "
        + "; ".join(f"{spec.name} ({spec.description})" for spec in TASKS.values())
        + f"; {GENERIC_CLASSIFICATION} (your own CSV/TSV/JSONL, columns named by flags).",
    )
    _add_finetune_data_flags(parser)
    _add_finetune_model_flags(parser)
    _add_training_flags(parser, defaults)
    _add_strategy_flags(parser, defaults, SCHEDULES)
    _add_feature_flags(parser)
    _add_speed_flags(parser, defaults)
    _add_data_flags(parser)
    _add_column_flags(parser)
    parser.set_defaults(handler=run_finetune)


def _add_finetune_data_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("task and data")
    _add_task_flag(group)
    add = group.add_argument
    add("--train", required=True, help="the training file")
    add("--dev", default=None, help="the dev file, evaluated after each epoch")
    add(
        "--dev-fraction",
        type=float,
        default=0.0,
        help="hold out this fraction of --train as dev (default: %(default)g, none)",
    )
    add(
        "--max-train-examples",
        type=int,
        default=None,
        help="train on a random subset of this size (default: all)",
    )


def _add_finetune_model_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model and output")
    add = group.add_argument
    add(
        "--model",
        default=None,
        help="a bertlab or Hugging Face model folder (a BERT, or the OUT/final of `bertlab "
        "pretrain --architecture nnlm|elmo|awd-lstm`), or a Hugging Face Hub id such as "
        "bert-base-uncased or google/bert_uncased_L-2_H-128_A-2 (downloaded once, cached)",
    )
    add("--from-scratch", action="store_true", help="random weights: the no-pre-training baseline")
    add("--model-size", choices=list(PRESETS), default=None, help="with --from-scratch")
    add(
        "--tokenizer",
        default=None,
        help="vocab.txt, tokenizer folder or Hugging Face Hub id (default: the model's)",
    )
    add("--out", required=True, help="the run directory")
    add(
        "--overwrite",
        action="store_true",
        help="replace an earlier fine-tuning run in --out (its best/, results and seed runs); "
        "without it such an --out is refused",
    )


def _add_training_flags(parser: argparse.ArgumentParser, defaults: Any) -> None:
    group = parser.add_argument_group(
        "training", "BERT's fine-tuning recipe by default (paper A.3; docs/finetuning.md)"
    )
    add = group.add_argument
    add(
        "--epochs",
        dest="num_train_epochs",
        metavar="EPOCHS",
        type=int,
        default=None,
        help="(default: by the model, see --learning-rate)",
    )
    add("--seed", type=int, default=defaults.seed, help="(default: %(default)s)")
    add(
        "--seeds",
        default=None,
        help="comma-separated seeds, e.g. 1,2,3: one run each, summarized (instead of --seed)",
    )
    add(
        "--learning-rate",
        type=float,
        default=None,
        help="the peak rate (default: by the model, with --epochs: a BERT by its width, 1e-3 x "
        "4 epochs up to 128 wide, 3e-4 x 4 up to 256, 1e-4 x 4 up to 512, else BERT's 2e-5 x the "
        "task's epochs; NNLM's task model likewise at its vectors' width; ELMo 1e-3 x 4; "
        "AWD-LSTM ULMFiT's 1e-2 x one epoch per layer group and one more; the run says which)",
    )
    add(
        "--batch-size",
        type=int,
        default=None,
        help=f"examples per optimizer step (default: {defaults.batch_size}; ULMFiT's 64 for "
        "an AWD-LSTM)",
    )
    add(
        "--gradient-accumulation-steps",
        type=int,
        default=defaults.gradient_accumulation_steps,
        help="split each batch into this many micro-batches (default: %(default)s)",
    )
    add(
        "--warmup-proportion",
        type=float,
        default=defaults.warmup_proportion,
        help="share of the steps the rate rises (default: %(default)g)",
    )
    add(
        "--weight-decay",
        type=float,
        default=defaults.weight_decay,
        help="AdamW's decoupled weight decay (default: %(default)g)",
    )
    add(
        "--max-grad-norm",
        type=float,
        default=defaults.max_grad_norm,
        help="clip the gradients' global norm (default: %(default)g)",
    )
    add(
        "--early-stopping-patience",
        type=int,
        default=defaults.early_stopping_patience,
        help="stop after this many epochs without a better dev score (default: %(default)s, never)",
    )
    add(
        "--freeze-encoder",
        dest="do_freeze_encoder",
        action="store_true",
        help="train only the task layer (feature-based)",
    )
    add(
        "--freeze-layers",
        type=int,
        default=0,
        help="freeze the embeddings and the first K layers (default: %(default)s)",
    )


def _add_speed_flags(parser: argparse.ArgumentParser, defaults: Any) -> None:
    group = parser.add_argument_group("speed")
    add = group.add_argument
    add(
        "--eval-batch-size",
        type=int,
        default=defaults.eval_batch_size,
        help="examples per evaluation batch (default: %(default)s)",
    )
    _add_precision_flag(group, defaults.precision)
    add("--no-progress", action="store_true", help="hide the progress bar")
    add_threads_flag(group)


def _add_strategy_flags(
    parser: argparse.ArgumentParser, defaults: Any, schedules: tuple[str, ...]
) -> None:
    group = parser.add_argument_group(
        "strategy",
        "how the layers train over the run (docs/finetuning.md#fine-tuning-strategies); they "
        "combine with each other (but --gradual-unfreezing with --head-warmup-epochs) and with "
        "--freeze-layers. A BERT (and NNLM's task model) trains without them by default, an "
        "AWD-LSTM with ULMFiT's three (1/2.6, slanted-triangular, gradual unfreezing)",
    )
    group.add_argument(
        "--layerwise-lr-decay",
        type=float,
        default=None,
        metavar="D",
        help="layer l of L trains at the learning rate times D^(L-l), the embeddings lowest, the "
        "pooler and the task layer at the full rate; ULMFiT's classifier one group above its "
        f"top LSTM (ULMFiT: 1/2.6; ELECTRA: 0.8; default: {defaults.layerwise_lr_decay:g}, off, "
        "but for an AWD-LSTM)",
    )
    group.add_argument(
        "--schedule",
        choices=schedules,
        default=None,
        help="linear: warmup then linear decay (BERT's); slanted-triangular: ULMFiT's short "
        "rise and long fall; constant: warmup then the full rate (default: "
        f"{defaults.schedule}, but for an AWD-LSTM)",
    )
    group.add_argument(
        "--cut-frac",
        type=float,
        default=defaults.cut_frac,
        help="slanted-triangular: the fraction of the steps the rate rises (default: %(default)g)",
    )
    group.add_argument(
        "--stlr-ratio",
        type=float,
        default=defaults.stlr_ratio,
        help="slanted-triangular: the peak rate over the lowest (default: %(default)g)",
    )
    group.add_argument(
        "--gradual-unfreezing",
        dest="do_gradual_unfreezing",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="ULMFiT: the task layer alone in epoch 1, then one more layer group per epoch from "
        "the top (the top layer with the pooler, ..., the embeddings); default: off, but for an "
        "AWD-LSTM (--no-gradual-unfreezing turns it off there)",
    )
    group.add_argument(
        "--head-warmup-epochs",
        type=int,
        default=defaults.head_warmup_epochs,
        metavar="N",
        help="Keras' staged recipe: the task layer alone (encoder frozen) for N epochs, then "
        "everything not frozen by --freeze-layers, with a fresh optimizer and schedule at the "
        "full rate (default: %(default)s, off)",
    )


def _add_feature_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.network.feature_head_config import LAYER_COMBINATIONS

    group = parser.add_argument_group(
        "feature-based",
        "what the task layer reads besides the last layer (BERT Sec. 5.3, Table 7; "
        "docs/word2vec-to-bert.md#feature-based-fine-tuning), of a BERT or of ELMo's biLM (whose "
        "default is --features scalar-mix --bilstm); not of an AWD-LSTM",
    )
    group.add_argument(
        "--features",
        choices=LAYER_COMBINATIONS,
        help="feature-based: the encoder frozen (no dropout), the task layer reads this "
        "combination of its hidden states: the embeddings, one layer, the sum or concatenation "
        "of the last four, the sum of all, or ELMo's scalar mix (softmax weights over every "
        "layer and a scale, learned with the task)",
    )
    group.add_argument(
        "--bilstm",
        action="store_true",
        help="a randomly initialized two-layer BiLSTM between the encoder (or its --features) "
        "and the task layer; without --features the encoder is fine-tuned under it (BERT "
        "Table 5's '+ BiLSTM')",
    )


def _add_precision_flag(parser: argparse._ActionsContainer, default: str) -> None:
    from bertlab.core.precision import PRECISIONS

    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default=default,
        help="auto: bf16 where it runs fast, else fp32 (default: %(default)s)",
    )


def _add_task_flag(parser: argparse._ActionsContainer) -> None:
    parser.add_argument(
        "--task",
        required=True,
        choices=task_names(),
        metavar="TASK",
        help="a task name (see `bertlab finetune --help`), or `classification` for your own "
        "CSV/TSV/JSONL file",
    )


def _add_model_data_flags(parser: argparse.ArgumentParser) -> None:
    _add_task_flag(parser)
    parser.add_argument(
        "--model", required=True, help="a fine-tuned model folder, or its Hugging Face Hub id"
    )
    parser.add_argument("--data", required=True, help="the input file (-: standard input)")
    parser.add_argument("--tokenizer", default=None, help="default: the model directory's")
    parser.add_argument(
        "--batch-size", type=int, default=64, help="examples per batch (default: %(default)s)"
    )
    _add_precision_flag(parser, "auto")
    add_threads_flag(parser)
    _add_data_flags(parser)
    _add_column_flags(parser)


def _add_data_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "inputs", "default: the values the model was fine-tuned with, else Google's defaults"
    )
    group.add_argument(
        "--max-seq-length", type=int, default=None, help="128; 384 for question answering"
    )
    group.add_argument("--doc-stride", type=int, default=None, help="QA: 128")
    group.add_argument("--max-query-length", type=int, default=None, help="QA: 64")
    group.add_argument("--n-best-size", type=int, default=None, help="QA: 20")
    group.add_argument("--max-answer-length", type=int, default=None, help="QA: 30 pieces")


def _add_column_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "columns", "for --task classification: where the texts and labels are (CSV/TSV/JSONL)"
    )
    group.add_argument("--text-column", default=None, help="first text (default: text)")
    group.add_argument("--text-pair-column", default=None, help="second text, for pairs")
    group.add_argument("--label-column", default=None, help="label (default: label)")
    group.add_argument("--id-column", default=None, help="example id, copied to predictions")
    group.add_argument(
        "--no-header", action="store_true", help="no header row: columns are 0-based positions"
    )
    group.add_argument("--regression", action="store_true", help="numeric targets (MSE loss)")


# --- handlers -------------------------------------------------------------------------------------


def run_finetune(args: argparse.Namespace) -> int:
    """Check every input, then train; print the result (or the seeds summary) as JSON."""
    from bertlab.core.outputs import check_outputs
    from bertlab.core.run_folder import BEST_DIR
    from bertlab.training.finetuning.finetune import read_task_data, run_finetuning

    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CommandError(f"--out {out} exists and is not a directory")
    reads = {"--train": args.train, "--dev": args.dev, "--model": args.model}
    check_outputs(reads | {"--tokenizer": args.tokenizer}, {"--out": out})
    source = configs.model_source(args)
    task = configs.with_features(args, configs.task_of(args), source)
    seeds = configs.seeds(args)
    config = configs.finetune_config(args, source)  # validates the flags before reading data
    data = read_task_data(
        task,
        Path(args.train),
        None if args.dev is None else Path(args.dev),
        args.dev_fraction,
        args.max_train_examples,
    )
    show_progress = not args.no_progress
    result = run_finetuning(task, data, source, config, out, seeds, args.overwrite, show_progress)
    print(f"best model: {out / BEST_DIR}")
    print(json_text(result))
    return 0


def _load(args: argparse.Namespace):
    """(task, model, tokenizer, precision) for evaluate/predict, after checking the model."""
    from bertlab.core.config import read_json_object
    from bertlab.core.hub import resolve
    from bertlab.core.runtime import default_device, resolve_precision
    from bertlab.network.architectures import architecture_of
    from bertlab.task_families import read_task_file
    from bertlab.tokenizer.wordpiece import Tokenizer, check_fits_vocabulary

    directory = resolve(args.model)
    if not (directory / "config.json").is_file():
        raise CommandError(f"--model {directory}: no config.json (not a model directory)")
    task = configs.task_of(args, read_task_file(directory))
    values = read_json_object(directory / "config.json")
    try:
        architecture = architecture_of(values)
    except ValueError as error:
        raise CommandError(f"--model {directory}: {error}") from None
    if architecture.head_family(values) != task.spec.family:
        held = ", ".join(values.get("architectures") or []) or "model without a head"
        families = architecture.head_families
        wanted = [name for name, family in families.items() if family == task.spec.family]
        named = f" ({', '.join(wanted)})" if wanted else ""
        raise CommandError(
            f"--model {directory} is a {held}, but task {task.name} needs a "
            f"{task.spec.family} head{named}; fine-tune one with `bertlab finetune`"
        )
    model = task.load_head(directory, None)
    task.check_fits(model.config)
    tokenizer = Tokenizer.from_pretrained(args.tokenizer or directory)
    check_fits_vocabulary(tokenizer, model.config.vocab_size)
    device = default_device()
    return task, model.to(device), tokenizer, resolve_precision(args.precision, device)


def _input(args: argparse.Namespace):
    """--data as a path; `-`: standard input (`streams.input_path`)."""
    from bertlab.cli.streams import input_path
    from bertlab.data.tasks.classification import suffix_for

    return input_path(args.data, suffix_for if args.task == GENERIC_CLASSIFICATION else None)


UNKNOWN_CHECK_EXAMPLES = 1000  # the examples whose pieces the [UNK] warning counts


def _warn_if_mostly_unknown(task, tokenizer, examples) -> None:
    """`warn` when the first examples' texts are mostly [UNK] for the model's vocabulary (a model
    of another language); families whose predictions show no text (tagging, SQuAD) are not
    counted."""
    texts = []
    for example in examples[:UNKNOWN_CHECK_EXAMPLES]:
        for value in (task.text_fields(example) or {}).values():
            texts += [value] if isinstance(value, str) else [v for v in value or () if v]
    if texts:
        warn(tokenizer.mostly_unknown_warning(texts))


def run_evaluate(args: argparse.Namespace) -> int:
    from bertlab.task_families import run_task

    task, model, tokenizer, precision = _load(args)
    id2label = getattr(model, "id2label", None)  # a label head's (no span or choice head has)
    label_names = None if id2label is None else list(id2label.values())
    with _input(args) as data:
        examples = task.read_gold(data, label_names)
    _warn_if_mostly_unknown(task, tokenizer, examples)
    predictions = run_task(task, model, tokenizer, examples, args.batch_size, precision)
    print(json_text(task.score(predictions, examples)))
    return 0


def run_predict(args: argparse.Namespace) -> int:
    import sys

    from bertlab.cli.streams import STDOUT, output_path
    from bertlab.core.outputs import check_outputs
    from bertlab.task_families import predict_task

    output = output_path(args.output)
    if output.is_dir():
        raise CommandError(f"--output {output} is a directory")
    check_outputs({"--data": args.data, "--model": args.model}, {"--output": output})
    task, model, tokenizer, precision = _load(args)
    with _input(args) as data:
        examples = task.read_inputs(data)
        if args.with_text and examples and task.text_fields(examples[0]) is None:
            raise CommandError(
                f"--with-text: the predictions file of {task.name} (a {task.spec.family} task) "
                "has no place for the text; classification and multiple-choice files have"
            )
        _warn_if_mostly_unknown(task, tokenizer, examples)
        predictions, details = predict_task(
            task, model, tokenizer, examples, args.batch_size, precision, args.with_text
        )
        task.write(predictions, examples, data, output, details)
    # stdout holds the predictions when they go there: the summary goes to stderr then
    report = sys.stderr if output == STDOUT else sys.stdout
    where = "standard output" if output == STDOUT else args.output
    print(f"wrote {len(examples)} predictions to {where}", file=report)
    return 0


def run_score(args: argparse.Namespace) -> int:
    from bertlab.data.tasks.scoring import score

    columns = configs.column_spec(args, None) if args.task == GENERIC_CLASSIFICATION else None
    print(json_text(score(args.task, args.data, args.predictions, columns)))
    return 0
