"""The table of pre-training objectives (`training.pretraining.objectives.OBJECTIVES` and its
data half, `bertlab.core.config.OBJECTIVE_DATA`): what each entry says, that it says the truth
about the data, the model and the statistics, and that a new objective is one entry the run
follows."""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from bertlab.apps.experiments.ablation_config import OBJECTIVES as ABLATION_OBJECTIVES
from bertlab.apps.experiments.transfer_options import PRETRAIN_OBJECTIVES
from bertlab.cli import build_parser
from bertlab.core.config import (
    OBJECTIVE_DATA,
    BertConfig,
    ElectraConfig,
    ObjectiveData,
    PretrainDataConfig,
)
from bertlab.core.run_folder import FINAL_DIR
from bertlab.data.collate import collate_pretraining
from bertlab.data.masking import example_rng, make_example
from bertlab.data.pretraining import SpecialIds, create_instances_from_document
from bertlab.network.bert import IGNORE_INDEX, BertForPreTraining
from bertlab.network.electra import ElectraForPreTraining
from bertlab.training.pretraining.objectives import (
    OBJECTIVES,
    Objective,
    Saves,
    StepShare,
    language_model_uses,
    objective_of,
)
from bertlab.training.pretraining.run import PretrainRun
from bertlab.training.pretraining.runner import run_pretraining
from bertlab.training.pretraining.stats import summarize

pytestmark = pytest.mark.usefixtures("one_thread")

SPECIAL = SpecialIds(pad=0, unk=1, cls=2, sep=3, mask=4)
MLM = ("mlm_loss", "mlm_accuracy")
NSP = ("nsp_loss", "nsp_accuracy")
# name: (sentence pairs, left-to-right, model class, folders saved, statistics logged, card's tag)
EXPECTED = {
    "mlm+nsp": (True, False, BertForPreTraining, (FINAL_DIR,), (*MLM, *NSP), "fill-mask"),
    "mlm": (False, False, BertForPreTraining, (FINAL_DIR,), MLM, "fill-mask"),
    "clm": (
        False,
        True,
        BertForPreTraining,
        (FINAL_DIR,),
        ("lm_loss", "lm_accuracy", "lm_perplexity"),
        "text-generation",
    ),
    "electra": (
        False,
        False,
        ElectraForPreTraining,
        (FINAL_DIR, "generator", "discriminator"),
        (*MLM, "rtd_loss", "rtd_accuracy"),
        "feature-extraction",
    ),
}


