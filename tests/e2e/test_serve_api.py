"""`bertlab serve`'s JSON API on a live loopback server: every endpoint answers what the same
call through the Python API gives, and bad requests get a 4xx with a message while the server
keeps serving."""

# ruff: noqa: E402
from __future__ import annotations

import http.client
import io
import json
import logging
import urllib.error
import urllib.parse
import urllib.request

import pytest
import torch

import bertlab

# The web app's packages are optional (bertlab.core.optional): without them this file is skipped,
# before the imports below (hence E402) that need them.
pytest.importorskip("fastapi", reason="`bertlab serve` needs fastapi, which is not installed")

from fontTools.ttLib import TTCollection, TTFont

from bertlab.apps.serve import fonts
from bertlab.apps.serve.api import create_app
from bertlab.apps.serve.fonts import CJK_FONT_CACHE_CONTROL, CJK_FONT_ROUTE
from bertlab.apps.serve.models import CAPABILITIES
from bertlab.apps.serve.server import allowed_hosts, load_models
from bertlab.core.finetune_config import TaskDataConfig
from bertlab.data.tasks.classification import ColumnSpec, Example
from bertlab.data.tasks.encoding import split_words
from bertlab.data.tasks.ner import TaggedSentence, entity_spans
from bertlab.data.tasks.squad import SquadExample
from bertlab.network.bert import BertModel
from bertlab.network.heads import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertlab.task_families import make_task, run_task
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.pretraining.objectives import OBJECTIVES
from bertlab.use.feature_options import POOLINGS
from bertlab.use.inspection import (
    PACKAGED_CJK_FONT,
    all_attention_maps,
    fill_mask,
    load_for_fill_mask,
    load_with_lm_head,
    packaged_cjk_font_file,
)
from bertlab.use.language_model import LOG_PROBABILITY, PSEUDO_LOG_LIKELIHOOD, generate, score_texts

REVIEW = "Great phone, long battery life."
NER_TEXT = "U.N. official Ekeus heads for Baghdad."
CONTEXT = "Denver beat Carolina 24-10 in Santa Clara. Denver won its third title."


@pytest.fixture(scope="module")
def base_url(serve_models, start_server) -> str:
    models = load_models(list(serve_models.items()))
    return start_server(create_app(models, allowed_hosts=allowed_hosts("127.0.0.1")))


def call(url: str, body: object = None, raw: bytes | None = None, headers=None):
    """(status, decoded JSON answer) of a GET (no body) or a POST."""
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers=headers or {})
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def post(base_url: str, model: str, task: str, body: object):
    return call(f"{base_url}/api/models/{model}/{task}", body)


# --- happy paths equal the Python API -------------------------------------------------------------


def test_models_lists_each_models_capabilities_and_the_limits(base_url):
    status, answer = call(f"{base_url}/api/models")
    assert status == 200
    capabilities = {model["name"]: model["capabilities"] for model in answer["models"]}
    assert capabilities == {
        "mlm": ["fill-mask", "score", "attention", "embed"],
        "clm": ["generate", "score", "attention", "embed"],
        "sentiment": ["classify", "attention", "embed"],
        "stsb": ["classify", "attention", "embed"],
        "ner": ["tag", "attention", "embed"],
        "qa": ["answer", "attention", "embed"],
    }
    sentiment = next(model for model in answer["models"] if model["name"] == "sentiment")
    assert sentiment["labels"] == ["negative", "neutral", "positive"]
    assert answer["limits"]["max_texts"] == 32
    assert answer["limits"]["max_new_tokens"] == 128
    causal = {model["name"]: model["is_causal"] for model in answer["models"]}
    assert causal == {name: name == "clm" for name in capabilities}
    assert "directory" not in json.dumps(answer) and "/tmp" not in json.dumps(answer)


