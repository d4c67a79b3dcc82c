"""Flags in, configs out, for `bertlab finetune|evaluate|predict|score`.

Each training flag's destination is the `FinetuneConfig` field of its name and each input flag's
the `TaskDataConfig` field (`--epochs` is `num_train_epochs`, `--freeze-encoder`
`do_freeze_encoder`): `finetune_config` and `data_flags` copy them generically,
`FINETUNE_FIELDS_WITHOUT_FLAG` names the exceptions. `bertlab.cli.tasks` declares the flags and
runs the commands.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from bertlab.cli.common import CommandError
from bertlab.data.tasks.registry import DEFAULT_EPOCHS, GENERIC_CLASSIFICATION, get_task

logger = logging.getLogger(__name__)

# FinetuneConfig fields that no `finetune` flag sets: they keep the config's default.
FINETUNE_FIELDS_WITHOUT_FLAG = ("log_every_steps",)
# The TaskDataConfig field that no input flag names: --max-seq-length sets it for SQuAD-style tasks.
SQUAD_MAX_SEQ_LENGTH = "squad_max_seq_length"


def column_spec(args: argparse.Namespace, saved: dict[str, Any] | None):
    """The ColumnSpec from the column flags; flags not given come from the model's task file."""
    from bertlab.data.tasks.classification import ColumnSpec

    stored = (saved or {}).get("columns") or {}
    names = {"text_a": "text_column", "text_b": "text_pair_column", "label": "label_column"}
    names["example_id"] = "id_column"
    values: dict[str, Any] = {"text_a": "text", "label": "label"} | stored
    for field, flag in names.items():
        if getattr(args, flag) is not None:
            values[field] = getattr(args, flag)
    if args.no_header:
        values["has_header"] = False
    if args.regression:
        values["is_regression"] = True
    if not values.get("has_header", True):
        try:
            values = {k: int(v) if k in names and v is not None else v for k, v in values.items()}
        except ValueError:
            raise CommandError("with --no-header, columns are 0-based positions") from None
    return ColumnSpec(**values)


def data_flags(args: argparse.Namespace, is_qa: bool) -> dict[str, int]:
    """The input settings given as flags, by TaskDataConfig field (each flag's destination is the
    field of its name; for SQuAD-style tasks --max-seq-length sets `squad_max_seq_length`)."""
    import dataclasses

    from bertlab.core.finetune_config import TaskDataConfig

    values = {}
    for field in dataclasses.fields(TaskDataConfig):
        value = None if field.name == SQUAD_MAX_SEQ_LENGTH else getattr(args, field.name)
        if value is not None:
            is_squad_length = field.name == "max_seq_length" and is_qa
            values[SQUAD_MAX_SEQ_LENGTH if is_squad_length else field.name] = value
    return values


def task_of(args: argparse.Namespace, saved: dict[str, Any] | None = None):
    """The task: the model's saved input settings (else the task's own), the flags over them."""
    import dataclasses

    from bertlab.core.finetune_config import TaskDataConfig
    from bertlab.task_families import make_task

    if saved is not None and saved.get("task") not in (None, args.task):
        logger.warning("the model was fine-tuned on task %r, not %r", saved["task"], args.task)
    is_generic = args.task == GENERIC_CLASSIFICATION
    is_qa = not is_generic and get_task(args.task).family == "qa"
    columns = column_spec(args, saved) if is_generic else None
    stored = (saved or {}).get("data")
    task = make_task(args.task, columns, TaskDataConfig(**stored) if stored else None)
    data = dataclasses.replace(task.data, **data_flags(args, is_qa))
    return dataclasses.replace(task, data=data)


def source_values(source) -> dict[str, Any]:
    """The config.json values of the model `source` (a `ModelSource`) starts from: its folder's,
    or the preset's of a from-scratch BERT."""
    from bertlab.core.config import BertConfig, read_json_object
    from bertlab.core.hub import resolve

    if source.directory is None:
        return BertConfig.from_preset(source.model_size).to_dict()
    return read_json_object(resolve(source.directory) / "config.json")


def architecture_of(source):
    """The entry (`network.architectures`) of the model `source` starts from; a from-scratch
    model is a BERT.

    Raises:
        CommandError: config.json names an architecture bertlab does not know.
    """
    from bertlab.network.architectures import architecture_of as entry_of

    try:
        return entry_of(source_values(source))
    except ValueError as error:
        raise CommandError(f"--model {source.directory}: {error}") from None


