"""The budget recipe's plan: the CPU table unchanged, the accelerator's shape chosen from measured
speeds, the plan kept in OUT for --resume."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch

from bertlab.core.config import BertConfig
from bertlab.core.runtime import DistributedContext
from bertlab.corpus.build import build_corpus
from bertlab.data.pretraining import SpecialIds
from bertlab.data.stream import StreamSpec
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.pretraining import budget_plan
from bertlab.training.pretraining import run as pretrain_run
from bertlab.training.pretraining.budget import (
    ACCELERATOR_RECIPES,
    ACCELERATOR_SHAPES,
    TOKENS_PER_PARAMETER,
    BudgetRecipe,
    accelerator_recipe,
    budget_recipe,
    choose_shape,
)
from bertlab.training.pretraining.budget_plan import (
    BudgetPlan,
    load_plan,
    measured_plan,
    nearest_preset,
    plan_budget,
    save_plan,
)
from bertlab.training.pretraining.run import PretrainRun

MINUTE = 60.0


@pytest.mark.parametrize("minutes", [4, 10, 20, 29.9, 30, 60, 120])
def test_the_cpu_choices_are_the_measured_table(minutes) -> None:
    # The CPU recipe as docs/budget.md's table gives it (measured over many rounds on 2 cores):
    # the plan on a CPU must not change it.
    larger = minutes >= 30
    expected = BudgetRecipe(
        vocab_size=8000,
        model_size="mini" if larger else "tiny",
        max_seq_length=128,
        batch_size=32,
        objective="mlm",
        pack_sequences=True,
        mlm_probability=0.4,
        learning_rate=1e-3 if larger else 2e-3,
        warmup_proportion=0.1,
        schedule="one-cycle",
        dropout=0.0,
        position_init="sinusoidal",
    )
    assert budget_recipe(minutes * MINUTE) == expected
    plan = plan_budget(minutes * MINUTE, torch.device("cpu"), None)
    assert plan.recipe == expected and plan.device == "CPU" and not plan.tokens_per_second


def test_an_explicit_size_on_the_cpu_keeps_the_rest_of_the_table() -> None:
    plan = plan_budget(10 * MINUTE, torch.device("cpu"), "base")
    assert plan.recipe == dataclasses.replace(budget_recipe(10 * MINUTE), model_size="base")


def test_the_largest_shape_that_reads_enough_tokens_per_parameter_is_chosen() -> None:
    parameters = {"tiny": 1_000_000, "mini": 5_000_000, "small": 20_000_000}
    speed = {"tiny": 1e6, "mini": 1e6, "small": 1e6}
    # mini needs 100M tokens (100 s at 1M/s), small 400M (400 s)
    assert choose_shape(99, speed, parameters) == "tiny"
    assert choose_shape(100, speed, parameters) == "mini"
    assert choose_shape(400, speed, parameters) == "small"
    # too short for any: the smallest measured; a slower small cannot qualify
    assert choose_shape(1, speed, parameters) == "tiny"
    assert choose_shape(400, speed | {"small": 0.5e6}, parameters) == "mini"
    assert TOKENS_PER_PARAMETER == 20.0
    with pytest.raises(ValueError, match="no shape"):
        choose_shape(100, {}, {})


def test_every_shape_has_an_accelerator_recipe_that_keeps_the_cpu_recipes_other_choices() -> None:
    assert set(ACCELERATOR_SHAPES) == set(ACCELERATOR_RECIPES)
    for shape in ACCELERATOR_SHAPES:
        recipe = accelerator_recipe(shape)
        settings = ACCELERATOR_RECIPES[shape]
        assert recipe.model_size == shape
        assert (recipe.batch_size, recipe.learning_rate) == (
            settings.batch_size,
            settings.learning_rate,
        )
        cpu = BudgetRecipe()
        assert (recipe.objective, recipe.schedule, recipe.dropout, recipe.position_init) == (
            cpu.objective,
            cpu.schedule,
            cpu.dropout,
            cpu.position_init,
        )
    # post-LN: the peak falls as the shapes grow (BERT-base at 7e-4 stayed on the plateau)
    rates = [ACCELERATOR_RECIPES[shape].learning_rate for shape in ACCELERATOR_SHAPES]
    assert rates == sorted(rates, reverse=True) and ACCELERATOR_RECIPES["base"].learning_rate < 7e-4
    with pytest.raises(ValueError, match="no accelerator recipe"):
        accelerator_recipe("huge")


def test_a_planned_run_trains_with_the_plans_recipe(tmp_path) -> None:
    run = PretrainRun(corpus=["c.txt"], out=tmp_path, budget=300)
    assert run.resolved.shape == "tiny" and run.resolved.loop.batch_size == 32
    plan = BudgetPlan(300, None, "NVIDIA H200", accelerator_recipe("mini"))
    planned = run.resolved.planned(plan)
    loop, data = planned.loop, planned.data
    assert planned.shape == "mini" and planned.plan == plan and planned.recipe == plan.recipe
    assert (loop.batch_size, loop.learning_rate, loop.max_time) == (128, 2e-3, 300)
    assert data.mlm_probability == 0.4 and data.pack_sequences
    # a flag given explicitly still wins over the plan
    explicit = dataclasses.replace(run, batch_size=64, learning_rate=1e-4).resolved.planned(plan)
    assert (explicit.loop.batch_size, explicit.loop.learning_rate) == (64, 1e-4)
    with pytest.raises(ValueError, match="budget"):
        PretrainRun(corpus=["c.txt"], out=tmp_path, max_steps=3, vocab_size=100).resolved.planned(
            plan
        )


def test_a_cpu_plan_keeps_the_resolved_run(tmp_path) -> None:
    """On a CPU the plan is the measured recipe, with the user's shape: the run resolved when it
    was made is kept, its configs not built again."""
    for size in (None, "mini"):
        run = PretrainRun(corpus=["c.txt"], out=tmp_path, budget=300, model_size=size)
        plan = plan_budget(300, torch.device("cpu"), size)
        planned = run.resolved.planned(plan)
        assert planned.plan == plan
        assert planned.data is run.resolved.data and planned.loop is run.resolved.loop


def test_the_plan_is_kept_for_the_same_budget_size_and_device_only(tmp_path) -> None:
    plan = BudgetPlan(
        300, None, "NVIDIA H200", accelerator_recipe("mini"), {"mini": 5e5}, {"mini": 5_000_000}
    )
    save_plan(tmp_path, plan)
    assert load_plan(tmp_path, 300, None, "NVIDIA H200") == plan
    assert load_plan(tmp_path, 600, None, "NVIDIA H200") is None
    assert load_plan(tmp_path, 300, "base", "NVIDIA H200") is None
    assert load_plan(tmp_path, 300, None, "CPU") is None
    (tmp_path / "budget_plan.json").write_text("{not json", encoding="utf-8")
    assert load_plan(tmp_path, 300, None, "NVIDIA H200") is None


def test_the_plans_report_names_the_speeds_the_shape_and_the_tokens() -> None:
    plan = BudgetPlan(
        300,
        None,
        "NVIDIA H200",
        accelerator_recipe("mini"),
        {"tiny": 589e3, "mini": 589e3, "small": 589e3},
        {"tiny": 1_528_130, "mini": 5_479_746, "small": 17_505_090},
        589e3,
    )
    first, second = plan.lines()
    assert (
        first
        == "measured on NVIDIA H200, tokens/s: tiny 589k, mini 589k, small 589k (data worker 589k)"
    )
    assert second.startswith("BERT-mini (the largest shape that reads 20 tokens per parameter)")
    assert "about 177M tokens in 5 min, 32 per parameter" in second


def test_several_processes_read_their_tokens_together_at_the_slowest_ones_pace(
    monkeypatch,
) -> None:
    """Under torchrun each process measures its own device; the plan takes the slowest speed of
    each shape (DDP's steps wait for it) and chooses the shape by the tokens that all processes
    read together, each on a batch of the recipe's size."""
    parameters = {"tiny": 1_000_000, "mini": 5_000_000, "small": 20_000_000}
    speeds = {"tiny": 4e5, "mini": 1e5, "small": 2e4}  # this process's tokens/s
    monkeypatch.setattr(budget_plan, "_loader_speed", lambda spec: 1e9)
    monkeypatch.setattr(budget_plan, "PretrainingStream", lambda spec: iter([(None, None)]))
    monkeypatch.setattr(budget_plan.BertConfig, "from_preset", lambda shape, **kw: shape)
    monkeypatch.setattr(
        budget_plan,
        "_step_speed",
        lambda shape, *args: (speeds[shape], parameters[shape]),
    )
    # The other process is slower at mini and did not get as far as small.
    other = ({"tiny": 5e5, "mini": 0.8e5}, 1e9)
    monkeypatch.setattr(
        budget_plan, "gathered", lambda value, context: [value, other][: context.world_size]
    )
    spec = SimpleNamespace(vocab_size=100, special=SimpleNamespace(pad=0))
    monkeypatch.setattr(budget_plan, "_spec_for", lambda spec, recipe: spec)
    seconds = 1000.0  # one process: mini reads 1e8 tokens, 20 per parameter; small too few
    one = measured_plan(seconds, torch.device("cpu"), None, spec, "fp32", list(parameters))
    assert one.recipe.model_size == "mini" and one.processes == 1
    two = measured_plan(
        seconds,
        torch.device("cpu"),
        None,
        spec,
        "fp32",
        list(parameters),
        DistributedContext(rank=0, world_size=2),
    )
    assert two.tokens_per_second == {"tiny": 4e5, "mini": 0.8e5}  # slowest; both measured
    assert two.processes == 2
    assert two.recipe.model_size == "mini"  # 2 x 0.8e5 x 1000 s = 32 tokens per parameter
    assert two.expected_tokens() == pytest.approx(2 * 0.8e5 * seconds)
    first, second = two.lines()
    assert "tokens/s per process, the slowest of 2: tiny 400k, mini 80k" in first
    assert "about 160M tokens in 16.6667 min in all 2 processes, 32 per parameter" in second
    cpu = plan_budget(600, torch.device("cpu"), None, context=DistributedContext(0, 2))
    assert cpu.recipe == budget_recipe(600) and cpu.processes == 2
    assert cpu.lines() == [
        "planned for the CPU: the measured CPU recipe (docs/budget.md), in each of 2 processes "
        "(global batch 2 x 32)"
    ]


def test_a_plan_is_kept_for_the_same_number_of_processes_only(tmp_path) -> None:
    plan = BudgetPlan(300, None, "CPU", budget_recipe(300), processes=2)
    save_plan(tmp_path, plan)
    assert load_plan(tmp_path, 300, None, "CPU", 2) == plan
    assert load_plan(tmp_path, 300, None, "CPU", 1) is None


def test_nearest_preset() -> None:
    assert nearest_preset(BertConfig.from_preset("small", vocab_size=100)) == "small"
    assert nearest_preset(BertConfig.from_preset("base", vocab_size=100)) == "base"
    odd = BertConfig(vocab_size=100, hidden_size=384, num_hidden_layers=6, num_attention_heads=6)
    assert nearest_preset(odd) in ("mini", "small", "medium")


def test_measuring_times_real_steps_and_the_data_worker(pretrain_files, tmp_path) -> None:
    vocab, corpus_file = pretrain_files
    tokenizer = Tokenizer.from_pretrained(vocab)
    corpus = build_corpus([corpus_file], tokenizer, tmp_path / "corpus", "en", False, False)
    run = PretrainRun(corpus=[corpus_file], out=tmp_path, budget=60, tokenizer=vocab)
    spec = StreamSpec(
        corpus.directory,
        (0, corpus.num_documents),
        run.resolved.data,
        SpecialIds.from_vocab(tokenizer.get_vocab()),
        tokenizer.vocab_size,
        0,
        32,
    )
    plan = measured_plan(3600.0, torch.device("cpu"), None, spec, "fp32", ["tiny"])
    assert plan.recipe == accelerator_recipe("tiny")
    assert plan.tokens_per_second["tiny"] > 0 and plan.loader_tokens_per_second > 0
    assert plan.tokens_per_second["tiny"] <= plan.loader_tokens_per_second
    tiny = BertConfig.from_preset("tiny", vocab_size=tokenizer.vocab_size)
    from bertlab.network.bert import BertForPreTraining

    assert plan.parameters["tiny"] == sum(p.numel() for p in BertForPreTraining(tiny).parameters())


def test_a_run_on_a_gpu_takes_more_data_workers_unless_told(monkeypatch) -> None:
    """One worker on the CPU, as before; on a GPU up to 4 of its share of the cores, one left to
    its training process; a number given is kept. The run resolves its workers when it is
    made."""

    def workers(**given) -> int:
        run = PretrainRun(corpus=("corpus.txt",), out="out", max_steps=10, vocab_size=100, **given)
        return run.resolved.loop.num_workers

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert workers() == 1
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    for cores, gpus, expected in ((16, 1, 4), (4, 1, 3), (2, 1, 1), (16, 8, 1), (64, 8, 4)):
        monkeypatch.setattr(pretrain_run.os, "cpu_count", lambda cores=cores: cores)
        monkeypatch.setattr(torch.cuda, "device_count", lambda gpus=gpus: gpus)
        assert workers() == expected, (cores, gpus)
    assert workers(num_workers=0) == 0