def test_fill_mask_equals_the_python_api(base_url, serve_models):
    texts = ["great [MASK] , long battery life .", "[MASK] phone [MASK] ."]
    status, answer = post(base_url, "mlm", "fill-mask", {"texts": texts, "top_k": 3})
    assert status == 200
    model, tokenizer = load_for_fill_mask(serve_models["mlm"])
    for text, result in zip(texts, answer["results"], strict=True):
        expected = fill_mask(model, tokenizer, text, top_k=3)
        assert [mask["position"] for mask in result["masks"]] == [p.position for p in expected]
        for mask, prediction in zip(result["masks"], expected, strict=True):
            assert mask["tokens"] == prediction.tokens
            assert mask["probabilities"] == pytest.approx(prediction.probabilities, abs=1e-6)


def test_what_a_language_model_can_do_is_what_its_card_says(base_url):
    """One declaration of a pre-trained model's uses (each objective's `uses`, its card's list):
    the server offers a masked model's and a causal model's what their objectives' entries
    name, in the page's order, and nothing that no entry names."""
    models = {model["name"]: model for model in call(f"{base_url}/api/models")[1]["models"]}
    for name, objective in (("mlm", "mlm"), ("clm", "clm")):
        head_uses = OBJECTIVES[objective].uses.head_uses
        assert set(head_uses) <= set(CAPABILITIES)
        assert [use for use in models[name]["capabilities"] if use in head_uses] == [
            use for use in CAPABILITIES if use in head_uses
        ]
        assert len(models[name]["capabilities"]) == len(head_uses) + 2  # attention, embed


def test_generate_equals_bertlab_generate_and_repeats_with_its_seed(base_url, serve_models):
    prompts = ["great phone", "screen cracked"]
    body = {"texts": prompts, "max_new_tokens": 6, "seed": 3}
    status, answer = post(base_url, "clm", "generate", body)
    assert status == 200, answer
    model, tokenizer = load_with_lm_head(serve_models["clm"])
    for prompt, result in zip(prompts, answer["results"], strict=True):
        assert result["text"] == generate(model, tokenizer, prompt, max_new_tokens=6, seed=3)
        text, continuation = result["text"], result["continuation"]
        assert (
            text.endswith(continuation) and text[: len(text) - len(continuation)].strip() == prompt
        )
    assert post(base_url, "clm", "generate", body) == (200, answer)  # the same seed, the same
    _, other = post(base_url, "clm", "generate", body | {"seed": 4})
    assert [r["text"] for r in other["results"]] != [r["text"] for r in answer["results"]]
    # a prompt's text does not depend on the prompts beside it
    _, alone = post(base_url, "clm", "generate", body | {"texts": prompts[1:]})
    assert alone["results"] == answer["results"][1:]


@pytest.mark.parametrize(
    ("name", "kind"), [("clm", LOG_PROBABILITY), ("mlm", PSEUDO_LOG_LIKELIHOOD)]
)
def test_score_equals_bertlab_score_text_and_ranks_the_texts(base_url, serve_models, name, kind):
    texts = ["great phone , long battery life .", "life battery long , phone great .", "fine"]
    status, answer = post(base_url, name, "score", {"texts": [*texts, "☃ ☃"]})
    assert status == 200, answer
    model, tokenizer = load_with_lm_head(serve_models[name])
    expected = score_texts(model, tokenizer, texts)
    results, unknown = answer["results"][:-1], answer["results"][-1]
    for result, scored in zip(results, expected, strict=True):
        assert result["kind"] == scored.kind == kind
        assert result["pieces"] == scored.pieces
        assert result["total"] == pytest.approx(scored.total, abs=1e-4)
        assert result["log_probs"] == pytest.approx(scored.log_probs, abs=1e-4)
        assert result["perplexity"] == pytest.approx(scored.perplexity, rel=1e-4)
    by_rank = sorted(results, key=lambda result: result["rank"])
    assert [result["rank"] for result in by_rank] == [1, 2, 3]
    assert [result["total"] for result in by_rank] == sorted(
        (result["total"] for result in results), reverse=True
    )
    # a text of [UNK]s only is scored as a run of [UNK]s: listed apart, not ranked
    assert unknown["is_all_unknown"] and unknown["rank"] is None


