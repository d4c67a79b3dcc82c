"""Pre-training as one library call: `run_pretraining(PretrainRun(...))`.

    result = run_pretraining(PretrainRun(corpus=("reviews.txt",), out="runs/x", budget=3600))
    result.final_dir  # runs/x/final: a BERT in the Hugging Face layout, with its tokenizer

The run (`bertlab.training.pretraining.run.PretrainRun`) goes through, in order: OUT and the
corpus checked, the tokenizer (given or trained on the corpus), the tokenized corpus and its
pre-flight report (`bertlab.corpus.prepare.prepare_corpus`), the budget's plan for this machine,
the model, the loop (`bertlab.training.pretraining.loop`), and the model card of OUT/final
(`bertlab.training.pretraining.card`). Its report goes to one `RunOutput`: the log, or the
caller's `say`. Settings that cannot run (a resume from other settings,
sequences longer than the model's positions, a batch beyond this machine's memory) are refused
before the corpus is read where they can be.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bertlab.core.atomic import (
    WriteError,
    atomic_directory,
    remove_temporaries,
    run_lock,
)
from bertlab.core.config import PretrainConfig
from bertlab.core.model_card import write_model_card
from bertlab.core.outputs import check_outputs
from bertlab.core.run_folder import (
    CHECKPOINTS_DIR,
    CORPUS_CACHE_DIR,
    FINAL_DIR,
    FINETUNE_OUTPUTS,
    LOCK_FILE,
    PLAN_FILE,
    TOKENIZER_DIR,
)
from bertlab.core.runtime import (
    SINGLE_PROCESS,
    DistributedContext,
    barrier,
    choose_precision,
    from_main,
    gathered,
    set_seed,
)
from bertlab.core.wording import Worded
from bertlab.corpus.encode import sniff_lang
from bertlab.corpus.format import TokenizedCorpus
from bertlab.corpus.prepare import prepare_corpus
from bertlab.corpus.sources import open_corpus
from bertlab.data.pretraining import SpecialIds
from bertlab.data.stream import training_stream
from bertlab.tokenizer.training import TokenizerTrainingConfig, train_tokenizer
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.pretraining import checkpointing
from bertlab.training.pretraining.budget import BudgetRecipe
from bertlab.training.pretraining.budget_plan import (
    BudgetPlan,
    load_plan,
    plan_budget,
    read_plan,
    save_plan,
)
from bertlab.training.pretraining.card import pretraining_card
from bertlab.training.pretraining.loop import PretrainResult, pretrain
from bertlab.training.pretraining.run import PretrainRun, ResolvedRun
from bertlab.training.pretraining.stats import near_chance_warning, plateau_warning, unigram_plateau

logger = logging.getLogger(__name__)


def _quiet(line: str) -> None:
    """Says nothing: the report of the processes other than the main one."""


@dataclass(frozen=True)
class RunOutput:
    """Where a run's report goes.

    Attributes:
        say: a line of the report.
        warn: a warning among the lines (the corpus's): said as "warning: ...", or logged as a
            warning where the lines are the log.
        alert: a warning the log always gets, in every process, and said as well where the
            lines go elsewhere.
    """

    say: Callable[[str], None]
    warn: Callable[[str], None]
    alert: Callable[[str], None]

    @classmethod
    def to(cls, say: Callable[[str], None]) -> RunOutput:
        """The report and its warnings said by `say` (`print`, a list's `append`, ...)."""

        def alert(warning: str) -> None:
            logger.warning(warning)
            say(warning)

        return cls(say, lambda warning: say(f"warning: {warning}"), alert)


LOGGED = RunOutput(logger.info, logger.warning, logger.warning)  # `run_pretraining`'s default
QUIET = RunOutput(_quiet, _quiet, logger.warning)  # the processes other than the main one


def run_pretraining(
    run: PretrainRun,
    context: DistributedContext = SINGLE_PROCESS,
    show_progress: bool = True,
    say: Callable[[str], None] | None = None,
) -> PretrainResult:
    """Pre-train as `run` says: tokenizer, tokenized corpus, pre-flight check, model, loop.

    Args:
        run: the run.
        context: this process's place in a torchrun job (one process by default).
        show_progress: progress bars (the main process only).
        say: where the run's report lines go (the main process only); None: the log, with
            the warnings logged as warnings.

    Returns:
        The loop's `PretrainResult`: counters, `final_dir` and the last held-out evaluation.

    Raises:
        ValueError: `out` already holds a run (and `resume` is not set), a corpus that cannot
            be trained on, a tokenizer that does not fit the model, a batch too large for this
            machine's memory.
        FileNotFoundError: a missing corpus, tokenizer or model file.
        WriteError: a file could not be written (a full disk); its hint says how to go on.
        KeyboardInterrupt: interrupted; its `hint` names the checkpoint kept and how to go on.
    """
    out = Path(run.out)
    if out.exists() and not out.is_dir():
        raise ValueError(Worded("{out} {path} exists and is not a directory", path=out))
    open_corpus(run.corpus, run.resolved.reading)  # bad files named before anything is written
    config = run.model_config if isinstance(run.model_config, str | os.PathLike) else None
    reads = {"corpus": run.corpus, "tokenizer": run.tokenizer, "init_from": run.init_from}
    # nothing it reads is written over, and nothing is kept in the cache, which is rebuilt whole
    check_outputs(reads | {"model_config": config}, {"out": out}, {"corpus_cache": _cache(run)})
    # One writer per OUT (torchrun's processes are one job: its main process holds it).
    with run_lock(out) if context.is_main else contextlib.nullcontext():
        if context.is_main:
            _check_out(out, run.resume)
        try:
            output = (LOGGED if say is None else RunOutput.to(say)) if context.is_main else QUIET
            return _run(run.resolved, out, context, show_progress and context.is_main, output)
        except WriteError as error:
            error.hint = _how_to_go_on(out, error)
            raise
        except KeyboardInterrupt as interrupt:  # Ctrl-C (and SIGTERM, which the CLI turns into it)
            interrupt.hint = _how_to_go_on(out)
            raise


def _how_to_go_on(out: Path, error: WriteError | None = None) -> Worded:
    """What to do after a failed write (or an interruption, without `error`): everything
    complete in `out` is kept."""
    latest = checkpointing.latest_checkpoint(out)
    if error is None:
        if latest is None:
            return Worded("no checkpoint was complete: {again} to start over")
        return Worded("{kept} is kept: {again_with_resume} to go on", kept=latest.name)
    fix = "make room" if error.errno in (errno.ENOSPC, errno.EDQUOT) else "fix that"
    if latest is None:
        return Worded("no checkpoint was complete: {fix}, then {again}", fix=fix)
    return Worded("{kept} is kept: {fix}, then {again_with_resume}", kept=latest.name, fix=fix)


def _run(
    run: ResolvedRun,
    out: Path,
    context: DistributedContext,
    show_progress: bool,
    output: RunOutput,
) -> PretrainResult:
    """The run in this process: its report goes to `output` (QUIET but in the main process)."""
    choices = run.choices
    _check_shared_out(out, context)
    _check_fits(run)  # before a vocabulary is trained on the corpus
    tokenizer = _tokenizer(run, out, context, show_progress, output.say)
    model_config = _model_config(run, tokenizer)  # a tokenizer that does not fit, refused here
    if choices.resume:  # a resume with other settings is refused before its corpus cache is built
        _check_resumable(run, model_config, out, tokenizer, context)
    corpus, report = prepare_corpus(
        choices.corpus,
        tokenizer,
        _cache(choices),
        run.data,
        run.loop.eval_examples,
        lang=choices.lang,
        reading=run.reading,
        context=context,
        show_progress=show_progress,
        say=output.say,
        warn=output.warn,
    )
    if choices.budget is not None:
        plan = _plan(run, model_config, out, corpus, tokenizer, context)
        run, model_config = _with_plan(run, model_config, plan, tokenizer)
        output.say(f"budget recipe for {choices.budget / 60:g} min: {run.description}")
        for line in run.plan.lines():
            output.say(f"  {line}")
    data_config, loop_config = run.data, run.loop
    network = run.network
    network.check_memory(model_config, loop_config.micro_batch_size, data_config.max_seq_length)
    set_seed(loop_config.seed)
    model = network.build(run.objective, model_config, run.settings, run.source, tokenizer)
    num_parameters = sum(p.numel() for p in model.parameters())
    output.say(
        f"model: {num_parameters / 1e6:.1f}M parameters, {network.model_line(model_config)}; "
        "global batch "
        f"{loop_config.batch_size * context.world_size} x {data_config.max_seq_length} tokens; "
        f"{context.world_size} process(es); "
        f"{choose_precision(loop_config.precision, context.device())}"
    )
    result = pretrain(
        model,
        tokenizer,
        corpus,
        data_config,
        loop_config,
        out,
        context,
        choices.resume,
        show_progress,
        run.objective,
    )
    _report_result(result, loop_config, output)
    dropout = run.final_dropout
    if dropout is not None and context.is_main and result.final_dir is not None:
        preset = run.shape if choices.finetune_dropout is None else None
        written = network.restore_dropout(result.final_dir, dropout, preset)
        if written is not None:
            output.say(f"{result.final_dir}/config.json has {written} for fine-tuning")
    if context.is_main and result.final_dir is not None:
        card = pretraining_card(
            run, corpus.meta, report, model_config, num_parameters, result, context.world_size
        )
        write_model_card(result.final_dir, card)
    return dataclasses.replace(result, recipe=run.description)


def _report_result(result: PretrainResult, loop_config: PretrainConfig, output: RunOutput) -> None:
    """What the run trained, its last held-out evaluation and the warnings they call for."""
    progress = result.progress
    output.say(
        f"trained {progress.step:,} steps, {progress.tokens:,} tokens in "
        f"{progress.elapsed / 60:.1f} min"
    )
    plateau = unigram_plateau(
        result.last_eval or {}, progress.tokens, loop_config.plateau_min_tokens
    )
    if result.last_eval:
        line = "held-out: " + ", ".join(f"{k} {v:.4f}" for k, v in result.last_eval.items())
        if plateau is not None:
            line += (
                f" — still on the unigram plateau (accuracy {plateau[0]:.1%} vs unigram "
                f"{plateau[1]:.1%})"
            )
        output.say(line)
    warning = near_chance_warning(result.last_eval)
    if warning is not None:
        output.say(warning)
    warning = plateau_warning(result.last_eval, progress.tokens, loop_config.plateau_min_tokens)
    if warning is not None:
        output.alert(warning)


def _plan(
    run: ResolvedRun,
    model_config: Any,
    out: Path,
    corpus: TokenizedCorpus,
    tokenizer: Tokenizer,
    context: DistributedContext,
) -> BudgetPlan:
    """The budget's plan for this machine: OUT's (a resumed run keeps its choices), else made
    here (by every process, each measuring its own device) and saved to OUT/budget_plan.json.
    The main process's plan is every process's: none reads the others' files to decide."""
    saved = _saved_plan(run, model_config, out, context) if context.is_main else None
    saved = from_main(None if saved is None else saved.to_json(), context)
    if saved is not None:
        return BudgetPlan.from_json(saved)
    special = SpecialIds.from_vocab(tokenizer.get_vocab())
    spec = training_stream(corpus, special, tokenizer.vocab_size, run.data, run.loop)
    size = _planned_size(run, model_config)
    budget, precision = run.choices.budget, run.loop.precision
    device = context.device() if run.network.measures_plan else torch.device("cpu")
    plan = plan_budget(budget, device, size, spec, precision, context)
    plan = BudgetPlan.from_json(from_main(plan.to_json(), context))
    if context.is_main:
        save_plan(out, plan)
    return plan


def _saved_plan(
    run: ResolvedRun, model_config: Any, out: Path, context: DistributedContext
) -> BudgetPlan | None:
    """OUT/budget_plan.json's plan for this run on this machine, if there is one."""
    device = context.device()
    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    size = _planned_size(run, model_config)
    return load_plan(out, run.choices.budget, size, device_name, context.world_size)


def _planned_size(run: ResolvedRun, model_config: Any) -> str | None:
    """The size a budget plans (`Network.planned_size`)."""
    return run.network.planned_size(run.choices.model_size, run.source, model_config)


def _with_plan(
    run: ResolvedRun, model_config: Any, plan: BudgetPlan, tokenizer: Tokenizer
) -> tuple[ResolvedRun, Any]:
    """The run with `plan`, and its model's config: built again only where the plan brings
    another recipe (on an accelerator)."""
    planned = run.planned(plan)
    if planned.recipe == run.recipe:
        return planned, model_config
    return planned, _model_config(planned, tokenizer)


def _check_resumable(
    run: ResolvedRun,
    model_config: Any,
    out: Path,
    tokenizer: Tokenizer,
    context: DistributedContext,
) -> None:
    """Refuse a resume with other settings (`checkpointing.check_resumable`) from what is known
    before the corpus is read. A budget run without a saved plan is left to the loop's own
    check."""
    if run.choices.budget is not None:
        plan = _saved_plan(run, model_config, out, context)
        if plan is None:
            _check_same_budget(run, model_config, out)
            return
        run, model_config = _with_plan(run, model_config, plan, tokenizer)
    model_key = run.objective.model_key(model_config)
    setup = checkpointing.setup_key(run.data, run.loop, context, model_key)
    checkpointing.check_resumable(out, setup)


def _check_shared_out(out: Path, context: DistributedContext) -> None:
    """Refuse a torchrun job whose processes do not all see OUT as the main process writes it:
    they read its vocabulary, checkpoints and plan, so on several machines OUT must be on a file
    system they share. Every process raises alike (none is left waiting for the others)."""
    if not context.is_distributed:
        return
    holder = from_main(f"{os.getpid()}\n", context)  # what the main process's lock file holds
    lock = out / LOCK_FILE
    sees = lock.is_file() and lock.read_text(encoding="utf-8") == holder
    blind = [rank for rank, seen in enumerate(gathered(sees, context)) if not seen]
    if blind:
        raise ValueError(
            Worded(
                "process {ranks} of this torchrun job cannot see {out} {path} as the main "
                "process writes it; on several machines {out} must be a folder on a file system "
                "that they all share (e.g. NFS), at the same path",
                ranks=", ".join(map(str, blind)),
                path=out,
            )
        )


def _check_same_budget(run: ResolvedRun, model_config: Any, out: Path) -> None:
    """Refuse a resume with another budget or model size than OUT's plan, before the corpus is
    read and the plan made again (and saved over OUT's)."""
    saved = read_plan(out)
    if saved is None:
        return
    for key, was, now in (
        ("budget", f"{saved.budget:g} s", f"{run.choices.budget:g} s"),
        ("model size", repr(saved.model_size), repr(_planned_size(run, model_config))),
    ):
        if was != now:
            raise ValueError(
                Worded(
                    "cannot resume from {where}: its plan ({plan}) is for {key} {was}, now "
                    "{now}; use the same settings or a new {out}",
                    where=out,
                    plan=PLAN_FILE,
                    key=key,
                    was=was,
                    now=now,
                )
            )


def _cache(run: PretrainRun) -> Path:
    """The tokenized corpus's folder: `corpus_cache`, else OUT/corpus."""
    return (
        Path(run.corpus_cache) if run.corpus_cache is not None else Path(run.out) / CORPUS_CACHE_DIR
    )


def _check_out(out: Path, resume: bool) -> None:
    """Refuse to start over a run that can be resumed or is finished, or in a fine-tuning run's
    directory; clear what killed writers left (temporary files and checkpoints): a run killed
    before its first checkpoint was complete holds nothing to resume, and runs again from the
    start."""
    for directory in (out, out / CHECKPOINTS_DIR):
        remove_temporaries(directory)
    has_checkpoint = checkpointing.latest_checkpoint(out) is not None
    if not resume and (has_checkpoint or (out / FINAL_DIR).exists()):
        raise ValueError(
            Worded(
                "{out} {path} already holds a run; add {resume} or choose another {out}", path=out
            )
        )
    finetuned = [name for name in FINETUNE_OUTPUTS if (out / name).exists()]
    if finetuned:
        raise ValueError(
            Worded(
                "{out} {path} holds a fine-tuning run ({name}); choose another {out}",
                path=out,
                name=finetuned[0],
            )
        )


def _tokenizer(
    run: ResolvedRun,
    out: Path,
    context: DistributedContext,
    show_progress: bool,
    say: Callable[[str], None],
) -> Tokenizer:
    """The run's tokenizer: given, the `init_from` model's, or trained on the corpus into
    OUT/tokenizer (once: a resumed run finds it there)."""
    choices = run.choices
    path = choices.tokenizer if choices.tokenizer is not None else choices.init_from
    if path is not None:
        return Tokenizer.from_pretrained(path)
    directory = out / TOKENIZER_DIR
    if context.is_main and not (directory / "vocab.txt").is_file():
        size = run.vocabulary_size
        lang = sniff_lang(open_corpus(choices.corpus, run.reading)[0], choices.lang)
        recipe = run.recipe or BudgetRecipe()
        config = TokenizerTrainingConfig(
            vocab_size=size, min_ideograph_frequency=recipe.ideograph_frequency(lang)
        )
        say(f"training a vocabulary of {size:,} pieces on the corpus ({lang})")
        tokenizer, report = train_tokenizer(
            choices.corpus, config, show_progress=show_progress, reading=run.reading
        )
        for line in report.summary():
            say(f"  {line}")
        with atomic_directory(directory) as temporary:
            tokenizer.save_pretrained(temporary)
    barrier(context)
    return Tokenizer.from_pretrained(directory)


def _model_config(run: ResolvedRun, tokenizer: Tokenizer) -> Any:
    """The network's architecture for the run (`Network.config`): the `init_from` model's,
    `model_config`, or the preset's at the tokenizer's vocabulary, with the pre-training
    dropout."""
    return run.network.config(run.source, tokenizer, run.data, run.objective, run.settings)


def _check_fits(run: ResolvedRun) -> None:
    """Refuse, before the tokenizer and the corpus, what cannot fit (`Network.check_fits`):
    sequences longer than the model's positions and a batch beyond this machine's memory (a
    budget's batch is planned on the corpus, later)."""
    batch = None if run.choices.budget is not None else run.loop.micro_batch_size
    run.network.check_fits(run.source, run.vocabulary_size, run.data, batch)
