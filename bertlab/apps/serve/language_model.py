"""What the server computes with a pre-trained model's language-model head: continuations of
prompts (`generate`, a left-to-right model) and sentence scores (`score`, any language model).

Each function takes a `ServedModel` and a batch of inputs and returns one JSON-ready record per
input, in order, as `inference` does for the other tasks; each is `bertlab.use.language_model`'s
call, the one `bertlab generate` and `bertlab score-text` make, so the answers equal theirs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bertlab.apps.serve.inference import BATCH_SIZE, Record
from bertlab.apps.serve.models import ServedModel
from bertlab.tokenizer.wordpiece import NUM_SPECIAL_TOKENS_SINGLE
from bertlab.use.generation_options import DEFAULT_MAX_NEW_TOKENS, DEFAULT_TOP_K
from bertlab.use.language_model import generate, score_texts


@dataclass(frozen=True)
class Sampling:
    """How `generate` samples (`bertlab.use.language_model.generate`'s arguments and defaults)."""

    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    temperature: float = 1.0
    top_k: int | None = DEFAULT_TOP_K  # None: the whole vocabulary
    seed: int = 0


def continue_texts(model: ServedModel, prompts: Sequence[str], sampling: Sampling) -> list[Record]:
    """Each prompt continued by a left-to-right model, sampled with `sampling.seed`: the same
    prompt, settings and seed give the same text, whatever else is in the batch.

    Returns:
        Per prompt: `{"text": the prompt and its continuation, "continuation": what was
        added}`, as the tokenizer writes pieces back (a lower-casing model's text is lower case).

    Raises:
        ValueError: a prompt that fills the model's positions, or a bad setting.
    """
    records = []
    for prompt in prompts:
        text = generate(
            model.lm,
            model.tokenizer,
            prompt,
            sampling.max_new_tokens,
            sampling.temperature,
            sampling.top_k,
            sampling.seed,
        )
        # the prompt as the tokenizer writes it back: [CLS] and its pieces, not [SEP]
        start = model.tokenizer.decode(model.tokenizer(prompt, truncation=False)["input_ids"][:-1])
        continuation = text[len(start) :] if text.startswith(start) else text
        records.append({"text": text, "continuation": continuation.lstrip()})
    return records


def score(model: ServedModel, texts: Sequence[str], max_masked_pieces: int) -> list[Record]:
    """Each text's score as `bertlab score-text` gives it: its log-probability under a
    left-to-right model, its pseudo-log-likelihood under a masked one (one forward pass per
    piece, hence at most `max_masked_pieces` pieces per text there), in nats.

    Returns:
        Per text: `{"kind", "total", "perplexity", "pieces", "log_probs", "is_all_unknown"}`.

    Raises:
        ValueError: a text without pieces, one longer than the model reads, or, for a masked
            model, one of more than `max_masked_pieces` pieces.
    """
    if not model.is_causal:
        encoded = model.tokenizer(list(texts), truncation=False)["input_ids"]
        for index, ids in enumerate(encoded):
            num_pieces = len(ids) - NUM_SPECIAL_TOKENS_SINGLE
            if num_pieces > max_masked_pieces:
                raise ValueError(
                    f"texts[{index}] has {num_pieces} pieces; a masked model scores a text "
                    f"with one forward pass per piece, and this server takes at most "
                    f"{max_masked_pieces} pieces per text for it"
                )
    return [
        {
            "kind": scored.kind,
            "total": scored.total,
            "perplexity": scored.perplexity,
            "pieces": scored.pieces,
            "log_probs": scored.log_probs,
            "is_all_unknown": scored.is_all_unknown,
        }
        for scored in score_texts(model.lm, model.tokenizer, texts, BATCH_SIZE)
    ]


def ranked(records: Sequence[Record]) -> list[Record]:
    """The records of one request, each with its `rank`: 1 for the most probable text; None
    for a text of [UNK]s only, whose score is that of a run of [UNK]s (as `score-text` lists
    it apart)."""
    order = sorted(
        (index for index, record in enumerate(records) if not record["is_all_unknown"]),
        key=lambda index: -records[index]["total"],
    )
    ranks = {index: rank for rank, index in enumerate(order, 1)}
    return [record | {"rank": ranks.get(index)} for index, record in enumerate(records)]