def test_fill_mask_on_a_causal_model_names_what_it_offers(base_url):
    status, answer = post(base_url, "clm", "fill-mask", {"texts": ["great [MASK] ."]})
    assert status == 422
    assert answer["detail"] == (
        "model 'clm' cannot fill-mask: that needs the masked-LM head of a pre-trained model "
        "that reads both sides of a [MASK], and it is a left-to-right (causal) "
        "BertForPreTraining; it can: generate, score, attention, embed"
    )


def test_classify_equals_the_python_api(base_url, serve_models):
    texts = [REVIEW, "Screen cracked, fragile build.", "Fine value for money"]
    status, answer = post(base_url, "sentiment", "classify", {"texts": texts})
    assert status == 200
    directory = serve_models["sentiment"]
    model = BertForSequenceClassification.from_pretrained(directory).eval()
    tokenizer = Tokenizer.from_pretrained(directory)
    task = make_task("classification", ColumnSpec("review", label="sentiment"))
    labels = run_task(task, model, tokenizer, [Example(text) for text in texts], 8, "fp32")
    with torch.no_grad():
        logits = [model(torch.tensor([tokenizer(text)["input_ids"]])).logits[0] for text in texts]
    for result, label, row in zip(answer["results"], labels, logits, strict=True):
        row = row.softmax(-1)
        assert result["label"] == label
        shown = {item["label"]: item["probability"] for item in result["probabilities"]}
        assert shown == pytest.approx(
            dict(zip(model.id2label.values(), row.tolist(), strict=True)), abs=1e-5
        )
        assert result["score"] == max(shown.values())


@pytest.fixture(scope="module")
def sst2_url(serve_models, start_server, tmp_path_factory) -> str:
    """A server on a random SST-2 head, whose labels "0" and "1" the task names."""
    from bertlab.training.finetuning.finetune import write_task_model

    (sentiment,) = load_models([("sentiment", serve_models["sentiment"])])
    task = make_task("sst2")
    directory = tmp_path_factory.mktemp("sst2_model")
    head = task.new_head(sentiment.encoder.config, task.spec.labels)
    write_task_model(directory, head, sentiment.tokenizer, task)
    return start_server(create_app(load_models([("sst2", directory)])))


def test_classify_names_the_labels_where_the_task_names_them(sst2_url, base_url):
    """SST-2's labels read "0"/"1" in the API and on the page (issue 51, item 5)."""
    names = {"0": "negative", "1": "positive"}
    status, answer = call(f"{sst2_url}/api/models")
    assert status == 200
    assert answer["models"][0]["labels"] == ["0", "1"]
    assert answer["models"][0]["label_names"] == ["negative", "positive"]
    status, answer = post(sst2_url, "sst2", "classify", {"texts": [REVIEW, "dull"]})
    assert status == 200
    for result in answer["results"]:
        assert result["name"] == names[result["label"]]
        assert [item["name"] for item in result["probabilities"]] == [
            names[item["label"]] for item in result["probabilities"]
        ]
    status, answer = post(base_url, "sentiment", "classify", {"texts": [REVIEW]})
    assert answer["results"][0]["name"] is None  # a user's labels are shown as they are
    sentiment = next(
        m for m in call(f"{base_url}/api/models")[1]["models"] if m["name"] == "sentiment"
    )
    assert sentiment["label_names"] is None


