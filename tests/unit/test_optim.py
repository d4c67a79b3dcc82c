"""Parameter groups, AdamW settings and learning-rate schedules (bertlab.training.optim)."""

from __future__ import annotations

import math

import pytest
import torch

from bertlab.core.config import PRETRAIN_SCHEDULES, PretrainConfig
from bertlab.network.bert import BertForPreTraining
from bertlab.training.optim import (
    ADAM_BETAS,
    ADAM_EPSILON,
    WEIGHT_DECAY,
    build_optimizer,
    linear_warmup_decay,
    parameter_groups,
)
from bertlab.training.pretraining.schedules import BudgetSchedule, StepsSchedule, pretrain_schedule


@pytest.fixture
def model(tiny_config) -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(tiny_config)


def _names_by_id(model: torch.nn.Module) -> dict[int, list[str]]:
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    return names


def _single_parameter_optimizer(learning_rate: float = 1.0) -> torch.optim.Optimizer:
    param = torch.nn.Parameter(torch.zeros(1))
    return torch.optim.SGD([param], lr=learning_rate)


def test_decay_only_on_weight_matrices_and_embeddings(model):
    decay, no_decay = parameter_groups(model, weight_decay=0.01)
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    names = _names_by_id(model)
    for param in decay["params"]:
        assert param.dim() == 2, names[id(param)]
        assert all(n.endswith(".weight") and "LayerNorm" not in n for n in names[id(param)])
    for param in no_decay["params"]:
        assert param.dim() == 1, names[id(param)]
        assert all(n.endswith(".bias") or ".LayerNorm." in n for n in names[id(param)])
    decay_ids = {id(param) for param in decay["params"]}
    embeddings = model.bert.embeddings
    assert id(embeddings.word_embeddings.weight) in decay_ids
    assert id(embeddings.position_embeddings.weight) in decay_ids
    assert id(model.cls.predictions.bias) in {id(param) for param in no_decay["params"]}


def test_tied_parameters_appear_once_and_groups_cover_the_model(model):
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert model.cls.predictions.decoder.bias is model.cls.predictions.bias
    grouped = [param for group in parameter_groups(model, 0.01) for param in group["params"]]
    assert len({id(param) for param in grouped}) == len(grouped)
    assert {id(param) for param in grouped} == {id(param) for param in model.parameters()}
    assert sum(p.numel() for p in grouped) == sum(p.numel() for p in model.parameters())


def test_frozen_parameters_are_left_out(model):
    model.bert.embeddings.requires_grad_(False)
    grouped = {id(param) for group in parameter_groups(model, 0.01) for param in group["params"]}
    assert grouped == {id(p) for p in model.parameters() if p.requires_grad}
    assert id(model.bert.embeddings.LayerNorm.weight) not in grouped


def test_groups_reject_a_model_with_nothing_to_train(model):
    model.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable"):
        parameter_groups(model, 0.01)


def test_optimizer_uses_bert_defaults_and_fused_kernel_on_cpu(model):
    optimizer = build_optimizer(model, learning_rate=1e-4)
    assert (ADAM_BETAS, ADAM_EPSILON, WEIGHT_DECAY) == ((0.9, 0.999), 1e-6, 0.01)
    assert [group["weight_decay"] for group in optimizer.param_groups] == [0.01, 0.0]
    for group in optimizer.param_groups:
        assert group["lr"] == 1e-4 and group["betas"] == ADAM_BETAS and group["eps"] == 1e-6
        assert group["fused"] is True and group["foreach"] is False


def test_optimizer_falls_back_to_foreach_when_not_fused(model):
    optimizer = build_optimizer(model, learning_rate=1e-4, fused=False)
    assert all(g["fused"] is False and g["foreach"] is True for g in optimizer.param_groups)


def test_one_optimizer_step_changes_weights_and_decays_unused_rows(model, batch):
    learning_rate = 1e-2
    optimizer = build_optimizer(model, learning_rate=learning_rate)
    before = {name: param.detach().clone() for name, param in model.named_parameters()}
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    output = model(**batch, labels=labels, next_sentence_label=torch.tensor([0, 1]))
    output.loss.backward()
    optimizer.step()
    for name, param in model.named_parameters():
        assert not torch.equal(param, before[name]), name
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight
    # Position rows past the batch's length get no gradient, so only decay moves them.
    length = batch["input_ids"].shape[1]
    unused = model.bert.embeddings.position_embeddings.weight[length:]
    expected = before["bert.embeddings.position_embeddings.weight"][length:]
    torch.testing.assert_close(unused, expected * (1 - learning_rate * WEIGHT_DECAY))


