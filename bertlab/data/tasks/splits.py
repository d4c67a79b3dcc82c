"""Held-out splits carved from a training file, the same for every seed and every run.

`holdout_split` holds out about a fraction of the example groups (a SQuAD article stays on one
side); `sentence_split` does the same for SST-2's training file, which holds every phrase of its
sentences, by whole sentences (`phrase_roots`). Both draw with `DATA_SPLIT_SEED`, never a run's
seed, so that every seed trains and is scored on the same data.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

DATA_SPLIT_SEED = 0


def holdout_split(
    examples: list,
    fraction: float,
    group: Callable[[Any, int], object] | None = None,
) -> tuple[list, list]:
    """(kept, held out): about `fraction` of the example groups are held out.

    Args:
        examples: the examples, in file order.
        fraction: the share of groups to hold out, in (0, 1).
        group: (example, index) -> its group; examples of one group go to the same side.
            None: every example is a group of its own.

    Raises:
        ValueError: too few groups to hold out that share and keep some.
    """
    groups: dict[object, list[int]] = {}
    for index, example in enumerate(examples):
        key = index if group is None else group(example, index)
        groups.setdefault(key, []).append(index)
    keys = list(groups)
    random.Random(DATA_SPLIT_SEED).shuffle(keys)
    num_held_out = max(1, round(fraction * len(keys)))
    if num_held_out >= len(keys):
        raise ValueError(f"too few examples to hold out {fraction:.0%} of them")
    held_out = sorted(index for key in keys[:num_held_out] for index in groups[key])
    held_out_set = set(held_out)
    kept = [example for index, example in enumerate(examples) if index not in held_out_set]
    return kept, [examples[index] for index in held_out]


def subsample(examples: list, size: int | None) -> list:
    """`size` examples drawn with DATA_SPLIT_SEED (all of them when None or not fewer).

    Raises:
        ValueError: a size below 1.
    """
    if size is not None and size < 1:
        raise ValueError(f"the number of training examples must be at least 1, got {size}")
    if size is None or size >= len(examples):
        return examples
    return random.Random(DATA_SPLIT_SEED).sample(examples, size)


def phrase_roots(texts: Sequence[str]) -> list[int]:
    """For each text, the index of a longest text that contains it word for word (its sentence).

    A text no longer text contains is its own root. Texts are compared as whitespace-separated
    words, so "good" lies inside "a good film" but not inside "goodness".
    """
    words = [text.split() for text in texts]
    by_length = sorted(range(len(texts)), key=lambda i: -len(words[i]))
    roots_with: dict[tuple[str, ...], list[int]] = {}  # n-gram (n <= 3) -> roots containing it
    roots = list(range(len(texts)))
    for i in by_length:
        candidates = roots_with.get(tuple(words[i][:3]), ())
        if len(words[i]) <= 3:  # the n-gram index itself proves containment
            root = candidates[0] if candidates else None
        else:
            padded = f" {' '.join(words[i])} "
            root = next((c for c in candidates if padded in f" {' '.join(words[c])} "), None)
        if root is None:
            for n in (1, 2, 3):
                for start in range(len(words[i]) - n + 1):
                    roots_with.setdefault(tuple(words[i][start : start + n]), []).append(i)
        else:
            roots[i] = root
    return roots


def sentence_split(examples: list, fraction: float) -> tuple[list, list]:
    """(train, held-out) for a file of phrases and their sentences, such as SST-2's training file.

    About `fraction` of the sentences (`phrase_roots`) are held out, as whole sentences only; the
    training side keeps every phrase of the other sentences. A random split of SST-2's phrases
    would test 86% of its items on phrases that occur inside a training item.
    """
    roots = phrase_roots([example.text_a for example in examples])
    sentences = sorted(set(roots))
    random.Random(DATA_SPLIT_SEED).shuffle(sentences)
    held_out = set(sentences[: max(1, round(fraction * len(sentences)))])
    if len(held_out) >= len(sentences):
        raise ValueError(f"too few sentences to hold out {fraction:.0%} of them")
    train = [example for example, root in zip(examples, roots, strict=True) if root not in held_out]
    return train, [examples[index] for index in sorted(held_out)]