def test_pair_regression_gives_the_score_of_the_python_api(base_url, serve_models):
    body = {"texts": ["A man plays a guitar."], "text_pairs": ["A man plays music."]}
    status, answer = post(base_url, "stsb", "classify", body)
    assert status == 200
    directory = serve_models["stsb"]
    model = BertForSequenceClassification.from_pretrained(directory).eval()
    (score,) = run_task(
        make_task("stsb"),
        model,
        Tokenizer.from_pretrained(directory),
        [Example(body["texts"][0], body["text_pairs"][0])],
        8,
        "fp32",
    )
    assert answer["results"][0]["label"] is None
    assert answer["results"][0]["score"] == pytest.approx(score, abs=1e-5)
    status, answer = post(base_url, "stsb", "classify", {"texts": ["no pair"]})
    assert status == 422 and "text_pairs" in answer["detail"]


def test_tag_equals_the_python_api_with_character_offsets(base_url, serve_models):
    status, answer = post(base_url, "ner", "tag", {"texts": [NER_TEXT]})
    assert status == 200
    directory = serve_models["ner"]
    model = BertForTokenClassification.from_pretrained(directory).eval()
    tokenizer = Tokenizer.from_pretrained(directory)
    spans = split_words(NER_TEXT, tokenizer)
    words = tuple(NER_TEXT[start:end] for start, end in spans)
    sentence = TaggedSentence(words, ("O",) * len(words))
    (tags,) = run_task(make_task("conll2003"), model, tokenizer, [sentence], 8, "fp32")
    result = answer["results"][0]
    assert [word["text"] for word in result["words"]] == list(words)
    assert [word["tag"] for word in result["words"]] == tags
    expected = [
        (kind, spans[first][0], spans[last - 1][1]) for kind, first, last in entity_spans(tags)
    ]
    assert [(e["type"], e["start"], e["end"]) for e in result["entities"]] == expected
    assert expected, "the random tagger should find some entity in this sentence"
    for entity in result["entities"]:
        assert NER_TEXT[entity["start"] : entity["end"]] == entity["text"]


def test_answer_equals_the_python_api_and_is_marked_in_the_context(base_url, serve_models):
    questions = ["Who won?", "Where was the game?"]
    inputs = [{"question": question, "context": CONTEXT} for question in questions]
    status, answer = post(base_url, "qa", "answer", {"inputs": inputs})
    assert status == 200
    directory = serve_models["qa"]
    task = make_task("squad", data=TaskDataConfig(squad_max_seq_length=64))
    examples = [SquadExample(str(i), q, CONTEXT, ()) for i, q in enumerate(questions)]
    model = BertForQuestionAnswering.from_pretrained(directory).eval()
    expected = run_task(task, model, Tokenizer.from_pretrained(directory), examples, 8, "fp32")
    for index, result in enumerate(answer["results"]):
        assert result["answer"] == expected[str(index)] != ""
        assert CONTEXT[result["start"] : result["end"]] == result["answer"]
        assert isinstance(result["score"], float)


@pytest.mark.parametrize("layer", [1, -1, None])
def test_attention_equals_the_python_api(base_url, serve_models, layer):
    text = "great phone , long battery life ."
    status, answer = post(base_url, "ner", "attention", {"text": text, "layer": layer})
    assert status == 200
    directory = serve_models["ner"]
    encoder = BertModel.from_pretrained(directory).eval()
    pieces, maps = all_attention_maps(encoder, Tokenizer.from_pretrained(directory), text)
    assert answer["tokens"] == pieces
    expected = maps if layer is None else maps[[layer - 1 if layer > 0 else layer]]
    assert answer["layers"] == ([1, 2] if layer is None else [1 if layer == 1 else 2])
    torch.testing.assert_close(torch.tensor(answer["attentions"]), expected, rtol=0, atol=1e-6)