def _linear_learning_rates(warmup_steps: int, total_steps: int, num_steps: int) -> list[float]:
    optimizer = _single_parameter_optimizer()
    scheduler = linear_warmup_decay(optimizer, warmup_steps, total_steps)
    rates = [optimizer.param_groups[0]["lr"]]
    for _ in range(num_steps):
        optimizer.step()
        scheduler.step()
        rates.append(optimizer.param_groups[0]["lr"])
    return rates


def test_linear_warmup_decay_values_at_key_steps():
    rates = _linear_learning_rates(warmup_steps=4, total_steps=12, num_steps=14)
    expected = {0: 0.0, 1: 0.25, 2: 0.5, 4: 1.0, 8: 0.5, 11: 0.125, 12: 0.0, 14: 0.0}
    assert {step: rates[step] for step in expected} == pytest.approx(expected)


def test_linear_schedule_without_warmup_starts_at_the_peak():
    assert _linear_learning_rates(warmup_steps=0, total_steps=4, num_steps=4) == pytest.approx(
        [1.0, 0.75, 0.5, 0.25, 0.0]
    )


def test_linear_schedule_rejects_warmup_longer_than_the_run():
    with pytest.raises(ValueError):
        linear_warmup_decay(_single_parameter_optimizer(), warmup_steps=5, total_steps=4)


def test_linear_schedule_resumes_from_state_dicts():
    optimizer = _single_parameter_optimizer(0.1)
    scheduler = linear_warmup_decay(optimizer, 4, 12)
    for _ in range(6):
        optimizer.step()
        scheduler.step()
    resumed_optimizer = _single_parameter_optimizer(0.1)
    resumed = linear_warmup_decay(resumed_optimizer, 4, 12)
    resumed_optimizer.load_state_dict(optimizer.state_dict())
    resumed.load_state_dict(scheduler.state_dict())
    for _ in range(3):
        assert resumed_optimizer.param_groups[0]["lr"] == optimizer.param_groups[0]["lr"]
        for opt, sched in ((optimizer, scheduler), (resumed_optimizer, resumed)):
            opt.step()
            sched.step()
    assert resumed_optimizer.param_groups[0]["lr"] == pytest.approx(0.1 * 3 / 8)


@pytest.mark.parametrize("decay", ["linear", "one-cycle"])
def test_budget_schedule_rises_during_warmup_and_falls_to_zero(decay):
    optimizer = _single_parameter_optimizer(2.0)
    schedule = BudgetSchedule(optimizer, warmup_proportion=0.25, decay=decay)
    assert schedule.get_last_lr() == [0.0]
    rates = []
    for percent in range(101):
        schedule.step(percent / 100)
        rates.append(schedule.get_last_lr()[0])
    warmup, after = rates[:26], rates[25:]
    assert all(a < b for a, b in zip(warmup, warmup[1:], strict=False))
    assert all(a > b for a, b in zip(after, after[1:], strict=False))
    assert rates[0] == 0.0 and rates[25] == pytest.approx(2.0) and rates[100] == pytest.approx(0.0)
    schedule.step(1.7)  # over budget: no further updates
    assert schedule.get_last_lr() == [0.0]


def test_budget_schedule_values():
    optimizer = _single_parameter_optimizer()
    linear = BudgetSchedule(optimizer, warmup_proportion=0.2)
    assert [linear.multiplier(p) for p in (0.1, 0.2, 0.6)] == pytest.approx([0.5, 1.0, 0.5])
    one_cycle = BudgetSchedule(optimizer, warmup_proportion=0.2, decay="one-cycle")
    assert [one_cycle.multiplier(p) for p in (0.1, 0.6)] == pytest.approx([0.5, 0.5])


def test_budget_schedule_rejects_bad_arguments():
    optimizer = _single_parameter_optimizer()
    with pytest.raises(ValueError, match="unknown decay"):
        BudgetSchedule(optimizer, 0.1, decay="cosine")
    with pytest.raises(ValueError, match="warmup_proportion"):
        BudgetSchedule(optimizer, 1.0)
    schedule = BudgetSchedule(optimizer, 0.0)
    assert schedule.get_last_lr() == [1.0]  # no warmup: the peak from the start
    for progress in (-0.1, float("nan")):
        with pytest.raises(ValueError, match="progress"):
            schedule.step(progress)


