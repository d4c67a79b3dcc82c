"""Running heads on raw texts: words with character offsets, entity spans, QA spans with scores,
batched fill-mask and every layer's attention; and the queue that batches server requests."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
import torch

from bertlab.apps.serve.queue import BatchingQueue, Overloaded
from bertlab.data.tasks.encoding import split_words
from bertlab.data.tasks.ner import entity_spans
from bertlab.data.tasks.squad import SquadExample
from bertlab.data.tasks.squad_encoding import best_spans, decode_squad, encode_squad
from bertlab.network.bert import BertForPreTraining
from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS, Tokenizer
from bertlab.use.inspection import all_attention_maps, attention_maps, fill_mask, fill_masks

WORDS = "ekeus went to baghdad . who ? ada love ##lace wrote 北 京 人".split()


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer({token: index for index, token in enumerate([*SPECIAL_TOKENS, *WORDS])})


def test_split_words_gives_character_spans_as_bert_splits_words(tokenizer):
    text = "Ekeus  went to Baghdad."
    spans = split_words(text, tokenizer)
    assert [text[start:end] for start, end in spans] == ["Ekeus", "went", "to", "Baghdad", "."]
    assert spans[1] == (7, 11)
    assert split_words("北京人", tokenizer) == [(0, 1), (1, 2), (2, 3)]  # a word per ideograph
    assert split_words("Adalovelace", tokenizer) == [(0, 11)]  # several pieces, one word
    assert split_words(" \t", tokenizer) == []


def test_entity_spans_read_bio_and_bmes_tags_as_conlleval():
    assert entity_spans(["B-PER", "I-PER", "O", "S-LOC", "I-ORG"]) == [
        ("PER", 0, 2),
        ("LOC", 3, 4),
        ("ORG", 4, 5),
    ]
    assert entity_spans(["B-ORG", "M-ORG", "E-ORG", "S-ORG"]) == [("ORG", 0, 3), ("ORG", 3, 4)]
    assert entity_spans(["I-LOC", "I-LOC", "I-PER"]) == [("LOC", 0, 2), ("PER", 2, 3)]
    assert entity_spans(["O", "O"]) == []
    with pytest.raises(ValueError, match="not O or"):
        entity_spans(["PERSON"])


def test_best_spans_give_decode_squads_answers_with_their_scores(tokenizer):
    context = "Ada  LoveLace wrote"
    examples = [SquadExample("q1", "who", context, ()), SquadExample("q2", "who", "who", ())]
    features = encode_squad(examples, tokenizer, 32, 8, 8)
    starts = [np.zeros(len(feature.input_ids)) for feature in features]
    ends = [np.zeros(len(feature.input_ids)) for feature in features]
    starts[0][3], ends[0][5] = 4.0, 3.0  # "ada" .. "##lace"
    found = best_spans(features, starts, ends, len(examples))
    assert found[0] == (7.0, (0, 13))
    assert context[0:13] == "Ada  LoveLace"
    assert decode_squad(features, starts, ends, examples)["q1"] == "Ada  LoveLace"
    with pytest.raises(ValueError, match="features but"):
        best_spans(features, starts[:1], ends, len(examples))


def test_fill_masks_in_one_batch_equal_fill_mask_one_text_at_a_time(tokenizer, tiny_config):
    torch.manual_seed(0)
    config = tiny_config.replace(vocab_size=tokenizer.vocab_size)
    model = BertForPreTraining(config).eval()
    texts = ["ekeus [MASK] to baghdad .", "[MASK] ?", "ada [MASK] wrote [MASK] 北 京"]
    batched = fill_masks(model, tokenizer, texts, top_k=4)
    for text, predictions in zip(texts, batched, strict=True):
        alone = fill_mask(model, tokenizer, text, top_k=4)
        assert [p.position for p in predictions] == [p.position for p in alone]
        for got, expected in zip(predictions, alone, strict=True):
            assert got.tokens == expected.tokens
            assert got.probabilities == pytest.approx(expected.probabilities, abs=1e-6)
    with pytest.raises(ValueError, match="has no \\[MASK\\]"):
        fill_masks(model, tokenizer, ["ekeus [MASK]", "who ?"])
    assert fill_masks(model, tokenizer, []) == []


def test_all_attention_maps_hold_each_layers_map(tokenizer, tiny_config):
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config.replace(vocab_size=tokenizer.vocab_size)).bert.eval()
    pieces, maps = all_attention_maps(model, tokenizer, "ada wrote")
    assert pieces == ["[CLS]", "ada", "wrote", "[SEP]"]
    assert maps.shape == (2, 4, 4, 4)  # (layers, N, L, L)
    for layer in (1, 2, -1):
        torch.testing.assert_close(
            attention_maps(model, tokenizer, "ada wrote", layer)[1],
            maps[layer - 1 if layer > 0 else layer],
        )
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 4, 4))


# --- the server's queue ---------------------------------------------------------------------------


def test_waiting_requests_of_one_kind_run_as_one_batch_in_order():
    calls: list[list[str]] = []
    release = threading.Event()

    def run(inputs: list[str]) -> list[str]:
        release.wait(5)
        calls.append(list(inputs))
        return [text.upper() for text in inputs]

    async def scenario():
        queue = BatchingQueue(workers=1, max_pending=10, max_batch_texts=4)
        queue.start()
        first = asyncio.create_task(queue.submit("a", run, ["x"]))  # runs alone, held
        await asyncio.sleep(0.05)
        later = [asyncio.create_task(queue.submit("a", run, [f"t{i}"])) for i in range(5)]
        other = asyncio.create_task(queue.submit("b", run, ["other"]))
        await asyncio.sleep(0.05)
        release.set()
        results = await asyncio.gather(first, *later, other)
        await queue.stop()
        return results, queue.batch_sizes

    results, sizes = asyncio.run(scenario())
    assert results == [["X"], ["T0"], ["T1"], ["T2"], ["T3"], ["T4"], ["OTHER"]]
    assert calls == [["x"], ["t0", "t1", "t2", "t3"], ["t4"], ["other"]]  # oldest first
    assert sizes == {1: 3, 4: 1}


def test_a_bad_input_fails_only_its_own_request():
    def run(inputs: list[str]) -> list[str]:
        if "bad" in inputs:
            raise ValueError("bad input")
        return inputs

    async def scenario():
        queue = BatchingQueue(workers=1, max_pending=10, max_batch_texts=8)
        queue.start()
        jobs = [queue.submit("k", run, [text]) for text in ("a", "bad", "c")]
        results = await asyncio.gather(*jobs, return_exceptions=True)
        await queue.stop()
        return results

    good, bad, other = asyncio.run(scenario())
    assert good == ["a"] and other == ["c"]
    assert isinstance(bad, ValueError)


def test_a_full_queue_refuses_at_once():
    release = threading.Event()

    def run(inputs: list[str]) -> list[str]:
        release.wait(5)
        return inputs

    async def scenario():
        queue = BatchingQueue(workers=1, max_pending=2, max_batch_texts=8)
        queue.start()
        held = [asyncio.create_task(queue.submit("k", run, [str(i)])) for i in range(2)]
        await asyncio.sleep(0.05)
        with pytest.raises(Overloaded, match="at most 2"):
            await queue.submit("k", run, ["one too many"])
        release.set()
        results = await asyncio.gather(*held)
        assert await queue.submit("k", run, ["again"]) == ["again"]  # drained: served again
        await queue.stop()
        return results

    assert asyncio.run(scenario()) == [["0"], ["1"]]