@pytest.mark.parametrize("layer", [2, None])
def test_attention_over_a_pair_equals_the_python_api(base_url, serve_models, layer):
    text, pair = "great phone .", "long battery life ."
    body = {"text": text, "pair": pair, "layer": layer}
    status, answer = post(base_url, "sentiment", "attention", body)
    assert status == 200
    directory = serve_models["sentiment"]
    encoder = BertModel.from_pretrained(directory).eval()
    tokenizer = Tokenizer.from_pretrained(directory)
    pieces, maps = all_attention_maps(encoder, tokenizer, text, pair)
    assert answer["tokens"] == pieces and pieces.count("[SEP]") == 2
    first_b = pieces.index("[SEP]") + 1
    assert answer["segments"] == [0] * first_b + [1] * (len(pieces) - first_b)
    expected = maps if layer is None else maps[[layer - 1]]
    torch.testing.assert_close(torch.tensor(answer["attentions"]), expected, rtol=0, atol=1e-6)


def test_attention_refuses_a_pair_longer_than_it_shows_in_one_line(base_url):
    body = {"text": "great phone .", "pair": " ".join(["phone"] * 130)}
    status, answer = post(base_url, "sentiment", "attention", body)
    assert status == 422
    assert answer["detail"] == (
        "the pair has 136 pieces with [CLS] and [SEP]; attention is shown for at most 128"
    )
    status, answer = post(base_url, "sentiment", "attention", {"text": "great", "pair": " "})
    assert (status, answer["detail"]) == (422, "pair[0] is empty (only whitespace)")


@pytest.mark.parametrize("pooling", ["pooler", "mean", "pieces"])
def test_embed_equals_the_python_api(base_url, serve_models, pooling):
    texts = ["great phone .", "screen cracked , fragile build ."]
    status, answer = post(base_url, "sentiment", "embed", {"texts": texts, "pooling": pooling})
    assert status == 200 and answer["pooling"] == pooling
    directory = serve_models["sentiment"]
    encoder = BertModel.from_pretrained(directory).eval()
    tokenizer = Tokenizer.from_pretrained(directory)
    for text, result in zip(texts, answer["results"], strict=True):
        ids = tokenizer(text)["input_ids"]
        assert result["tokens"] == tokenizer.convert_ids_to_tokens(ids)
        with torch.no_grad():
            output = encoder(torch.tensor([ids]))
        expected = {
            "pooler": ("vector", output.pooler_output[0]),
            "mean": ("vector", output.last_hidden_state[0].mean(0)),
            "pieces": ("vectors", output.last_hidden_state[0]),
        }[pooling]
        got = torch.tensor(result[expected[0]])
        torch.testing.assert_close(got, expected[1], rtol=0, atol=1e-5)


@pytest.mark.parametrize("pooling", POOLINGS)
def test_embed_takes_every_name_of_bertlab_embed_as_the_python_api_does(
    base_url, serve_models, pooling
):
    """One pooling vocabulary: the request model takes `feature_options.POOLINGS`, and the
    vectors are `PretrainedBert.embed`'s."""
    texts = ["great phone .", "screen cracked , fragile build ."]
    status, answer = post(base_url, "sentiment", "embed", {"texts": texts, "pooling": pooling})
    assert status == 200, answer
    expected = bertlab.load(serve_models["sentiment"]).embed(texts, pooling=pooling)
    for index, result in enumerate(answer["results"]):
        got = result["vector"] if result["vector"] is not None else result["vectors"]
        torch.testing.assert_close(torch.tensor(got), expected[index], rtol=0, atol=1e-5)


def test_concurrent_requests_get_their_own_answers(base_url):
    """Requests that arrive together may share a forward pass; each still gets its own answer,
    equal to what it gets alone."""
    from concurrent.futures import ThreadPoolExecutor

    texts = [f"{REVIEW} {'long ' * count}battery" for count in range(12)]
    alone = [post(base_url, "sentiment", "classify", {"texts": [t]})[1] for t in texts]
    with ThreadPoolExecutor(12) as pool:
        together = list(
            pool.map(lambda t: post(base_url, "sentiment", "classify", {"texts": [t]})[1], texts)
        )
    for single, batched in zip(alone, together, strict=True):
        assert batched["results"][0]["label"] == single["results"][0]["label"]
        assert batched["results"][0]["score"] == pytest.approx(
            single["results"][0]["score"], abs=1e-5
        )


