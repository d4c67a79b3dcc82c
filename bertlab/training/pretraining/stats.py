"""What a pre-training step measures: statistics summed over micro-batches, processes and
held-out batches, and the losses and accuracies they become.

Sums, not means, so that a step's figures do not depend on how its batch is split: the masked-LM
loss is weighted by each batch's masked tokens, NSP by its examples, replaced-token detection by
its real positions. `evaluate` reports the same figures on held-out batches, with the AUC of
ELECTRA's replaced-token detection.
"""

# Shapes: B batch, L sequence length, P masked positions per sequence.

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from bertlab.core.metrics import roc_auc
from bertlab.core.runtime import autocast
from bertlab.network.bert import IGNORE_INDEX

# What an objective measures on a batch (`objectives.Objective.batch_stats`,
# `detection_scores`): its sums in the order of STATS, then its real tokens; and (scores, 0/1
# truths) of its replaced-token detection, or None.
BatchStats = Callable[[Any, dict[str, torch.Tensor], int], torch.Tensor]
DetectionScores = Callable[[Any], tuple[torch.Tensor, torch.Tensor] | None]
# How an objective runs its model on a batch (`objectives.Objective.forward`).
Forward = Callable[[nn.Module, dict[str, torch.Tensor]], Any]

# A left-to-right (`clm`) run predicts the next token at every position, not masked tokens: its
# statistics, summed in the masked-LM slots, are logged under a language model's names.
CAUSAL_NAMES = {
    "mlm_loss": "lm_loss",
    "mlm_accuracy": "lm_accuracy",
    "mlm_unigram_accuracy": "lm_unigram_accuracy",
}
# Statistics summed over micro-batches and processes, in this order. rtd_*: ELECTRA's replaced-
# token detection (`bertlab.network.electra`); rtd_weighted_loss_sum counts it as the loss does.
# blm_*: ELMo's backward language model (`bertlab.network.elmo`), each position's previous piece.
STATS = (
    "mlm_loss_sum",
    "mlm_correct",
    "mlm_count",
    "nsp_loss_sum",
    "nsp_correct",
    "nsp_count",
    "rtd_loss_sum",
    "rtd_correct",
    "rtd_count",
    "rtd_weighted_loss_sum",
    "blm_loss_sum",
    "blm_correct",
    "blm_count",
)
STAT_TOKENS = len(STATS)  # index of the non-padding token count, after STATS
# Below this held-out AUC the discriminator has hardly learned to tell replaced tokens from
# original ones (0.5 is chance) and its encoder has little to transfer: docs/pretraining.md's
# ELECTRA section measured 0.50-0.56 in the budget recipe's runs, whose discriminators then
# fine-tuned to the majority class.
NEAR_CHANCE_AUC = 0.6
# A held-out (masked-)LM accuracy below the unigram level plus this margin is "on the unigram
# plateau". At BERT's 80/10/10 masking the level is a tenth (the kept tokens) plus 0.9 times the
# commonest piece's share, some 15% on English (an estimate); the budget recipe's runs sat at
# 13-14% on the plateau and were at 17-22% once off it (the masking-rate runs and the hour's
# curve); the naive recipe stayed at 9.8%, a BERT-base at peak 7e-4 at 4.5%.
PLATEAU_MARGIN = 0.03
# (accuracy, unigram level) in a held-out evaluation: masked LM's, or a causal run's.
PLATEAU_NAMES = (
    ("mlm_accuracy", "mlm_unigram_accuracy"),
    (CAUSAL_NAMES["mlm_accuracy"], CAUSAL_NAMES["mlm_unigram_accuracy"]),
)
PLATEAU_DOCS = "docs/reliability.md#a-pre-training-that-stayed-on-the-unigram-plateau"
CURVE_PANELS = (
    ("loss", "loss (nats)", "total loss"),
    ("mlm_loss", "loss (nats)", "masked-LM loss"),
    ("mlm_accuracy", "accuracy", "masked-LM accuracy"),
    ("lm_loss", "loss (nats)", "left-to-right LM loss"),
    ("lm_accuracy", "accuracy", "next-token accuracy"),
    ("lm_perplexity", "perplexity per piece", "left-to-right perplexity"),
    ("backward_lm_loss", "loss (nats)", "backward LM loss (ELMo)"),
    ("nsp_accuracy", "accuracy", "next-sentence accuracy"),
    ("rtd_loss", "loss (nats)", "replaced-token detection loss"),
    ("rtd_accuracy", "accuracy", "replaced-token detection accuracy"),
    ("rtd_auc", "AUC (0.5: chance)", "replaced-token detection AUC, held out"),
    ("learning_rate", "learning rate", "learning rate"),
    ("tokens_per_second", "tokens / s", "throughput"),
)