def test_budget_schedule_state_dict_round_trip(model):
    optimizer = build_optimizer(model, learning_rate=1e-3)
    schedule = BudgetSchedule(optimizer, warmup_proportion=0.1, decay="one-cycle")
    schedule.step(0.37)
    saved_optimizer, saved_schedule = optimizer.state_dict(), schedule.state_dict()

    # A resumed run builds everything as at the start, then loads optimizer and schedule state.
    resumed_optimizer = build_optimizer(model, learning_rate=1e-3)
    resumed = BudgetSchedule(resumed_optimizer, warmup_proportion=0.1, decay="one-cycle")
    resumed_optimizer.load_state_dict(saved_optimizer)
    resumed.load_state_dict(saved_schedule)
    assert resumed.state_dict() == saved_schedule
    assert resumed.get_last_lr() == schedule.get_last_lr()
    schedule.step(0.8)
    resumed.step(0.8)
    assert resumed.get_last_lr() == schedule.get_last_lr()

    with pytest.raises(ValueError, match="differs"):
        BudgetSchedule(build_optimizer(model, 1e-3), 0.1, decay="linear").load_state_dict(
            saved_schedule
        )


def test_budget_schedule_built_after_loading_optimizer_keeps_the_peak(model):
    optimizer = build_optimizer(model, learning_rate=1e-3)
    BudgetSchedule(optimizer, warmup_proportion=0.5).step(0.25)  # lr is now half the peak
    resumed_optimizer = build_optimizer(model, learning_rate=1e-3)
    resumed_optimizer.load_state_dict(optimizer.state_dict())
    resumed = BudgetSchedule(resumed_optimizer, warmup_proportion=0.5)
    resumed.step(0.5)
    assert resumed.get_last_lr() == pytest.approx([1e-3, 1e-3])


@pytest.mark.parametrize("name", list(PRETRAIN_SCHEDULES))
@pytest.mark.parametrize("budget", [{"max_steps": 8}, {"max_time": 80.0}])
def test_each_pretraining_schedule_follows_the_budget_it_is_given(name, budget):
    """Every name of the table builds a schedule, driven as the loop drives it; linear warmup and
    decay counts the optimizer steps with max_steps (BERT's `linear_warmup_decay`) and the
    training time with max_time, one-cycle the fraction of either. 8 steps of 10 s, warmup 2."""
    config = PretrainConfig(schedule=name, warmup_proportion=0.25, learning_rate=1.0, **budget)
    optimizer = _single_parameter_optimizer()
    schedule = pretrain_schedule(optimizer, config)
    rates = []
    for step in range(8):
        schedule.before_step(config.budget_used(step, elapsed=10.0 * step))
        rates.append(schedule.get_last_lr()[0])
        optimizer.step()
        schedule.after_step()
    if name == "linear":
        expected = [0, 0.5, 1, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6]
    else:  # cosine rise over the first quarter, cosine fall over the rest
        rise = [(1 - math.cos(math.pi * step / 2)) / 2 for step in range(2)]
        expected = rise + [(1 + math.cos(math.pi * (step - 2) / 6)) / 2 for step in range(2, 8)]
    assert rates == pytest.approx(expected)
    assert isinstance(schedule, StepsSchedule) == (name == "linear" and "max_steps" in budget)


def test_a_steps_schedule_saves_as_its_lambda_lr(model):
    """Checkpoints of a run over steps hold the `LambdaLR`'s state, as before the schedule table."""
    optimizer = build_optimizer(model, 1e-3)
    schedule = pretrain_schedule(optimizer, PretrainConfig(max_steps=12, warmup_proportion=0.25))
    reference = linear_warmup_decay(build_optimizer(model, 1e-3), 3, 12)
    for _ in range(5):
        optimizer.step()
        schedule.after_step()
        reference.optimizer.step()
        reference.step()
    assert schedule.state_dict() == reference.state_dict()
    config = PretrainConfig(max_steps=12, warmup_proportion=0.25)
    resumed = pretrain_schedule(build_optimizer(model, 1e-3), config)
    resumed.load_state_dict(schedule.state_dict())
    assert resumed.get_last_lr() == reference.get_last_lr()