def test_a_temperature_near_zero_is_answered_and_an_infinite_one_refused(base_url, serve_models):
    """1e-40 was a 500 (softmax of inf); a number too large for a float is inf in JSON: 422."""
    body = {"texts": ["great phone"], "max_new_tokens": 6, "temperature": 1e-40}
    status, answer = post(base_url, "clm", "generate", body)
    assert status == 200, answer
    model, tokenizer = load_with_lm_head(serve_models["clm"])
    greedy = generate(model, tokenizer, "great phone", max_new_tokens=6, top_k=1)
    assert answer["results"][0]["text"] == greedy
    raw = b'{"texts": ["great phone"], "temperature": 1e999}'
    status, answer = call(f"{base_url}/api/models/clm/generate", raw=raw)
    assert status == 422 and "temperature: Input should be a finite number" in answer["detail"]


# --- bad requests: 4xx with a message, and the server keeps serving -------------------------------

BAD_REQUESTS = [
    # (model, task, body, status, part of the message)
    ("mlm", "fill-mask", {"texts": [""]}, 422, "at least 1 character"),
    ("mlm", "fill-mask", {"texts": ["   "]}, 422, "texts[0] is empty"),
    ("mlm", "fill-mask", {"texts": ["[MASK] " + "a" * 4000]}, 422, "at most 4000"),
    ("mlm", "fill-mask", {"texts": ["[MASK]"] * 33}, 422, "at most 32"),
    ("mlm", "fill-mask", {"texts": []}, 422, "texts: List should have at least 1 item"),
    ("mlm", "fill-mask", {"texts": "a [MASK]"}, 422, "texts: Input should be a valid list"),
    ("mlm", "fill-mask", {"texts": [5]}, 422, "texts.0: Input should be a valid string"),
    ("mlm", "fill-mask", {"texts": ["[MASK]"], "top_k": "five"}, 422, "top_k"),
    ("mlm", "fill-mask", {"texts": ["[MASK]"], "top_k": 51}, 422, "top_k is at most 50"),
    ("mlm", "fill-mask", {}, 422, "texts: Field required"),
    ("mlm", "fill-mask", {"text": "a [MASK]"}, 422, "text: Extra inputs are not permitted"),
    ("mlm", "fill-mask", {"texts": ["no mask here"]}, 422, "has no [MASK]"),
    ("mlm", "fill-mask", [1, 2], 422, "Input should be a valid dictionary"),
    ("mlm", "classify", {"texts": ["a"]}, 422, "cannot classify"),
    ("sentiment", "fill-mask", {"texts": ["[MASK]"]}, 422, "masked-LM head"),
    ("clm", "fill-mask", {"texts": ["a [MASK]"]}, 422, "it can: generate, score, attention"),
    ("mlm", "generate", {"texts": ["a"]}, 422, "cannot generate: that needs a left-to-right"),
    ("clm", "generate", {"texts": ["a"], "max_new_tokens": 129}, 422, "at most 128, got 129"),
    ("clm", "generate", {"texts": ["a"], "temperature": 0}, 422, "temperature: Input should"),
    ("clm", "generate", {"texts": ["a"], "top_k": 0}, 422, "top_k: Input should"),
    ("clm", "generate", {"texts": ["a"], "seed": -1}, 422, "seed: Input should be greater"),
    ("clm", "generate", {"texts": ["phone " * 130]}, 422, "nothing could follow it"),
    ("sentiment", "score", {"texts": ["a"]}, 422, "cannot score"),
    ("clm", "score", {"texts": ["phone " * 130]}, 422, "more than the 126"),
    ("mlm", "score", {"texts": ["phone " * 129]}, 422, "at most 128 pieces per text"),
    ("clm", "embed", {"texts": ["a"], "pooling": "pooler"}, 422, "pooler"),
    ("ner", "answer", {"inputs": [{"question": "a", "context": "b"}]}, 422, "cannot answer"),
    ("nobody", "tag", {"texts": ["a"]}, 404, "no model named 'nobody'"),
    ("qa", "answer", {"inputs": [{"question": "who?"}]}, 422, "inputs.0.context: Field required"),
    ("sentiment", "classify", {"texts": ["a"], "text_pairs": ["b"]}, 422, "single texts"),
    ("stsb", "classify", {"texts": ["a", "b"], "text_pairs": ["c"]}, 422, "2 texts but 1"),
    ("ner", "attention", {"text": "phone", "layer": 3}, 422, "layers 1..2, not 3"),
    ("ner", "attention", {"text": "phone " * 200}, 422, "at most 128"),
    ("ner", "embed", {"texts": ["a"], "pooling": "pooler"}, 422, "no trained pooler"),
    ("ner", "embed", {"texts": ["a"], "pooling": "max"}, 422, "pooling: Input should be"),
]