@torch.no_grad()
def evaluate(
    model: nn.Module,
    batches: list[dict[str, torch.Tensor]],
    device: torch.device,
    precision: str,
    measure: BatchStats,
    detect: DetectionScores,
    forward: Forward,
) -> dict[str, float]:
    """Held-out loss and accuracies of `model` over `batches`, run as `forward` runs it (an
    objective's `forward`) and summed over every batch's predictions as `measure` sums them
    (its `batch_stats`), with the AUC of what `detect` scores (its `detection_scores`), if
    anything. The caller puts the model in eval mode."""
    stats = torch.zeros(len(STATS) + 1, dtype=torch.float64, device=device)
    scores, truths = [], []
    for batch in batches:
        batch = {key: value.to(device) for key, value in batch.items()}
        with autocast(device, precision):
            output = forward(model, batch)
        count = int((batch["labels"] != IGNORE_INDEX).sum())
        stats += measure(output, batch, count)
        detected = detect(output)
        if detected is not None:
            scores.append(detected[0])
            truths.append(detected[1])
    values = summarize(stats.cpu())
    if scores:
        auc = roc_auc(torch.cat(scores).tolist(), torch.cat(truths).tolist())
        if not math.isnan(auc):  # one class only: no AUC
            values["rtd_auc"] = auc
    return values


def unigram_accuracy(batches: list[dict[str, torch.Tensor]], mask_id: int) -> float | None:
    """The unigram level: the accuracy on `batches` of the best prediction that ignores the
    context, measured on their own targets. Where the input is [MASK] it predicts the most
    frequent target of those positions; where the token is visible (BERT leaves a tenth of the
    chosen tokens unchanged, Sec. 3.1, and replaces a tenth at random) it predicts that token. A
    causal run's next token is never visible: there it is the share of the most frequent target.
    A model that has learned only the word frequencies (and to copy) scores this.

    Args:
        batches: held-out batches: `labels` (B, P) with `masked_positions` (B, P), or causal
            `labels` (B, L); IGNORE_INDEX where there is no target.
        mask_id: the id of [MASK].

    Returns:
        The level in [0, 1], or None when the batches have no target.
    """
    targets, inputs = [], []
    for batch in batches:
        labels = batch["labels"]
        if "masked_positions" in batch:
            shown = batch["input_ids"].gather(1, batch["masked_positions"])  # (B, P)
        else:
            shown = torch.full_like(labels, mask_id)  # (B, L): the next token is hidden
        is_target = labels != IGNORE_INDEX
        targets.append(labels[is_target])
        inputs.append(shown[is_target])
    if not targets:
        return None
    labels, shown = torch.cat(targets), torch.cat(inputs)
    if not len(labels):
        return None
    hidden = shown == mask_id
    correct = int((shown[~hidden] == labels[~hidden]).sum())
    if hidden.any():
        correct += int(torch.bincount(labels[hidden]).max())
    return correct / len(labels)


def unigram_plateau(
    values: dict[str, float], tokens: int, min_tokens: int
) -> tuple[float, float] | None:
    """(accuracy, unigram level) when a held-out evaluation after `tokens` training tokens is
    still on the unigram plateau: at least `min_tokens` seen and the accuracy below the level
    plus PLATEAU_MARGIN. None otherwise, and for an evaluation without a level."""
    for accuracy_name, level_name in PLATEAU_NAMES:
        accuracy, level = values.get(accuracy_name), values.get(level_name)
        if accuracy is None or level is None:
            continue
        if tokens >= min_tokens and accuracy < level + PLATEAU_MARGIN:
            return accuracy, level
    return None


def plateau_warning(last_eval: dict[str, float] | None, tokens: int, min_tokens: int) -> str | None:
    """A warning, with what to change, when a run ends on the unigram plateau; None otherwise."""
    plateau = unigram_plateau(last_eval or {}, tokens, min_tokens)
    if plateau is None:
        return None
    accuracy, level = plateau
    return (
        f"warning: still on the unigram plateau after {tokens:,} tokens (held-out accuracy "
        f"{accuracy:.1%} vs unigram {level:.1%}): the model has learned no more than word "
        "frequencies, transfers little and tends to fine-tune to the majority class; change one "
        "of: a lower peak --learning-rate (BERT-base/large, post-LN: 1e-4 to 2e-4), more "
        "tokens (a longer budget or a smaller --model-size), the budget recipe's "
        f"--mlm-probability 0.4 and --position-init sinusoidal ({PLATEAU_DOCS})"
    )


def batch_stats(output: Any, batch: dict[str, torch.Tensor], count: int) -> torch.Tensor:
    """One batch's masked-LM and NSP sums in the order of STATS, then its non-padding tokens
    (STAT_TOKENS); the replaced-token detection slots stay 0 (`detection_stats` fills them).

    `count` is the batch's masked-LM targets (labels other than IGNORE_INDEX). The sums are a
    float64 tensor on the batch's device, computed there: nothing is read on the host, so on a
    GPU a training step does not wait for the device (the loop reads the sums at its logs)."""
    stats = language_model_stats(output.mlm_loss, output.mlm_logits, batch, count)
    with torch.no_grad():
        if output.nsp_loss is not None:
            nsp_labels = batch["next_sentence_label"]  # (B,)
            stats[3] = output.nsp_loss.double() * len(nsp_labels)
            stats[4] = (output.nsp_logits.argmax(dim=-1) == nsp_labels).sum()
            stats[5] = len(nsp_labels)
    return stats


