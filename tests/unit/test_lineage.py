"""The lineage experiment's parts: the sense probes' figures, the shipped sense-labelled
sentences and their rules, the FLOP counts, the heads over an arm's
layers, the config's refusals and the report drawn from a results.json."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bertlab.apps.experiments import lineage_probes
from bertlab.apps.experiments.lineage_config import LineageConfig
from bertlab.apps.experiments.lineage_heads import (
    HEAD_LOG_FILE,
    HeadTraining,
    LayerClassifier,
    LayerTagger,
    MixedLayers,
    _unfrozen_groups,
    train_head,
)
from bertlab.apps.experiments.lineage_models import (
    LayerReader,
    VectorLayers,
    training_flops,
    word2vec_flops,
)
from bertlab.apps.experiments.lineage_options import ARM_NAMES, PROBES
from bertlab.apps.experiments.lineage_probes import (
    chance_accuracy,
    nearest_neighbour_accuracy,
    read_senses,
    separation,
    within_minus_across,
)
from bertlab.apps.experiments.lineage_report import report_lines
from bertlab.apps.flows import read_one_class
from bertlab.core.config import BertConfig
from bertlab.core.finetune_config import TaskDataConfig
from bertlab.core.lstm_config import AwdLstmConfig, ElmoConfig, NnlmConfig
from bertlab.network.heads import TaskOutput
from bertlab.task_families import make_task
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.finetuning.finetune import read_task_data

TOOL = Path(__file__).resolve().parents[2] / "tools" / "make_sense_sentences.py"


# --- the probes' figures --------------------------------------------------------------------------


def test_within_minus_across_is_the_difference_of_the_pair_means():
    # Four unit vectors at angles 0, 0, 90, 180 degrees: senses a, a, b, b.
    vectors = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    senses = np.array(["a", "a", "b", "b"])
    cosines = vectors @ vectors.T
    # within: (0,1) = 1, (2,3) = 0 -> 0.5; across: (0,2) 0, (0,3) -1, (1,2) 0, (1,3) -1 -> -0.5
    assert within_minus_across(cosines, senses, np.arange(4)) == pytest.approx(1.0)
    # a sentence drawn twice is never paired with its own copy
    # within: only (2,3) = 0; across: the four pairs of a and b, mean -0.5
    assert within_minus_across(cosines, senses, np.array([0, 0, 2, 3])) == pytest.approx(0.5)


def test_one_vector_in_every_sentence_separates_nothing_and_scores_chance():
    senses = np.array(["a"] * 5 + ["b"] * 7)
    static = np.tile(np.array([[0.3, -1.2, 2.0]]), (12, 1))
    found = separation(static, senses)
    assert found["within_minus_across"] == pytest.approx(0.0, abs=1e-12)
    assert abs(found["low"]) < 1e-12 and abs(found["high"]) < 1e-12
    assert found["nearest_neighbour_accuracy"] == pytest.approx(chance_accuracy(senses))
    assert chance_accuracy(senses) == pytest.approx((5 * 4 + 7 * 6) / (12 * 11))


def test_senses_apart_give_an_interval_above_zero_and_right_neighbours():
    rng = np.random.default_rng(0)
    senses = np.array(["a"] * 20 + ["b"] * 20)
    centres = {"a": np.array([5.0, 0, 0, 0]), "b": np.array([0, 5.0, 0, 0])}
    vectors = np.stack([centres[s] + rng.normal(size=4) for s in senses])
    found = separation(vectors, senses)
    assert found["low"] > 0.3 and found["low"] <= found["within_minus_across"] <= found["high"]
    assert found["nearest_neighbour_accuracy"] == 1.0
    mixed = rng.normal(size=(40, 4))  # no sense structure: the interval holds 0
    found = separation(mixed, senses)
    assert found["low"] < 0 < found["high"]


def test_a_tie_counts_as_the_share_of_the_tied_with_the_same_sense():
    senses = np.array(["a", "a", "b"])
    cosines = np.ones((3, 3))  # every neighbour tied
    assert nearest_neighbour_accuracy(cosines, senses) == pytest.approx((0.5 + 0.5 + 0.0) / 3)


def test_word_vectors_average_the_words_pieces_in_each_layer(task_vocab):
    tokenizer = Tokenizer.from_pretrained(task_vocab)
    table = torch.arange(tokenizer.vocab_size * 2, dtype=torch.float32).view(-1, 2)
    reader = VectorLayers(table, tokenizer.pad_token_id)
    texts = ["the film was good", "good acting , the film"]
    (layer,) = lineage_probes.word_vectors(reader, tokenizer, texts, "film")
    film = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("film"))
    expected = table[film].mean(dim=0).numpy()
    assert np.allclose(layer, np.stack([expected, expected]))


# --- the shipped sentences ------------------------------------------------------------------------


def _tool():
    spec = importlib.util.spec_from_file_location("make_sense_sentences", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("word", list(PROBES))
def test_the_shipped_sentences_are_what_the_rules_label(word):
    tool = _tool()
    (probe,) = [probe for probe in tool.PROBES if probe.word == word]
    rules = {sense: [re.compile(r) for r in found] for sense, found in probe.senses.items()}
    sentences = read_senses(word)
    counts = {sense: sum(s.sense == sense for s in sentences) for sense in rules}
    assert min(counts.values()) >= 20 and set(counts) == {s.sense for s in sentences}
    assert len({s.text for s in sentences}) == len(sentences)
    for sentence in sentences:
        assert re.findall(rf"\b{word}\b", sentence.text, re.IGNORECASE) == [word], sentence
        matched = [
            sense for sense, found in rules.items() if any(p.search(sentence.text) for p in found)
        ]
        assert matched == [sentence.sense], sentence
        assert sentence.source.startswith(probe.corpus + ":")


@pytest.mark.parametrize("word", list(PROBES))
def test_every_shipped_sentence_is_on_its_corpus_line(word, shared_data):
    sentences = read_senses(word)
    path = shared_data / sentences[0].source.rsplit(":", 1)[0]
    wanted = {int(s.source.rsplit(":", 1)[1]): s.text for s in sentences}
    with gzip.open(path, "rt", encoding="utf-8") as file:
        lines = {number: line for number, line in enumerate(file, 1) if number in wanted}
    assert all(text in lines[number] for number, text in wanted.items())


# --- FLOPs ----------------------------------------------------------------------------------------


def _folder(tmp_path: Path, config) -> Path:
    config.to_json_file(tmp_path / "config.json")
    return tmp_path


def test_flops_count_the_weights_each_token_passes_through(tmp_path):
    nnlm = NnlmConfig(vocab_size=100, ngram_order=3, embedding_size=4, hidden_size=8)
    nnlm = nnlm.replace(use_direct_connections=False)
    # (n-1) m h + h V = 2*4*8 + 8*100 = 864 per token, 6 FLOPs each
    assert training_flops(_folder(tmp_path / "n", nnlm), 10, 1.0, 16) == 6 * 864 * 10
    awd = AwdLstmConfig(vocab_size=100, embedding_size=4, hidden_size=8, num_hidden_layers=2)
    # layers 4->8 and 8->4: 4*8*(4+8) + 4*4*(8+4) = 384 + 192; decoder 4*100
    assert training_flops(_folder(tmp_path / "a", awd), 1, 1.0, 16) == 6 * (576 + 400)
    elmo = ElmoConfig(vocab_size=100, lstm_hidden_size=8, projection_size=4, num_hidden_layers=1)
    # one layer per direction: 4*8*(4+4) + 8*4 = 288; two directions; two softmaxes 2*4*100
    assert training_flops(_folder(tmp_path / "e", elmo), 1, 1.0, 16) == 6 * (576 + 800)
    bert = BertConfig(
        vocab_size=100, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=16,
    )  # fmt: skip
    # layers 2*(4*64 + 2*8*16) = 1024; head at 40% of positions 0.4*(64 + 800); attention 6*2*16*8
    expected = 6 * (1024 + 0.4 * 864) + 6 * 2 * 16 * 8
    assert training_flops(_folder(tmp_path / "b", bert), 1, 0.4, 16) == pytest.approx(expected)
    assert word2vec_flops(10, 4, 5, 5) == 6 * 4 * 6 * 6 * 10


# --- the heads ------------------------------------------------------------------------------------


class _TwoLayers(LayerReader):
    """Layers of widths 3 and 5: the first the ids, the second the ids times two."""

    def __init__(self) -> None:
        super().__init__()
        self.widths, self.pad_token_id = (3, 5), 0

    def forward(self, input_ids, attention_mask):
        ids = input_ids.float().unsqueeze(-1)
        return ids.expand(-1, -1, 3), (2 * ids).expand(-1, -1, 5)


def test_the_mix_pads_narrow_layers_with_zeros():
    mix = MixedLayers(_TwoLayers())
    ids = torch.tensor([[1, 2]])
    mixed = mix(ids, torch.ones_like(ids))  # uniform weights: half of each layer
    assert mixed.shape == (1, 2, 5)
    assert torch.allclose(mixed[0, 1], torch.tensor([3.0, 3.0, 3.0, 2.0, 2.0]))


def test_the_tagger_and_the_classifier_read_every_arm_the_same_way():
    ids = torch.tensor([[3, 4, 5], [3, 4, 0]])
    mask = (ids != 0).long()
    tagger = LayerTagger(_TwoLayers(), ["O", "B-PER"])
    labels = torch.tensor([[-100, 1, 0], [-100, 0, -100]])
    output = tagger(ids, mask, labels=labels)
    assert output.logits.shape == (2, 3, 2) and output.loss.requires_grad
    classifier = LayerClassifier(_TwoLayers(), ["0", "1"])
    assert classifier(ids, mask, labels=torch.tensor([0, 1])).logits.shape == (2, 2)
    trainable = [id(p) for p in classifier.parameters() if p.requires_grad]
    assert [id(p) for p in classifier.parameter_groups()[0]] == trainable


def test_gradual_unfreezing_adds_a_group_per_epoch_or_per_share_of_a_short_run():
    ulmfit = HeadTraining(1e-2, epochs=10, gradual_unfreezing=True)
    assert [_unfrozen_groups(ulmfit, 5, epoch, 0, 100) for epoch in (1, 2, 5, 9)] == [1, 2, 5, 5]
    short = HeadTraining(1e-2, epochs=1, gradual_unfreezing=True)
    assert [_unfrozen_groups(short, 5, 1, step, 100) for step in (0, 19, 20, 99)] == [1, 1, 2, 5]
    assert _unfrozen_groups(HeadTraining(1e-3, epochs=1), 5, 1, 0, 100) == 5


class _AlwaysSecond(torch.nn.Module):
    """A head whose logits favour its second label whatever the input."""

    def __init__(self, label_names) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.tensor([0.0, 5.0]))
        self.id2label = dict(enumerate(label_names))
        self.config = type("Config", (), {"pad_token_id": 0})()

    def parameter_groups(self):
        return [[self.bias]]

    def forward(self, input_ids, attention_mask, token_type_ids=None, labels=None):
        logits = self.bias.expand(input_ids.shape[0], 2)
        loss = None if labels is None else torch.nn.functional.cross_entropy(logits, labels)
        return TaskOutput(logits=logits, loss=loss)


def test_a_head_that_learned_one_class_is_recorded_as_fine_tuning_records_it(sst2_files, tmp_path):
    """`train_head` checks the best epoch's dev predictions as bertlab's fine-tuning does, so
    that the report marks a collapsed ELMo or ULMFiT cell like a collapsed BERT one."""
    train, dev, vocab = sst2_files
    task = make_task("sst2", data=TaskDataConfig(max_seq_length=32))
    data = read_task_data(task, train, None, dev_fraction=0.25)
    test = task.read_gold(dev, data.label_names)
    head = _AlwaysSecond(data.label_names)
    run = tmp_path / "run"
    training = HeadTraining(0.0, epochs=2, batch_size=4)  # a rate of 0: it never moves
    scores = train_head(head, task, data, test, Tokenizer.from_pretrained(vocab), training, 1, run)
    second = data.label_names[1]
    share = sum(example.label == second for example in test) / len(test)
    assert scores["accuracy"] == pytest.approx(share)
    collapse = read_one_class(run)
    assert collapse is not None and collapse.label == second
    epochs = json.loads((run / HEAD_LOG_FILE).read_text(encoding="utf-8"))["epochs"]
    assert [epoch["epoch"] for epoch in epochs] == [1, 2] and epochs[0]["train_loss"] > 0


# --- the config -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"arms": ("bert", "nope")}, "arms must be distinct"),
        ({"arms": ()}, "arms must be distinct"),
        ({"tasks": ("mrpc",)}, "unknown task"),
        ({"lang": "zh", "tasks": ("sst2",)}, "unknown task"),
        ({"lang": "zh", "probes": ("play",)}, "no probe 'play' for zh"),
        ({"seeds": (1, 1)}, "seeds must be distinct"),
        ({"budget_minutes": 0}, "budget must be positive"),
        ({"max_examples": 1}, "max_examples"),
    ],
)
def test_the_config_refuses_what_cannot_run(changes, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        LineageConfig(data_dir=tmp_path, out=tmp_path / "out", **changes)


def test_a_network_arm_pre_trains_with_the_same_corpus_vocabulary_and_minutes(tmp_path):
    config = LineageConfig(data_dir=tmp_path, out=tmp_path / "out", budget_minutes=3)
    runs = {arm.name: config.pretrain_run(arm, False) for arm in config.selected_arms()
            if arm.pretraining == "network"}  # fmt: skip
    assert set(runs) == {"nnlm", "elmo", "awd-lstm", "gpt", "bert"}
    for run in runs.values():
        assert (run.corpus, run.tokenizer, run.budget) == (
            runs["bert"].corpus, runs["bert"].tokenizer, 180
        )  # fmt: skip
    assert runs["gpt"].resolved.data.objective == "clm"
    assert runs["bert"].resolved.data.objective == "mlm"
    assert runs["elmo"].resolved.network.name == "elmo"


# --- the report -----------------------------------------------------------------------------------


def _layer(value: float, low: float, high: float, accuracy: float) -> dict:
    return {"within_minus_across": value, "low": low, "high": high,
            "nearest_neighbour_accuracy": accuracy}  # fmt: skip


def _results() -> dict:
    arms = {name: {"label": name.upper(), "paper": "", "is_control": name == "word2vec",
                   "is_baseline": name == "scratch"} for name in ARM_NAMES}  # fmt: skip
    runs = {name: [{"accuracy": 0.5 + 0.01 * i}] for i, name in enumerate(ARM_NAMES)}
    runs["bert"] = [{"accuracy": 0.9}, {"accuracy": 0.92}]
    runs["scratch"] = [{"accuracy": 0.6}, {"accuracy": 0.61}]
    probe = {"sentences": 4, "senses": {"a": 2, "b": 2}, "chance": 1 / 3}
    return {
        "config": {
            "lang": "en",
            "budget_minutes": 1.0,
            "seeds": [1, 2],
            "probes": ["play"],
            "corpus": ["x/reviews.txt"],
            "tokenizer": "trained on the corpus",
            "max_examples": None,
        },  # fmt: skip
        "arms": arms,
        "rows": {
            "sst2:paper": {
                "task": "sst2",
                "method": "paper",
                "method_label": "its paper's way",
                "metric_set": "accuracy",
                "budget": {"epochs": 1, "max_train_examples": None},
                "arms": list(ARM_NAMES),
                "paper": {"bert": {"value": 93.5, "source": "BERT Table 1"}},
            },
        },  # fmt: skip
        "pretraining": {
            name: {"tokens": 1e6, "flops": 2.5e15, "perplexity": 42.0, "formula": "6 N"}
            for name in ARM_NAMES
        },  # fmt: skip
        "probes": {
            "play": {
                "bert": [
                    probe | {"layers": [_layer(0.0, -0.1, 0.1, 0.3), _layer(0.2, 0.1, 0.3, 0.9)]}
                ],
                "word2vec": [probe | {"layers": [_layer(0.0, 0.0, 0.0, 1 / 3)]}],
            }
        },  # fmt: skip
        "scores": {"sst2:paper": runs},
    }


def test_the_report_has_every_arms_row_the_papers_figures_and_the_verdicts():
    results = _results()
    results["pretraining"]["elmo"]["tokens"] = 4076  # a short run's tokens read in thousands
    text = "\n".join(report_lines(results))
    for name in set(ARM_NAMES) - {"elmo"}:
        assert f"| {name.upper()} | 1.00M | 2.5e15 | 42.0 |" in text
    assert "| ELMO | 4.1k | 2.5e15 | 42.0 |" in text
    assert "91.0 (90.0–92.0) [93.5]" in text  # BERT's median, its spread, the paper's figure
    assert "**Against SCRATCH**" in text and "| SCRATCH | ahead" not in text
    assert "| BERT | ahead (+30.5 vs spread 2.0; 2-0 seeds, p 0.50) |" in text
    assert "| GPT | -6.5, one seed: no spread to judge by |" in text  # one seed: no verdict
    assert "| BERT (control) |" not in text and "| WORD2VEC (control) | 0 |" in text
    assert "| BERT | 1 | +0.2000 [+0.1000, +0.3000]* | 0.90 |" in text
    assert "| BERT | 0 | +0.0000 [-0.1000, +0.1000] | 0.30 |" in text
    assert "FLOPs of BERT: 6 N." in text and "BERT Table 1" in text