def _objective_choices() -> tuple[str, ...]:
    subparsers = next(
        action
        for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    pretrain = subparsers.choices["pretrain"]
    return tuple(next(a for a in pretrain._actions if a.dest == "objective").choices)


def test_every_objective_the_command_offers_has_one_entry_and_its_data() -> None:
    assert _objective_choices() == tuple(OBJECTIVES) == tuple(OBJECTIVE_DATA)
    for name, objective in OBJECTIVES.items():
        assert objective.name == name
        assert objective.data is OBJECTIVE_DATA[name]
        assert objective_of(PretrainDataConfig(objective=name)) is objective
    # The experiments choose among the same objectives.
    assert set(PRETRAIN_OBJECTIVES) <= set(OBJECTIVES)
    assert set(ABLATION_OBJECTIVES.values()) <= set(OBJECTIVES)
    run_fields = {field.name for field in dataclasses.fields(PretrainRun)}
    for objective in OBJECTIVES.values():
        assert set(objective.setting_names()) <= run_fields  # one PretrainRun field each


def test_a_language_models_uses_follow_its_architecture_not_a_name() -> None:
    """What the server offers for a model with a language-model head: a causal model's uses are
    the left-to-right objective's, a masked model's those of the masked objectives."""
    causal = BertConfig.from_preset("tiny", vocab_size=64, is_causal=True)
    masked = BertConfig.from_preset("tiny", vocab_size=64)
    assert language_model_uses(causal) is OBJECTIVES["clm"].uses
    assert language_model_uses(masked) is OBJECTIVES["mlm"].uses is OBJECTIVES["mlm+nsp"].uses
    assert "generate" in language_model_uses(causal).head_uses
    assert "fill-mask" not in language_model_uses(causal).head_uses


@pytest.mark.parametrize("name", list(EXPECTED))
def test_each_objectives_entry_says_what_it_builds_trains_logs_and_saves(name) -> None:
    is_pair, is_causal, model_class, saved, statistics, pipeline_tag = EXPECTED[name]
    objective = OBJECTIVES[name]
    assert (objective.data.is_pair, objective.data.is_causal) == (is_pair, is_causal)
    if is_pair:  # the NSP head and the pooler learn from sentence pairs only
        assert objective.untrained_modules == ()
    else:
        assert "bert.pooler" in objective.untrained_modules
    assert objective.model_class is model_class
    assert tuple(folder for folder, _ in objective.saves) == saved
    assert objective.statistics == statistics
    assert objective.uses.pipeline_tag == pipeline_tag
    assert objective.model_config(BertConfig.tiny()).is_causal == is_causal


def _documents(rng: random.Random) -> list[list[list[int]]]:
    """Four documents of 3-5 sentences of 3-8 ids each, ids of words (5-98)."""
    return [
        [[rng.randint(5, 98) for _ in range(rng.randint(3, 8))] for _ in range(rng.randint(3, 5))]
        for _ in range(4)
    ]


def _batch(config: PretrainDataConfig) -> dict[str, torch.Tensor]:
    """A batch as the training stream builds it for `config`'s objective."""
    documents = _documents(random.Random(0))
    instances = []
    for index in range(len(documents)):
        rng = random.Random(index)
        instances += create_instances_from_document(
            documents, index, config.max_seq_length, 0.0, rng, config.objective
        )
    examples = [
        make_example(instance, config, SPECIAL, 99, example_rng(0, 0, index))
        for index, instance in enumerate(instances)
    ]
    return collate_pretraining(examples, SPECIAL.pad)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_the_entry_tells_the_truth_about_the_data_the_model_and_the_statistics(
    name, tiny_config
) -> None:
    objective = OBJECTIVES[name]
    config = PretrainDataConfig(objective=name, max_seq_length=24, max_predictions_per_seq=4)
    batch = _batch(config)
    assert ("next_sentence_label" in batch) == objective.data.is_pair
    assert ("masked_positions" not in batch) == objective.data.is_causal
    torch.manual_seed(0)
    model_config = objective.model_config(tiny_config)
    model = objective.build_model(model_config, objective.settings({}))
    output = model(**batch)
    count = int((batch["labels"] != IGNORE_INDEX).sum())
    values = objective.named(summarize(objective.batch_stats(output, batch, count)))
    assert set(values) == {"loss", *objective.statistics}
    share = StepShare(predictions=1.0, micro_batches=1, tokens=1.0)
    loss = objective.loss(output, share)  # one micro-batch in one process: the model's loss
    torch.testing.assert_close(loss, output.loss)
    loss.backward()
    assert (objective.detection_scores(output) is not None) == (name == "electra")
    # What the loss reaches is what the entry trains: DistributedDataParallel expects a gradient
    # for every parameter that is not in an untrained module, and none for those that are.
    untrained = objective.untrained_modules
    for parameter_name, parameter in model.named_parameters():
        is_untrained = parameter_name.startswith(tuple(f"{module}." for module in untrained))
        assert (parameter.grad is None) == is_untrained, parameter_name


def test_an_objectives_own_settings_are_refused_for_the_others(tmp_path) -> None:
    run = PretrainRun(corpus=["c.txt"], out=tmp_path, budget=600, objective="electra")
    assert run.resolved.settings == ElectraConfig()
    tuned = dataclasses.replace(run, rtd_weight=20.0)
    assert tuned.resolved.settings == ElectraConfig(rtd_weight=20.0)
    assert "weight 20" in tuned.resolved.description
    with pytest.raises(ValueError, match="rtd_weight apply to objective electra only"):
        PretrainRun(corpus=["c.txt"], out=tmp_path, budget=600, objective="mlm", rtd_weight=20.0)
    assert dataclasses.replace(run, objective="mlm").resolved.settings is None


def _save_notes(model: torch.nn.Module, directory: Path) -> None:
    parameters = sum(parameter.numel() for parameter in model.parameters())
    (directory / "notes.json").write_text(json.dumps({"parameters": parameters}))


@dataclass(frozen=True)
class _HalfMaskedLM(Objective):
    """A made-up objective: masked LM at half its weight, with notes saved beside OUT/final."""

    saves: Saves = ((FINAL_DIR, BertForPreTraining.save_pretrained), ("notes", _save_notes))

    def loss(self, output, share: StepShare) -> torch.Tensor:
        return super().loss(output, share) / 2


def test_a_new_objective_is_one_entry_that_the_run_follows(
    monkeypatch, pretrain_files, tmp_path
) -> None:
    monkeypatch.setitem(OBJECTIVE_DATA, "half-mlm", ObjectiveData(is_pair=False, is_causal=False))
    entry = _HalfMaskedLM("half-mlm", MLM, OBJECTIVES["mlm"].uses)
    monkeypatch.setitem(OBJECTIVES, "half-mlm", entry)
    vocab, corpus = pretrain_files
    model_config = BertConfig(
        vocab_size=126,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=37,
        max_position_embeddings=64,
    )
    run = PretrainRun(
        corpus=[corpus],
        out=tmp_path / "run",
        max_steps=2,
        tokenizer=vocab,
        model_config=model_config,
        objective="half-mlm",
        max_seq_length=32,
        batch_size=4,
        eval_examples=8,
        eval_every_steps=2,
        num_workers=0,  # batches built in this process, which holds the made-up entry
    )
    lines: list[str] = []
    result = run_pretraining(run, show_progress=False, say=lines.append)
    assert result.final_dir == tmp_path / "run" / FINAL_DIR
    assert (result.final_dir / "model.safetensors").is_file()
    notes = json.loads((tmp_path / "run" / "notes" / "notes.json").read_text())
    assert notes["parameters"] > 0
    assert (tmp_path / "run" / "notes" / "vocab.txt").is_file()  # each folder has the tokenizer
    assert set(result.last_eval) >= {"loss", *MLM}
    card = (result.final_dir / "README.md").read_text()
    assert "A BERT encoder with its half-mlm heads" in card
    assert "| objective | half-mlm |" in card