@pytest.mark.parametrize(("model", "task", "body", "status", "message"), BAD_REQUESTS)
def test_bad_requests_get_a_4xx_with_a_message(base_url, model, task, body, status, message):
    got, answer = post(base_url, model, task, body)
    assert got == status, answer
    assert message in answer["detail"], answer["detail"]
    assert "\n" not in answer["detail"]


@pytest.mark.parametrize(
    ("raw", "status", "message"),
    [
        (b'{"texts": ["caf\xe9 [MASK]"]}', 400, "not UTF-8 (byte 0xe9 at position 15)"),
        (b'{"texts": ["a [MASK]"', 422, "not valid JSON at character 21"),
        (b"", 422, "body: Field required"),
        (b'{"texts": ["' + b"a" * 10_000_000 + b'"]}', 413, "at most 1048576"),
    ],
    ids=["not-utf8", "bad-json", "empty-body", "10-MB"],
)
def test_bodies_that_are_not_json_or_too_big_are_refused(base_url, raw, status, message):
    got, answer = call(f"{base_url}/api/models/mlm/fill-mask", raw=raw)
    assert got == status, answer
    assert message in answer["detail"]


def test_a_streamed_body_is_cut_off_at_the_limit(base_url):
    chunks = (b"x" * 65536 for _ in range(40))  # 2.6 MB without a Content-Length
    request = urllib.request.Request(
        f"{base_url}/api/models/mlm/fill-mask",
        data=chunks,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=60)
    assert refused.value.code == 413
    assert "at least" in json.loads(refused.value.read())["detail"]