def language_model_stats(
    loss: torch.Tensor,
    logits: torch.Tensor,
    batch: dict[str, torch.Tensor],
    count: int,
    first: int = 0,
    labels: torch.Tensor | None = None,
) -> torch.Tensor:
    """A language model's sums (loss x targets, correct predictions, targets) in the three
    slots of STATS from `first` (the masked-LM slots by default, blm_* for ELMo's backward LM),
    then the batch's non-padding tokens; 0 elsewhere.

    Args:
        loss: the mean loss per target (a scalar).
        logits: (B, P, V) or (B, L, V), the scores of each target's position.
        batch: its `labels` (the targets, IGNORE_INDEX where none) and `attention_mask`.
        count: the number of targets.
        labels: other targets than `batch["labels"]` (ELMo's previous pieces).
    """
    labels = batch["labels"] if labels is None else labels
    stats = torch.zeros(len(STATS) + 1, dtype=torch.float64, device=labels.device)
    with torch.no_grad():
        if count:
            predicted = logits.argmax(dim=-1)  # (B, P) or (B, L)
            stats[first] = loss.double() * count
            stats[first + 1] = ((predicted == labels) & (labels != IGNORE_INDEX)).sum()
            stats[first + 2] = count
        stats[STAT_TOKENS] = batch["attention_mask"].sum()
    return stats


def detection_stats(output: Any) -> torch.Tensor:
    """A batch's replaced-token detection sums (ELECTRA's `ElectraOutput`: `rtd_logits`,
    `rtd_labels`, `rtd_loss`, `rtd_weight`) in the rtd_* slots of STATS, 0 elsewhere: a float64
    tensor on the output's device, computed there (nothing is read on the host)."""
    labels = output.rtd_labels  # (B, L)
    stats = torch.zeros(len(STATS) + 1, dtype=torch.float64, device=labels.device)
    with torch.no_grad():
        real = labels != IGNORE_INDEX  # (B, L)
        predicted = (output.rtd_logits > 0).long()  # (B, L)
        positions = real.sum().double()
        stats[6] = output.rtd_loss.double() * positions
        stats[7] = ((predicted == labels) & real).sum()
        stats[8] = positions
        stats[9] = output.rtd_weight * output.rtd_loss.double() * positions
    return stats


def detection_scores(output: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(scores, truths) of a batch's replaced-token detection at its real positions, on the
    CPU, for the held-out AUC: the logits (N,) float32 and the labels (N,) int64, 1: replaced."""
    real = output.rtd_labels != IGNORE_INDEX  # (B, L)
    return output.rtd_logits.float()[real].cpu(), output.rtd_labels[real].cpu()


def summarize(stats: torch.Tensor) -> dict[str, float]:
    """Loss and accuracies from summed statistics."""
    values: dict[str, float] = {}
    (
        mlm_loss_sum,
        mlm_correct,
        mlm_count,
        nsp_loss_sum,
        nsp_correct,
        nsp_count,
        rtd_loss_sum,
        rtd_correct,
        rtd_count,
        rtd_weighted_loss_sum,
        blm_loss_sum,
        blm_correct,
        blm_count,
    ) = stats[:STAT_TOKENS].tolist()
    loss = 0.0
    if mlm_count:
        values["mlm_loss"] = mlm_loss_sum / mlm_count
        values["mlm_accuracy"] = mlm_correct / mlm_count
        loss += values["mlm_loss"]
    if nsp_count:
        values["nsp_loss"] = nsp_loss_sum / nsp_count
        values["nsp_accuracy"] = nsp_correct / nsp_count
        loss += values["nsp_loss"]
    if rtd_count:
        values["rtd_loss"] = rtd_loss_sum / rtd_count
        values["rtd_accuracy"] = rtd_correct / rtd_count
        loss += rtd_weighted_loss_sum / rtd_count
    if blm_count:
        values["blm_loss"] = blm_loss_sum / blm_count
        values["blm_accuracy"] = blm_correct / blm_count
        loss += values["blm_loss"]
    values["loss"] = loss
    return values


def near_chance_warning(last_eval: dict[str, float] | None) -> str | None:
    """A warning when an ELECTRA run ends with its discriminator near chance; None otherwise
    (also for the other objectives, which have no `rtd_auc`)."""
    auc = (last_eval or {}).get("rtd_auc")
    if auc is None or auc >= NEAR_CHANCE_AUC:
        return None
    return (
        f"warning: the discriminator ends near chance (held-out rtd_auc {auc:.3f} < "
        f"{NEAR_CHANCE_AUC}): it has learned little to fine-tune (at the budget recipe's hour, "
        "such discriminators gave every sentence nearly the same [CLS] state and fine-tuned to "
        "the majority class); ELECTRA needs more training than a short budget gives "
        "(docs/pretraining.md, ELECTRA's known problem)"
    )