def with_features(args: argparse.Namespace, task, source=None):
    """The task with the head's reading: the feature-based head --features and --bilstm ask
    for, else the architecture's own (ELMo's: its frozen biLM's scalar mix and a BiLSTM).

    Raises:
        CommandError: the architecture has no head for the task or for these flags, or a flag
            that would change nothing under a frozen encoder.
    """
    import dataclasses

    from bertlab.network.feature_head_config import FeatureHeadConfig

    features = None
    if args.features is not None or args.bilstm:
        features = FeatureHeadConfig(
            layers=args.features or "last",
            use_bilstm=args.bilstm,
            do_freeze_encoder=args.features is not None,
        )
    architecture = None
    if source is not None:
        architecture = architecture_of(source)
        try:
            architecture.check_finetune(task.spec.family, features)
        except ValueError as error:
            raise CommandError(str(error)) from None
        if features is None:
            features = architecture.finetune_defaults(source_values(source)).features
    if features is not None and features.do_freeze_encoder:
        clashing = [
            flag
            for flag, is_set in (
                ("--freeze-encoder", args.do_freeze_encoder),
                ("--freeze-layers", bool(args.freeze_layers)),
                ("--layerwise-lr-decay", args.layerwise_lr_decay not in (None, 1.0)),
                ("--gradual-unfreezing", bool(args.do_gradual_unfreezing)),
                ("--head-warmup-epochs", bool(args.head_warmup_epochs)),
            )
            if is_set
        ]
        if clashing:
            frozen = "--features"
            if args.features is None:
                frozen = f"the default for {architecture.title} (its paper's way)"
            raise CommandError(
                f"{frozen} freezes the whole encoder: {', '.join(clashing)} would change nothing"
            )
    return task if features is None else dataclasses.replace(task, features=features)


# FinetuneConfig fields whose flags default to None: an architecture's own way chooses them
# when they are not given (`network.architectures`, `FinetuneDefaults`).
ARCHITECTURE_FIELDS = (
    "learning_rate",
    "num_train_epochs",
    "batch_size",
    "layerwise_lr_decay",
    "schedule",
    "do_gradual_unfreezing",
)


def finetune_config(args: argparse.Namespace, source=None):
    """The `FinetuneConfig` of the flags (each flag's destination is the field of its name).
    Fields whose flags are not given (`ARCHITECTURE_FIELDS`) are chosen by the architecture of
    the model `source` names: BERT's rate and epochs by its width (`FINETUNE_DEFAULTS_BY_WIDTH`),
    ULMFiT's strategy for an AWD-LSTM, ... (`network.architectures`); without a source,
    BERT-base's. The choice is logged."""
    import dataclasses

    from bertlab.core.finetune_config import BERT_BASE_DEFAULTS, FinetuneConfig

    names = [f.name for f in dataclasses.fields(FinetuneConfig)]
    flagged = [name for name in names if name not in FINETUNE_FIELDS_WITHOUT_FLAG]
    values = {name: getattr(args, name) for name in flagged}
    chosen = [name for name in ARCHITECTURE_FIELDS if values[name] is None]
    settings: dict[str, Any] = {"learning_rate": BERT_BASE_DEFAULTS.learning_rate}
    why = None
    if source is not None:
        defaults = architecture_of(source).finetune_defaults(source_values(source))
        settings, why = defaults.settings, defaults.why
    declared = declared_epochs(args.task) if values["num_train_epochs"] is None else None
    if declared is not None:  # the task's own epochs win over the model's defaults
        settings = settings | {"num_train_epochs": declared}
    for name in chosen:
        if settings.get(name) is not None:
            values[name] = settings[name]
        elif name == "num_train_epochs":
            values[name] = DEFAULT_EPOCHS
    values = {name: value for name, value in values.items() if value is not None}
    config = FinetuneConfig(**values)
    by_default = [name for name in chosen if name in settings]
    if why is not None and by_default:
        own = f"; the task {args.task} declares its {declared} epochs" if declared else ""
        flags = ", ".join("--" + flag_name(name) for name in by_default)
        logger.info(
            f"learning rate {config.learning_rate:g}, {config.num_train_epochs} epochs: {why}"
            f"{own} ({flags} set them)"
        )
    return config


def flag_name(field: str) -> str:
    """The `finetune` flag of a FinetuneConfig field (`num_train_epochs` is --epochs)."""
    special = {"num_train_epochs": "epochs", "do_gradual_unfreezing": "gradual-unfreezing"}
    return special.get(field, field).replace("_", "-")


def declared_epochs(task: str) -> int | None:
    """The epochs the task's declaration sets (None: it leaves them to the model's width)."""
    return None if task == GENERIC_CLASSIFICATION else get_task(task).epochs


def model_source(args: argparse.Namespace):
    from bertlab.core.hub import resolve
    from bertlab.training.finetuning.finetune import ModelSource

    if args.from_scratch == (args.model is not None):
        raise CommandError("give --model DIR, or --from-scratch --model-size SIZE --tokenizer PATH")
    if args.from_scratch and (args.model_size is None or args.tokenizer is None):
        raise CommandError("--from-scratch needs --model-size and --tokenizer")
    tokenizer = None if args.tokenizer is None else Path(args.tokenizer)
    if args.from_scratch:
        return ModelSource(model_size=args.model_size, tokenizer=tokenizer)
    resolve(args.model)  # download (or find in the cache) before any data is read
    return ModelSource(directory=Path(args.model), tokenizer=tokenizer)


def seeds(args: argparse.Namespace) -> list[int] | None:
    if args.seeds is None:
        return None
    try:
        seeds = [int(seed) for seed in args.seeds.split(",") if seed.strip()]
    except ValueError:
        raise CommandError(
            f"--seeds must be comma-separated integers, got {args.seeds!r}"
        ) from None
    if not seeds or len(set(seeds)) != len(seeds):
        raise CommandError(f"--seeds must list distinct integers, got {args.seeds!r}")
    return seeds
