"""`bertlab experiment transfer`: pre-train on a budget, then measure what it buys downstream;
`bertlab experiment ablation`: BERT's ablations of its pre-training tasks and of fine-tuning
against features, side by side; `bertlab experiment strategies`: fine-tuning strategies with
few labels; `bertlab experiment lineage`: the lectures' models from NNLM to BERT on one corpus."""

from __future__ import annotations

import argparse

from bertlab.cli.common import CommandError
from bertlab.cli.pretrain import BUDGET_DOCS, parse_duration


def add_experiment_commands(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("experiment", help="experiments that measure the recipes")
    commands = parser.add_subparsers(title="experiments", metavar="EXPERIMENT", required=True)
    add_transfer_command(commands)
    add_ablation_command(commands)
    add_strategies_command(commands)
    add_lineage_command(commands)
    add_compare_command(commands)


def add_transfer_command(commands: argparse._SubParsersAction) -> None:
    transfer = commands.add_parser(
        "transfer",
        help="does budget pre-training pay off? pre-trained vs from scratch on GLUE-style tasks",
        description="Pre-train with `bertlab pretrain --budget`, then fine-tune the model at 0 "
        "(from scratch), the --points and the whole budget on each task with the same "
        "fine-tuning budget and several seeds; score on a test split carved from each task's "
        "training file. Writes OUT/table.md (median and min-max per point), OUT/transfer.png "
        "and OUT/results.json. Running the same command again continues an interrupted run; "
        "one with other settings (OUT/settings.json) is refused.",
    )
    # The flags show the defaults where they are declared without torch (`transfer_options`,
    # `transfer_rows`, `budget`): `TransferConfig` itself imports torch.
    _add_transfer_run_flags(transfer)
    _add_transfer_pretrain_flags(transfer)
    _add_transfer_arm_flags(transfer)
    _add_transfer_finetune_flags(transfer)
    transfer.set_defaults(handler=run_transfer_command)


def _add_transfer_run_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.apps.experiments.transfer_options import DEFAULT_LANG, DEFAULT_SEEDS
    from bertlab.apps.experiments.transfer_rows import ROWS

    english = ", ".join(row.name for row in ROWS["en"])
    chinese = ", ".join(row.name for row in ROWS["zh"])
    add = parser.add_argument
    add(
        "--data",
        required=True,
        help="the data directory (layout of ../shared/data: glue/SST-2/...)",
    )
    add("--out", required=True, help="experiment directory")
    add(
        "--lang",
        default=DEFAULT_LANG,
        choices=list(ROWS),
        help="en or zh (default: en)",
    )
    add("--tasks", help=f"comma-separated subset (en: {english}; zh: {chinese}; default: all)")
    add("--seeds", default=",".join(map(str, DEFAULT_SEEDS)), help="(default: %(default)s)")
    add("--no-progress", action="store_true", help="hide progress bars")


def _add_transfer_pretrain_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.apps.experiments.transfer_options import (
        DEFAULT_BUDGET_MINUTES,
        DEFAULT_POINTS,
        DEFAULT_TASK_TEXT_REPEATS,
        PRETRAIN_OBJECTIVES,
    )
    from bertlab.core.config import PRESETS
    from bertlab.training.pretraining.budget import (
        LARGER_MODEL,
        LARGER_MODEL_LEARNING_RATE,
        LARGER_MODEL_MINUTES,
        BudgetRecipe,
    )

    group = parser.add_argument_group("pre-training (the budget recipe unless a flag says)")
    add = group.add_argument
    add(
        "--budget",
        type=parse_duration,
        default=DEFAULT_BUDGET_MINUTES * 60,
        help="pre-training time, e.g. 60m (default: 60m)",
    )
    add(
        "--points",
        help="minutes of pre-training to fine-tune from, besides 0 and the budget (default: "
        f"{','.join(f'{p:g}' for p in DEFAULT_POINTS)} with the general arm alone, else none; "
        "empty: none)",
    )
    add(
        "--corpus",
        nargs="+",
        help="pre-training corpus files (default: the language's corpora under --data)",
    )
    add(
        "--model-size",
        choices=list(PRESETS),
        help="encoder shape to pre-train and to train from scratch (default: the budget "
        f"recipe's: {LARGER_MODEL} from a budget of {LARGER_MODEL_MINUTES:g} min, "
        f"{BudgetRecipe.model_size} below)",
    )
    add(
        "--pretrain-learning-rate",
        type=float,
        help="peak pre-training learning rate (default: the budget recipe's, "
        f"{LARGER_MODEL_LEARNING_RATE:g} for {LARGER_MODEL}, {BudgetRecipe.learning_rate:g} for "
        f"{BudgetRecipe.model_size})",
    )
    add(
        "--tokenizer",
        help="vocab.txt or tokenizer directory to pre-train with, e.g. an earlier run's "
        "OUT/pretrain/final (default: a WordPiece vocabulary trained on the corpus, which can "
        "differ slightly from one run to the next)",
    )
    add(
        "--task-text",
        type=int,
        default=DEFAULT_TASK_TEXT_REPEATS,
        metavar="REPEATS",
        help="add the unlabeled text of the tasks' training parts (never a dev or test "
        "example) to the pre-training corpus, REPEATS times, as OUT/task_text.txt: "
        "task-adaptive pre-training (default: %(default)s, the corpus only)",
    )
    add(
        "--pretrain-objective",
        choices=PRETRAIN_OBJECTIVES,
        help=f"pre-training objective (default: the budget recipe's, {BudgetRecipe.objective}); "
        "with mlm+nsp each task-text example is a document of its own, so a pair's sentences "
        "are an instance's A and B",
    )
    add(
        "--pretrain-mlm-probability",
        type=float,
        metavar="P",
        help="share of tokens masked while pre-training (default: the budget recipe's, "
        f"{BudgetRecipe.mlm_probability:g}; {BUDGET_DOCS})",
    )


def _add_transfer_arm_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.apps.experiments.transfer_options import ARMS, DEFAULT_ARMS

    group = parser.add_argument_group("arms: the columns")
    add = group.add_argument
    add(
        "--arms",
        default=",".join(DEFAULT_ARMS),
        help="columns besides scratch, comma-separated, each a pre-training corpus at the whole "
        "budget: general (the language's general corpus), in-domain (text of the tasks' kind: "
        "--in-domain-corpus), mixed (both), continued (the general model pre-trained further on "
        "the in-domain text for --continue-minutes), word-vectors (word2vec vectors of the "
        f"in-domain text as the embeddings of a random encoder); any of {', '.join(ARMS)} "
        "(default: %(default)s, with --points)",
    )
    add(
        "--in-domain-corpus",
        nargs="+",
        help="in-domain corpus files (default for en: corpus_reviews_en/imdb_reviews.txt.gz "
        "under --data, the IMDB movie reviews)",
    )
    add(
        "--continue-minutes",
        type=float,
        help="minutes of in-domain pre-training for the continued arm (default: the budget)",
    )


def _add_transfer_finetune_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.apps.experiments.transfer_rows import FINETUNE_LEARNING_RATE
    from bertlab.training.pretraining.budget import FINETUNE_DROPOUT

    group = parser.add_argument_group("fine-tuning (the same for every column)")
    add = group.add_argument
    add(
        "--learning-rate",
        type=float,
        default=FINETUNE_LEARNING_RATE,
        help="fine-tuning learning rate (default: %(default)g)",
    )
    add(
        "--finetune-dropout",
        type=float,
        default=FINETUNE_DROPOUT,
        help="dropout of every model while fine-tuning, pre-trained and from scratch (default: "
        "%(default)g, BERT's; 0 fine-tunes without dropout)",
    )


def add_ablation_command(commands: argparse._SubParsersAction) -> None:
    ablation = commands.add_parser(
        "ablation",
        help="BERT's Tables 5-7 on a budget: MLM+NSP, MLM, left-to-right, + BiLSTM, word "
        "vectors, no pre-training; fine-tuning against features",
        description="Pre-train the same shape on the same corpus for the same minutes with "
        "MLM + NSP, MLM only and a left-to-right LM (the budget recipe otherwise), fine-tune "
        "each, the left-to-right model under a BiLSTM, a random encoder with word2vec "
        "embeddings and a random encoder on SST-2, MRPC, CoNLL-2003 and SQuAD with several "
        "seeds, and the frozen MLM + NSP encoder's layers through a BiLSTM on CoNLL-2003 (BERT "
        "Table 7). Writes OUT/table.md (the paper's layout, with its figures beside ours), "
        "OUT/ablation.png and OUT/results.json; running the same command again continues an "
        "interrupted run. See docs/word2vec-to-bert.md#the-ablations.",
    )
    add = ablation.add_argument
    add("--data", required=True, help="the data directory (layout of ../shared/data)")
    add("--out", required=True, help="experiment directory")
    add("--no-progress", action="store_true", help="hide progress bars")
    _add_ablation_pretrain_flags(ablation)
    _add_ablation_finetune_flags(ablation)
    ablation.set_defaults(handler=run_ablation_command)


def _add_ablation_pretrain_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.apps.experiments.ablation_options import DEFAULT_BUDGET_MINUTES, ROWS
    from bertlab.core.config import PRESETS

    group = parser.add_argument_group("pre-training (the budget recipe unless a flag says)")
    add = group.add_argument
    add(
        "--budget",
        type=parse_duration,
        default=DEFAULT_BUDGET_MINUTES * 60,
        help="pre-training time of each objective, e.g. 10m (default: %(default)gs)",
    )
    add(
        "--rows",
        default=",".join(ROWS),
        help="Table 5's rows to run (default: %(default)s)",
    )
    add(
        "--model-size",
        choices=list(PRESETS),
        help="the encoder's shape (default: the budget recipe's for the minutes)",
    )
    add(
        "--model-sizes",
        default="",
        help="Table 6: more shapes for the MLM + NSP row, same minutes, e.g. mini,small",
    )
    add("--corpus", nargs="+", help="pre-training files (default: the English corpora of --data)")
    add("--tokenizer", help="vocab.txt or tokenizer directory (default: trained on the corpus)")


def _add_ablation_finetune_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.apps.experiments.ablation_options import (
        DEFAULT_SEEDS,
        FEATURE_LEARNING_RATE,
        TASKS,
        UNCAPPED_TRAIN_EXAMPLES,
    )
    from bertlab.apps.experiments.transfer_rows import (
        FINETUNE_LEARNING_RATE,  # experiment transfer's rate
    )

    group = parser.add_argument_group("fine-tuning and features (the same for every row)")
    add = group.add_argument
    add(
        "--seeds",
        default=",".join(map(str, DEFAULT_SEEDS)),
        help="fine-tuning seeds (default: %(default)s)",
    )
    add(
        "--tasks",
        help=f"comma-separated subset of {', '.join(task.name for task in TASKS)} (default: all)",
    )
    add(
        "--no-feature-based",
        action="store_true",
        help="skip Table 7's feature-based block on CoNLL-2003",
    )
    add(
        "--learning-rate",
        type=float,
        default=FINETUNE_LEARNING_RATE,
        help="fine-tuning learning rate (default: %(default)g)",
    )
    add(
        "--feature-learning-rate",
        type=float,
        default=FEATURE_LEARNING_RATE,
        help="learning rate of the feature-based rows (default: %(default)g)",
    )
    add(
        "--max-examples",
        type=int,
        help="cap every task's training, dev and test parts at N examples: a quick look "
        "(default: the experiment's sizes)",
    )
    add(
        "--uncapped",
        action="store_true",
        help="fine-tune on the tasks' whole training parts (SQuAD: "
        f"{UNCAPPED_TRAIN_EXAMPLES['squad']:,} questions) instead of "
        "the default caps ("
        + ", ".join(
            f"{task.name} {task.max_train_examples:,}" for task in TASKS if task.max_train_examples
        )
        + "): about 2 h 35 min on 2 cores instead of under 2 hours",
    )


def run_ablation_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bertlab.apps.experiments.ablation import run_ablation
    from bertlab.apps.experiments.ablation_config import AblationConfig

    config = AblationConfig(
        data_dir=Path(args.data),
        out=Path(args.out),
        budget_minutes=args.budget / 60,
        seeds=_numbers(args.seeds, "--seeds", int),
        tasks=_names(args.tasks) if args.tasks else None,
        rows=_names(args.rows),
        feature_based=not args.no_feature_based,
        model_size=args.model_size,
        model_sizes=_names(args.model_sizes),
        corpus=tuple(args.corpus) if args.corpus else None,
        tokenizer=Path(args.tokenizer) if args.tokenizer else None,
        learning_rate=args.learning_rate,
        feature_learning_rate=args.feature_learning_rate,
        max_examples=args.max_examples,
        uncapped=args.uncapped,
    )
    run_ablation(config, show_progress=not args.no_progress)
    return 0


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _numbers(text: str, flag: str, kind=float) -> tuple:
    try:
        return tuple(kind(part) for part in text.split(",") if part.strip())
    except ValueError as error:
        raise CommandError(f"{flag} must be numbers separated by commas: {text}") from error


def _points(args: argparse.Namespace, arms: tuple[str, ...]) -> tuple:
    """--points, else the default points of one general run, else none (arms side by side)."""
    from bertlab.apps.experiments.transfer_options import DEFAULT_POINTS, GENERAL

    if args.points is not None:
        return _numbers(args.points, "--points")
    return DEFAULT_POINTS if arms == (GENERAL,) else ()


def run_transfer_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bertlab.apps.experiments.transfer import run_transfer
    from bertlab.apps.experiments.transfer_config import TransferConfig

    arms = tuple(arm.strip() for arm in args.arms.split(",") if arm.strip())
    config = TransferConfig(
        data_dir=Path(args.data),
        out=Path(args.out),
        lang=args.lang,
        budget_minutes=args.budget / 60,
        points=_points(args, arms),
        seeds=_numbers(args.seeds, "--seeds", int),
        tasks=tuple(t.strip() for t in args.tasks.split(",")) if args.tasks else None,
        corpus=tuple(args.corpus) if args.corpus else None,
        learning_rate=args.learning_rate,
        finetune_dropout=args.finetune_dropout,
        model_size=args.model_size,
        pretrain_learning_rate=args.pretrain_learning_rate,
        tokenizer=Path(args.tokenizer) if args.tokenizer else None,
        task_text_repeats=args.task_text,
        pretrain_objective=args.pretrain_objective,
        pretrain_mlm_probability=args.pretrain_mlm_probability,
        arms=arms,
        in_domain_corpus=tuple(args.in_domain_corpus) if args.in_domain_corpus else None,
        continue_minutes=args.continue_minutes,
    )
    run_transfer(config, show_progress=not args.no_progress)
    return 0


def add_strategies_command(commands: argparse._SubParsersAction) -> None:
    strategies = commands.add_parser(
        "strategies",
        help="fine-tuning strategies with few labels: BERT's, layer-wise decay, ULMFiT's, "
        "Keras' staged recipe, the frozen encoder",
        description="Fine-tune one pre-trained encoder per row with each strategy, the same "
        "seeds, rate, batch and epochs, on the transfer experiment's splits with 500 or 1,000 "
        "training labels, and score each run on the held-out test split. Writes OUT/table.md "
        "(median and min-max per strategy, each judged against BERT's default) and "
        "OUT/results.json; running the same command again continues an interrupted run. "
        "See docs/finetuning.md#fine-tuning-strategies.",
    )
    _add_strategies_flags(strategies)
    strategies.set_defaults(handler=run_strategies_command)


def _add_strategies_flags(strategies: argparse.ArgumentParser) -> None:
    from bertlab.apps.experiments.strategies_config import (
        BERT_DEFAULT,
        STRATEGIES,
        STRATEGY_ROWS,
        StrategiesConfig,
    )

    add = strategies.add_argument
    add("--data", required=True, help="the data directory (layout of ../shared/data)")
    add("--out", required=True, help="experiment directory")
    add("--model", required=True, help="the pre-trained model folder every row fine-tunes")
    add(
        "--row-model",
        action="append",
        default=[],
        metavar="ROW=DIR",
        help="another model for one row (repeatable), e.g. sst2-1k=runs/x/pretrain-in-domain/final",
    )
    add(
        "--seeds", default=",".join(map(str, StrategiesConfig.seeds)), help="(default: %(default)s)"
    )
    rows = ", ".join(row.name for row in STRATEGY_ROWS)
    add("--tasks", help=f"comma-separated subset of {rows} (default: all)")
    add(
        "--strategies",
        default=",".join(STRATEGIES),
        help=f"comma-separated subset of {', '.join(STRATEGIES)}; {BERT_DEFAULT} (BERT's "
        "default), which the others are judged against, is required (default: all)",
    )
    add(
        "--learning-rate",
        type=float,
        default=StrategiesConfig.learning_rate,
        help="every strategy's top fine-tuning rate (default: %(default)g)",
    )
    add("--no-progress", action="store_true", help="hide progress bars")


def run_strategies_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bertlab.apps.experiments.strategies import run_strategies
    from bertlab.apps.experiments.strategies_config import StrategiesConfig

    row_models = {}
    for item in args.row_model:
        row, separator, folder = item.partition("=")
        if not separator or not row or not folder:
            raise CommandError(f"--row-model takes ROW=DIR, got {item!r}")
        row_models[row.strip()] = Path(folder)
    config = StrategiesConfig(
        data_dir=Path(args.data),
        out=Path(args.out),
        model=Path(args.model),
        row_models=row_models,
        seeds=_numbers(args.seeds, "--seeds", int),
        tasks=_names(args.tasks) if args.tasks else None,
        strategies=_names(args.strategies),
        learning_rate=args.learning_rate,
    )
    run_strategies(config, show_progress=not args.no_progress)
    return 0


def add_compare_command(commands: argparse._SubParsersAction) -> None:
    compare = commands.add_parser(
        "compare",
        help="transfer experiments side by side, e.g. ELECTRA against masked LM",
        description="Put two or more `bertlab experiment transfer` runs over the same tasks "
        "(e.g. one with --pretrain-objective electra, one with the recipe's masked LM) in one "
        "report: a row per task and column with each run's median (min-max) over its seeds, "
        "every later run judged against the first (win or loss beyond the larger seed spread, "
        "else level, and the paired seeds won-lost), a tally per column of the tasks each "
        "later run won, drew and lost, then each run's pre-training per arm: "
        "tokens, tokens per second and its last held-out scores. Reads the runs' results.json "
        "and pre-training logs; trains nothing.",
    )
    add = compare.add_argument
    add("runs", nargs="+", metavar="RUN", help="transfer experiment directories (--out)")
    add(
        "--labels",
        help="comma-separated names of the runs, one each (default: their pre-training objectives)",
    )
    add("--out", help="also write the report to this markdown file")
    compare.set_defaults(handler=run_compare_command)


def run_compare_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bertlab.apps.experiments.transfer_compare import compare_runs
    from bertlab.core.atomic import write_text

    labels = list(_names(args.labels)) if args.labels else None
    lines = compare_runs([Path(run) for run in args.runs], labels)
    if args.out:
        write_text(Path(args.out), "\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def add_lineage_command(commands: argparse._SubParsersAction) -> None:
    lineage = commands.add_parser(
        "lineage",
        help="NNLM, word2vec, ELMo, AWD-LSTM/ULMFiT, GPT and BERT pre-trained on one corpus for "
        "the same minutes, compared on the same tasks and sense probes",
        description="Pre-train every arm on the same corpus with the same WordPiece vocabulary "
        "for the same minutes (NNLM, ELMo and AWD-LSTM with `bertlab pretrain --architecture`, "
        "GPT as a left-to-right BERT, BERT with the budget recipe, word2vec for the same "
        "seconds; scratch is a random BERT), then fine-tune each on the tasks in its paper's "
        "way and through one shared linear probe (NER: a BiLSTM over the scalar mix of its "
        "layers, BERT also fine-tuned whole), with several seeds, and probe whether its layers "
        "separate a word's senses. Writes OUT/report.md (one row per arm, the papers' figures "
        "in brackets), OUT/lineage.png and OUT/results.json; running the same command again "
        "continues an interrupted run. See "
        "docs/word2vec-to-bert.md#from-nnlm-to-bert-on-your-data.",
    )
    _add_lineage_flags(lineage)
    lineage.set_defaults(handler=run_lineage_command)


def _add_lineage_flags(parser: argparse.ArgumentParser) -> None:
    from bertlab.apps.experiments.lineage_options import (
        ARMS,
        DEFAULT_BUDGET_MINUTES,
        DEFAULT_LANG,
        DEFAULT_PROBES,
        DEFAULT_SEEDS,
        PROBES,
        TASKS,
    )

    add = parser.add_argument
    add("--data", required=True, help="the data directory (layout of ../shared/data)")
    add("--out", required=True, help="experiment directory")
    add("--lang", default=DEFAULT_LANG, choices=list(TASKS), help="en or zh (default: en)")
    tasks = "; ".join(f"{lang}: {', '.join(t.name for t in rows)}" for lang, rows in TASKS.items())
    add("--tasks", help=f"comma-separated subset ({tasks}; default: all)")
    add(
        "--seeds",
        default=",".join(map(str, DEFAULT_SEEDS)),
        help="fine-tuning seeds of every cell, and the random arm's weights (default: %(default)s)",
    )
    add(
        "--budget",
        type=parse_duration,
        default=DEFAULT_BUDGET_MINUTES * 60,
        help="training time of every arm that pre-trains (six of the seven; on a CPU as many "
        "pre-train at once as torch has threads, one thread each: on 2 cores about three "
        "budgets pass before any fine-tuning), e.g. 1m for a quick look (default: "
        f"{DEFAULT_BUDGET_MINUTES:g}m)",
    )
    add("--corpus", nargs="+", help="pre-training files (default: the language's under --data)")
    add("--tokenizer", help="vocab.txt or tokenizer directory (default: trained on the corpus)")
    add(
        "--arms",
        default=",".join(arm.name for arm in ARMS),
        help="comma-separated arms, each a row (default: %(default)s)",
    )
    probes = ", ".join(f"{word} ({probe.lang})" for word, probe in PROBES.items())
    defaults = "; ".join(
        f"{lang}: {','.join(words) or 'none'}" for lang, words in DEFAULT_PROBES.items()
    )
    add(
        "--probes",
        help=f"comma-separated probe words of {probes}; empty: none (default: {defaults})",
    )
    add(
        "--max-examples",
        type=int,
        help="cap every task's training, dev and test parts at N examples: a quick look",
    )
    add("--no-progress", action="store_true", help="hide progress bars")


def run_lineage_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bertlab.apps.experiments.lineage import run_lineage
    from bertlab.apps.experiments.lineage_config import LineageConfig

    config = LineageConfig(
        data_dir=Path(args.data),
        out=Path(args.out),
        lang=args.lang,
        budget_minutes=args.budget / 60,
        seeds=_numbers(args.seeds, "--seeds", int),
        tasks=_names(args.tasks) if args.tasks else None,
        arms=_names(args.arms),
        probes=None if args.probes is None else _names(args.probes),
        corpus=tuple(args.corpus) if args.corpus else None,
        tokenizer=Path(args.tokenizer) if args.tokenizer else None,
        max_examples=args.max_examples,
    )
    run_lineage(config, show_progress=not args.no_progress)
    return 0