def test_no_file_path_is_reachable_and_other_hosts_are_refused(base_url):
    tricks = [
        ("POST", "/api/models/..%2F..%2Fsettings/tag"),
        ("GET", "/static/../settings.py"),
        ("GET", "/static/%2e%2e/api.py"),
        ("GET", "/static/..%2Fapi.py"),
    ]
    for method, path in tricks:
        data = b'{"texts": ["a"]}' if method == "POST" else None
        request = urllib.request.Request(base_url + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 404, path
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(
            urllib.request.Request(base_url + "/api/models", headers={"Host": "evil.example"})
        )
    assert refused.value.code == 400
    # the JSON error of every refusal, not starlette's plain text (issue 51, item 17)
    assert refused.value.headers["Content-Type"] == "application/json"
    detail = json.loads(refused.value.read())["detail"]
    assert "Host header 'evil.example' is not this server's" in detail
    status, _ = call(f"{base_url}/api/models", headers={"Host": "LocalHost:8000"})
    assert status == 200


@pytest.mark.parametrize(
    ("content_type", "named"),
    [
        ("application/x-www-form-urlencoded", "came as application/x-www-form-urlencoded"),
        ("text/plain", "came as text/plain"),
        (None, "came without a Content-Type"),
    ],
    ids=["form", "text", "none"],
)
def test_json_sent_as_another_type_is_refused_naming_the_type(base_url, content_type, named):
    """`curl -d '{...}'` sends a form type; the answer was a pydantic message that named no
    type (issue 51, item 17). JSON is read only when sent as JSON: the types a page elsewhere
    may send without a preflight stay refused."""
    # http.client, not urllib, which adds the form type to a body sent without a type
    connection = http.client.HTTPConnection(urllib.parse.urlsplit(base_url).netloc, timeout=10)
    headers = {} if content_type is None else {"Content-Type": content_type}
    connection.request("POST", "/api/models/mlm/fill-mask", b'{"texts": ["a [MASK]"]}', headers)
    response = connection.getresponse()
    assert response.status == 415
    detail = json.loads(response.read())["detail"]
    connection.close()
    assert named in detail and "Content-Type: application/json" in detail
    headers = {"Content-Type": "application/json; charset=utf-8"}
    status, _ = call(f"{base_url}/api/models/mlm/fill-mask", {"texts": ["a [MASK]"]}, None, headers)
    assert status == 200


def test_the_server_keeps_serving_after_every_bad_request(base_url):
    for model, task, body, _, _ in BAD_REQUESTS:
        post(base_url, model, task, body)
    status, answer = post(base_url, "sentiment", "classify", {"texts": [REVIEW]})
    assert status == 200 and answer["results"][0]["label"] in ("negative", "neutral", "positive")
    assert call(f"{base_url}/api/health")[1]["status"] == "ok"


def test_the_page_and_the_openapi_description_are_served(base_url):
    with urllib.request.urlopen(base_url + "/", timeout=10) as response:
        page = response.read().decode()
        policy = response.headers["Content-Security-Policy"]
    assert "/static/app.js" in page and "://" not in page  # nothing from elsewhere
    assert "default-src 'self'" in policy
    status, spec = call(f"{base_url}/openapi.json")
    assert status == 200
    paths = set(spec["paths"])
    for task in CAPABILITIES:
        assert f"/api/models/{{name}}/{task}" in paths


def test_the_pages_cjk_font_is_the_sc_face_of_the_packaged_collection(base_url):
    """The font the page falls back on for Chinese: Noto Sans CJK SC copied out of the
    collection bertlab depends on, kept by the browser for a year."""
    with urllib.request.urlopen(base_url + CJK_FONT_ROUTE, timeout=60) as response:
        body = response.read()
        assert response.headers["Content-Type"] == "font/otf"
        assert response.headers.get_all("Cache-Control") == [CJK_FONT_CACHE_CONTROL]
    font = TTFont(io.BytesIO(body))
    assert font["name"].getDebugName(1) == PACKAGED_CJK_FONT == "Noto Sans CJK SC"
    assert {ord("中"), ord("文"), ord("A")} <= set(font.getBestCmap())
    collection = TTCollection(str(packaged_cjk_font_file()), lazy=True)
    (face,) = [f for f in collection.fonts if f["name"].getDebugName(1) == PACKAGED_CJK_FONT]
    assert font.getGlyphOrder() == face.getGlyphOrder()
    assert font.getBestCmap() == face.getBestCmap()


def test_without_the_font_package_the_font_is_a_404_and_the_server_warns(
    serve_models, start_server, monkeypatch, caplog
):
    monkeypatch.setattr(fonts, "packaged_cjk_font_file", lambda: None)
    with caplog.at_level(logging.WARNING, logger="bertlab.apps.serve.api"):
        app = create_app(load_models([("mlm", serve_models["mlm"])]))
    assert fonts.MISSING_CJK_FONT in caplog.messages
    status, answer = call(start_server(app) + CJK_FONT_ROUTE)
    assert (status, answer) == (404, {"detail": fonts.MISSING_CJK_FONT})
