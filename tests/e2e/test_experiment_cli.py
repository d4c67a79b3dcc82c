"""`bertlab experiment transfer` end to end on a tiny data directory, and its verdicts."""

from __future__ import annotations

import gzip
import json
import math
import random
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertlab.apps.experiments.transfer import _point_models, _twin, prepare_task_text
from bertlab.apps.experiments.transfer_compare import compare_runs
from bertlab.apps.experiments.transfer_config import TransferConfig, experiment_settings
from bertlab.apps.experiments.transfer_data import TASK_TEXT_GROUP, task_splits
from bertlab.apps.experiments.transfer_report import results_table, verdict
from bertlab.apps.experiments.transfer_rows import ROWS
from bertlab.apps.flows import TEST_FILE, summary
from bertlab.cli import main
from bertlab.core.config import BertConfig
from bertlab.data.tasks.splits import phrase_roots
from bertlab.network.bert import BertModel
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.pretraining.budget import budget_recipe
from bertlab.training.pretraining.checkpointing import list_checkpoints

DEMO_DATA = Path(__file__).resolve().parents[2] / "bertlab" / "demo_data"


def _data_dir(directory: Path) -> Path:
    """The shared data layout, filled with the demo's slices and a small STS-B-style file."""
    (directory / "glue" / "SST-2").mkdir(parents=True)
    sst2 = (DEMO_DATA / "sst2_train.tsv").read_text(encoding="utf-8").splitlines(keepends=True)
    (directory / "glue" / "SST-2" / "train.tsv").write_text("".join(sst2[:501]), encoding="utf-8")
    corpus = directory / "corpus_en"
    corpus.mkdir()
    with gzip.open(DEMO_DATA / "enwiki_slice.txt.gz", "rt", encoding="utf-8") as source:
        lines = [next(source) for _ in range(4000)]
    for name in ("enwiki_sample_2014.txt.gz", "enwiki_sample_2021.txt.gz"):
        with gzip.open(corpus / name, "wt", encoding="utf-8") as target:
            target.writelines(lines)
    sentences = [
        line.split("\t")[0].strip()
        for line in (DEMO_DATA / "sst2_train.tsv").read_text(encoding="utf-8").splitlines()[1:]
    ]
    rng = random.Random(0)
    rows = [
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    ]
    for index in range(120):
        first, second = rng.sample(sentences, 2)
        rows.append(f"{index}\tg\tf\ty\t{index}\ts\ts\t{first}\t{second}\t{rng.uniform(0, 5):.3f}")
    (directory / "glue" / "STS-B").mkdir()
    (directory / "glue" / "STS-B" / "train.tsv").write_text("\n".join(rows) + "\n")
    return directory


def test_transfer_writes_a_table_per_point_and_seed_and_continues(tmp_path, capsys) -> None:
    data = _data_dir(tmp_path / "data")
    # Checkpoints every 0.125 min: even at a few seconds per step on a loaded machine, one lies
    # within 20% of the 0.25-min point.
    out = tmp_path / "experiment"
    argv = [
        "experiment", "transfer", "--data", str(data), "--out", str(out), "--budget", "30s",
        "--points", "0.25", "--seeds", "1,2", "--tasks", "sst2,stsb", "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["points"] == ["scratch", "0.25min", "0.5min"]
    assert results["config"]["model_size"] == "tiny"  # the budget recipe's
    assert results["config"]["pretrain_learning_rate"] == 2e-3
    assert set(results["scores"]) == {"sst2", "stsb"}
    for task, by_point in results["scores"].items():
        assert set(by_point) == {"scratch", "0.25min", "0.5min"}
        for point, values in by_point.items():
            assert len(values) == 2
            for seed, value in zip((1, 2), values, strict=True):
                test = json.loads(
                    (out / "finetune" / task / point / f"seed-{seed}" / TEST_FILE).read_text()
                )
                recorded = test[results["metrics"][task]]
                # A constant prediction has no Spearman correlation: NaN, recorded as such.
                assert recorded == value or (math.isnan(recorded) and math.isnan(value))
    assert results["metrics"] == {"sst2": "accuracy", "stsb": "spearman"}
    table = (out / "table.md").read_text().splitlines()
    assert table == results_table(results)
    rows = [line for line in table if line.startswith("|")]
    assert len(rows) == 2 + 2 and rows[2].startswith("| sst2 (accuracy) |")
    # Seeds whose dev predictions were all one class: recorded from their result.json, named
    # under the table (a 30 s pre-training often gives them).
    for task, by_point in results["one_class"].items():
        for point, runs in by_point.items():
            for seed in (1, 2):
                recorded = json.loads(
                    (out / "finetune" / task / point / f"seed-{seed}" / "result.json").read_text()
                )["one_class"]
                listed = [run for run in runs if run["seed"] == seed]
                assert listed == ([] if recorded is None else [{"seed": seed} | recorded])
    collapsed = any(
        runs for by_point in results["one_class"].values() for runs in by_point.values()
    )
    assert table[-1].startswith("Seeds that predicted one class") == collapsed
    assert (out / "transfer.png").stat().st_size > 0
    # The from-scratch runs start from different random encoders per seed.
    scratch = [
        (out / "points" / f"scratch-seed-{s}" / "model.safetensors").read_bytes() for s in (1, 2)
    ]
    assert scratch[0] != scratch[1]
    # ... and start where pre-training started: the recipe's sinusoidal positions.
    config = BertConfig.from_json_file(out / "points" / "scratch-seed-1" / "config.json")
    expected = BertModel(config).embeddings
    expected.init_sinusoidal_positions(config.initializer_range)
    positions = load_file(out / "points" / "scratch-seed-1" / "model.safetensors")
    torch.testing.assert_close(
        positions["embeddings.position_embeddings.weight"],
        expected.position_embeddings.weight.detach(),
    )
    # Run again: every step is found done, nothing is trained again.
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob(TEST_FILE)}
    capsys.readouterr()
    assert main(argv) == 0
    assert {p: p.stat().st_mtime_ns for p in out.rglob(TEST_FILE)} == stamps
    # Another fine-tuning rate would mix new runs with the finished ones: refused in one line.
    capsys.readouterr()
    assert main([*argv, "--learning-rate", "1e-3"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "made with other settings" in err[0]
    assert "finetune_learning_rate 0.0005 there, 0.001 now" in err[0]
    assert {p: p.stat().st_mtime_ns for p in out.rglob(TEST_FILE)} == stamps
    # Changed data: the finished runs no longer match their split, and the command says so.
    sst2 = data / "glue" / "SST-2" / "train.tsv"
    sst2.write_text("".join(sst2.read_text().splitlines(keepends=True)[:-1]))
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the data or split of sst2 changed" in err[0]
    assert {p: p.stat().st_mtime_ns for p in out.rglob(TEST_FILE)} == stamps


def test_verdict_needs_more_than_the_seed_spread() -> None:
    assert verdict([0.70, 0.71, 0.72], [0.80, 0.81, 0.82]).startswith("yes (+0.1000")
    assert verdict([0.70, 0.75, 0.80], [0.74, 0.78, 0.79]).startswith("no (+0.0300")
    assert verdict([0.80, 0.80, 0.80], [0.70, 0.71, 0.72]).startswith("no (-0.0900")
    # Over paired seeds, the seeds won-lost and the sign test's p come with it.
    assert verdict([0.70, 0.71, 0.72], [0.80, 0.81, 0.82]) == (
        "yes (+0.1000 vs spread 0.0200; 3–0 seeds, p 0.25)"
    )
    assert verdict([0.70, 0.71], [0.80, 0.60, 0.82]).endswith("spread 0.2200)")


def test_a_constant_prediction_counts_as_no_correlation() -> None:
    # A seed that predicts one value has no Spearman correlation (NaN): it counts as 0, and the
    # table says how many seeds did so, wherever the NaN stands among the seeds.
    assert summary([0.30, math.nan, 0.31]) == "0.300 (0.000–0.310), 1 constant"
    assert summary([math.nan, 0.30, 0.31]) == "0.300 (0.000–0.310), 1 constant"
    assert summary([0.30, 0.20, 0.31]) == "0.300 (0.200–0.310)"
    assert verdict([math.nan, 0.30, 0.31], [0.27, 0.27, 0.26]).startswith(
        "no (-0.0300 vs spread 0.3100"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--tasks", "sst2,nope"], "unknown task"),
        (["--points", "90"], "points must lie strictly between 0 and 60"),
        (["--seeds", "1,1"], "seeds must be distinct"),
        (["--seeds", "a"], "--seeds must be numbers"),
        (["--pretrain-learning-rate", "0"], "pre-training learning rate must be positive"),
        (["--finetune-dropout", "1"], "fine-tuning dropout must be in [0, 1)"),
        (["--task-text", "-1"], "--task-text must be 0 or more"),
        (["--budget", "9000h"], "the budget must be at most a year (8,760 h), got 9000 h"),
        (["--continue-minutes", "6e5"], "--continue-minutes must be at most a year"),
    ],
)
def test_bad_arguments_end_in_one_line(tmp_path, capsys, extra, message) -> None:
    out = tmp_path / "experiment"
    code = main(["experiment", "transfer", "--data", str(tmp_path), "--out", str(out), *extra])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists()


def test_missing_data_is_named_before_anything_runs(tmp_path, capsys) -> None:
    out = tmp_path / "experiment"
    code = main(["experiment", "transfer", "--data", str(tmp_path / "none"), "--out", str(out)])
    assert code == 1
    err = capsys.readouterr().err
    assert "missing input file(s)" in err and "SST-2/train.tsv" in err
    assert not out.exists()


def test_task_text_holds_the_training_parts_and_nothing_held_out(tmp_path, monkeypatch) -> None:
    # sst2-1k fine-tunes on 50 labels of this small SST-2 file.
    few = tuple(replace(s, max_train_examples=50) if s.name == "sst2-1k" else s for s in ROWS["en"])
    monkeypatch.setitem(ROWS, "en", few)
    data = _data_dir(tmp_path / "data")
    out = tmp_path / "experiment"
    out.mkdir()
    config = TransferConfig(data, out, tasks=("sst2-1k", "stsb"), task_text_repeats=2)
    path, counts = prepare_task_text(config)
    text = path.read_text(encoding="utf-8")
    documents = [document.splitlines() for document in text.strip("\n").split("\n\n")]
    lines = Counter(line for document in documents for line in document)
    specs = {spec.name: spec for spec in ROWS["en"]}
    # SST-2: every whole sentence of the training part, the 50 labelled ones and the rest,
    # twice; none of its phrases; no sentence of the dev or test split.
    _, sst2, sst2_test = task_splits(data, replace(specs["sst2-1k"], max_train_examples=None))
    texts = [example.text_a for example in sst2.train]
    sentences = Counter(
        t for i, (t, root) in enumerate(zip(texts, phrase_roots(texts), strict=True)) if root == i
    )
    assert counts["sst2-1k"] == sum(sentences.values()) > 50
    assert all(lines[sentence] == 2 * n for sentence, n in sentences.items())
    phrases = set(texts) - set(sentences)
    assert phrases and not phrases & set(lines)
    # STS-B: each pair as two lines of one document, twice.
    _, stsb, stsb_test = task_splits(data, specs["stsb"])
    pairs = Counter(
        (document[i], document[i + 1]) for document in documents for i in range(len(document) - 1)
    )
    assert all(pairs[(e.text_a, e.text_b)] >= 2 for e in stsb.train)
    assert counts["stsb"] == len(stsb.train)
    training = set(texts) | {t for e in stsb.train for t in (e.text_a, e.text_b)}
    held_out = [e.text_a for e in [*sst2.dev, *sst2_test]]
    held_out += [t for e in [*stsb.dev, *stsb_test] for t in (e.text_a, e.text_b)]
    assert held_out and not (set(held_out) - training) & set(lines)
    assert sum(lines.values()) == 2 * (sum(sentences.values()) + 2 * len(stsb.train))
    assert max(len(document) for document in documents) <= 2 * TASK_TEXT_GROUP
    # The same settings write the same bytes, so a continued run finds its tokenized corpus.
    prepare_task_text(config)
    assert path.read_text(encoding="utf-8") == text
    # The pre-training corpus starts with it (the held-out documents are the corpus's last), and
    # the settings record it.
    run = config.pretrain_run()
    assert run.corpus[0] == path and len(run.corpus) == 3
    settings = experiment_settings(config)
    assert (settings["task_text_repeats"], settings["task_text_tasks"]) == (2, ["sst2-1k", "stsb"])
    # Without it, the settings are those of earlier experiments, which still continue.
    assert not {"task_text_repeats", "task_text_tasks"} & set(
        experiment_settings(TransferConfig(data, out))
    )


def test_with_next_sentence_prediction_each_task_example_is_a_document(tmp_path) -> None:
    data = _data_dir(tmp_path / "data")
    out = tmp_path / "experiment"
    out.mkdir()
    config = TransferConfig(
        data, out, tasks=("sst2", "stsb"), task_text_repeats=2, pretrain_objective="mlm+nsp"
    )
    path, counts = prepare_task_text(config)
    documents = [d.splitlines() for d in path.read_text(encoding="utf-8").strip("\n").split("\n\n")]
    # A pair is a document of its own, its two sentences in order: NSP's A and its real B.
    _, stsb, _ = task_splits(data, next(s for s in ROWS["en"] if s.name == "stsb"))
    pairs = Counter(tuple(document) for document in documents if len(document) == 2)
    assert pairs == Counter({(e.text_a, e.text_b): 2 for e in stsb.train})
    # An SST-2 sentence is a document of one line, never grouped with unrelated sentences.
    singles = [document for document in documents if len(document) == 1]
    assert len(singles) == 2 * counts["sst2"] and len(documents) == 2 * sum(counts.values())
    # The pre-training command and the settings carry the objective.
    assert config.pretrain_run().objective == "mlm+nsp"
    assert experiment_settings(config)["pretrain_objective"] == "mlm+nsp"
    # Left unset: the recipe's (MLM), the task text grouped, and the settings of earlier runs.
    plain = replace(config, pretrain_objective=None)
    assert plain.resolved.data.objective == "mlm"
    assert plain.pretrain_run().objective is None
    assert "pretrain_objective" not in experiment_settings(plain)
    prepare_task_text(plain)
    grouped = path.read_text(encoding="utf-8").strip("\n").split("\n\n")
    assert len(grouped) < len(documents)
    with pytest.raises(ValueError, match="unknown pre-training objective 'clm'"):
        replace(config, pretrain_objective="clm")


def test_the_pretraining_command_carries_the_shape_and_the_rate(tmp_path) -> None:
    vocab = tmp_path / "vocab.txt"
    chosen = TransferConfig(
        tmp_path, tmp_path, model_size="mini", pretrain_learning_rate=1e-3, tokenizer=vocab
    )
    run = chosen.pretrain_run()
    assert (run.model_size, run.learning_rate, run.budget) == ("mini", 1e-3, 3600)
    assert run.tokenizer == vocab and run.out == tmp_path / "pretrain"
    assert run.resolved.loop.learning_rate == 1e-3
    # Left unset, the budget recipe fills them (`bertlab pretrain --budget`).
    run = TransferConfig(tmp_path, tmp_path).pretrain_run()
    assert (run.model_size, run.learning_rate, run.tokenizer) == (None, None, None)
    assert (run.resolved.shape, run.resolved.loop.learning_rate) == ("mini", 1e-3)


def test_the_masking_rate_reaches_pretraining_and_the_settings(tmp_path) -> None:
    chosen = TransferConfig(tmp_path, tmp_path, pretrain_mlm_probability=0.3)
    assert chosen.pretrain_run().mlm_probability == 0.3
    assert chosen.resolved.data.mlm_probability == 0.3
    assert experiment_settings(chosen)["pretrain_mlm_probability"] == 0.3
    # Left unset: the recipe's rate, and the settings of earlier experiments, which still continue.
    plain = TransferConfig(tmp_path, tmp_path)
    assert plain.resolved.data.mlm_probability == budget_recipe(3600).mlm_probability
    assert plain.pretrain_run().mlm_probability is None
    assert "pretrain_mlm_probability" not in experiment_settings(plain)
    with pytest.raises(ValueError, match=r"masking rate must be in \(0, 1\), got 1.5"):
        TransferConfig(tmp_path, tmp_path, pretrain_mlm_probability=1.5)


def test_a_missing_tokenizer_is_named_before_anything_runs(tmp_path, capsys) -> None:
    data = _data_dir(tmp_path / "data")
    out = tmp_path / "experiment"
    argv = ["experiment", "transfer", "--data", str(data), "--out", str(out)]
    assert main([*argv, "--tokenizer", str(tmp_path / "none" / "vocab.txt")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing input file(s)" in err[0] and "none/vocab.txt" in err[0]
    assert not out.exists()


def test_a_pretraining_run_of_another_shape_is_refused(tmp_path, capsys) -> None:
    data = _data_dir(tmp_path / "data")
    out = tmp_path / "experiment"
    final = out / "pretrain" / "final"
    final.mkdir(parents=True)
    BertConfig.from_preset("tiny", vocab_size=100).to_json_file(final / "config.json")
    argv = ["experiment", "transfer", "--data", str(data), "--out", str(out), "--tasks", "sst2"]
    assert main([*argv, "--model-size", "mini", "--no-progress"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds a model of 2 layers of 128, not mini" in err[0]
    assert sorted(p.name for p in out.iterdir()) == ["pretrain"]  # nothing fine-tuned


def test_finetune_dropout_reaches_every_model_and_leaves_the_pretrained_one(tmp_path) -> None:
    final = tmp_path / "out" / "pretrain" / "final"
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b"]
    BertModel(BertConfig.from_preset("tiny", vocab_size=len(vocab))).save_pretrained(final)
    Tokenizer.from_pretrained(_vocab_file(tmp_path, vocab)).save_pretrained(final)
    config = TransferConfig(tmp_path, tmp_path / "out", points=(), finetune_dropout=0.0)
    models = _point_models(config, final.parent, say=lambda line: None)
    random_encoder = _twin(config, models[0], 1)
    for directory in (models[60.0], random_encoder):
        found = BertConfig.from_json_file(directory / "config.json")
        assert found.hidden_dropout_prob == found.attention_probs_dropout_prob == 0.0
    # The pre-training run itself keeps BERT's dropout for other uses of it.
    assert models[60.0] != final
    assert BertConfig.from_json_file(final / "config.json").hidden_dropout_prob == 0.1


def _vocab_file(directory: Path, pieces: list[str]) -> Path:
    path = directory / "vocab.txt"
    path.write_text("\n".join(pieces) + "\n", encoding="utf-8")
    return path


def _in_domain_corpus(directory: Path) -> Path:
    """SST-2's sentences grouped into documents: text of the task's own kind."""
    sentences = [
        line.split("\t")[0]
        for line in (DEMO_DATA / "sst2_train.tsv").read_text(encoding="utf-8").splitlines()[1:]
    ]
    documents = ["\n".join(sentences[i : i + 8]) for i in range(0, len(sentences), 8)]
    path = directory / "reviews.txt"
    path.write_text("\n\n".join(documents) + "\n", encoding="utf-8")
    return path


def test_arms_put_corpora_side_by_side_and_are_refused_when_inconsistent(tmp_path) -> None:
    data = tmp_path
    with pytest.raises(ValueError, match="continues the general one"):
        TransferConfig(data, tmp_path / "o", arms=("in-domain", "continued"), points=())
    with pytest.raises(ValueError, match="arms need a pre-trained arm"):
        TransferConfig(data, tmp_path / "o", arms=("word-vectors",), points=())
    with pytest.raises(ValueError, match="distinct names of general"):
        TransferConfig(data, tmp_path / "o", arms=("general", "books"), points=())
    with pytest.raises(ValueError, match="no in-domain corpus for zh"):
        TransferConfig(data, tmp_path / "o", lang="zh", arms=("in-domain",), points=())
    config = TransferConfig(
        data, tmp_path / "o", arms=("general", "continued"), points=(30.0,), continue_minutes=20.0
    )
    assert config.columns() == ["scratch", "general 30min", "general", "continued"]
    assert config.fine_tuning_order() == ["scratch", "general", "continued", "general 30min"]
    single = TransferConfig(data, tmp_path / "o", points=(15.0, 30.0))
    assert single.fine_tuning_order() == ["scratch", "60min", "15min", "30min"]
    continued = config.pretrain_run(arm="continued")
    assert continued.init_from == tmp_path / "o" / "pretrain" / "final"
    assert continued.corpus == tuple(config.in_domain_files())
    assert (continued.budget, continued.resolved.dropout, continued.resolved.final_dropout) == (
        1200.0,
        0.0,
        0.1,
    )
    assert config.in_domain_files() == [data / "corpus_reviews_en" / "imdb_reviews.txt.gz"]
    settings = experiment_settings(config)
    assert settings["continue_minutes"] == 20.0 and "in_domain_corpus" in settings
    assert "in_domain_corpus" not in experiment_settings(TransferConfig(data, tmp_path / "o"))


@pytest.mark.slow
def test_transfer_with_arms_fine_tunes_every_corpus_and_the_word_vector_twin(tmp_path) -> None:
    data = _data_dir(tmp_path / "data")
    reviews = _in_domain_corpus(tmp_path)
    out = tmp_path / "experiment"
    argv = [
        "experiment", "transfer", "--data", str(data), "--out", str(out), "--budget", "8s",
        "--arms", "general,in-domain,continued,word-vectors", "--in-domain-corpus", str(reviews),
        "--continue-minutes", "0.1", "--points", "0.06", "--tasks", "sst2", "--seeds", "1",
        "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    columns = ["scratch", "general 0.06min", "general", "in-domain 0.06min", "in-domain",
               "continued", "word-vectors"]  # fmt: skip
    assert results["config"]["points"] == columns
    assert set(results["scores"]["sst2"]) == set(columns)
    assert set(results["pretraining_last_eval"]) == {"general", "in-domain", "continued"}
    table = (out / "table.md").read_text()
    assert all(f"{arm}: " in table for arm in ("general", "in-domain", "continued", "word-vectors"))
    # `experiment compare` reads this layout: a row per column, each pre-trained arm's log.
    report = compare_runs([out, out], labels=["a", "b"])
    assert sum(", level 0–0 |" in line for line in report) == len(columns)
    logged = [line.split(" | ")[1] for line in report if line.startswith("| a | ")]
    assert logged == ["general", "in-domain", "continued"]
    assert all(int(line.split(" | ")[4].replace(",", "")) > 0 for line in report
               if line.startswith("| a | "))  # fmt: skip
    # The continued run starts from the general model and reads the in-domain text.
    general = load_file(out / "pretrain" / "final" / "model.safetensors")
    continued = load_file(out / "pretrain-continued" / "final" / "model.safetensors")
    assert general.keys() == continued.keys()
    key = "bert.embeddings.word_embeddings.weight"
    assert not torch.equal(general[key], continued[key])
    assert BertConfig.from_json_file(out / "pretrain-continued" / "final" / "config.json")\
        .hidden_dropout_prob == 0.1  # fmt: skip
    # The word-vector twin has the scratch twin's encoder and the vectors in its embeddings.
    scratch = load_file(out / "points" / "scratch-seed-1" / "model.safetensors")
    warm = load_file(out / "points" / "word-vectors-seed-1" / "model.safetensors")
    assert torch.equal(scratch["encoder.layer.0.output.dense.weight"],
                       warm["encoder.layer.0.output.dense.weight"])  # fmt: skip
    assert not torch.equal(scratch["embeddings.word_embeddings.weight"],
                           warm["embeddings.word_embeddings.weight"])  # fmt: skip
    # Run again: nothing is trained again.
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob(TEST_FILE)}
    assert main(argv) == 0
    assert {p: p.stat().st_mtime_ns for p in out.rglob(TEST_FILE)} == stamps


@pytest.mark.slow  # a minute of two timed pre-training arms; the default tier's transfer test
# runs the same command with masked LM
def test_electra_arms_fine_tune_the_discriminator_at_each_point(tmp_path) -> None:
    data = _data_dir(tmp_path / "data")
    reviews = _in_domain_corpus(tmp_path)
    out = tmp_path / "experiment"
    # Checkpoints every 0.1 min: the one right after the 0.2-min mark is taken even when a loaded
    # machine's slow steps leave it more than 20% past the mark.
    argv = [
        "experiment", "transfer", "--data", str(data), "--out", str(out), "--budget", "24s",
        "--pretrain-objective", "electra", "--arms", "general,in-domain",
        "--in-domain-corpus", str(reviews), "--points", "0.2", "--tasks", "sst2", "--seeds", "1",
        "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["pretrain_objective"] == "electra"
    columns = ["scratch", "general 0.2min", "general", "in-domain 0.2min", "in-domain"]
    assert results["config"]["points"] == columns
    assert set(results["scores"]["sst2"]) == set(columns)
    assert "rtd_auc" in results["pretraining_last_eval"]["general"]
    # A point fine-tunes the discriminator of its checkpoint: a plain BERT encoder, equal to
    # the checkpoint's `bert.` weights, without the generator.
    point = load_file(out / "points" / "general-0.2min" / "model.safetensors")
    checkpoints = list_checkpoints(out / "pretrain")
    assert checkpoints
    assert not any("generator" in key for key in point)
    matched = [
        checkpoint for checkpoint in checkpoints
        if all(torch.equal(value, load_file(checkpoint / "model.safetensors")[f"bert.{key}"])
               for key, value in point.items())
    ]  # fmt: skip
    assert len(matched) == 1
    assert BertConfig.from_json_file(out / "points" / "general-0.2min" / "config.json")\
        .hidden_dropout_prob == 0.1  # fmt: skip
    # ... and `experiment compare` puts it beside itself, the replaced-token AUC logged.
    report = compare_runs([out, out], labels=["a", "b"])
    assert any(line.startswith("| a | in-domain | electra |") for line in report)
    assert "replaced-token AUC" in "\n".join(report)


@pytest.mark.parametrize(
    "command",
    [
        ["demo", "--minutes", "0.1", "--no-progress"],
        ["experiment", "transfer", "--data", "DATA"],
        ["experiment", "ablation", "--data", "DATA"],
        ["experiment", "strategies", "--data", "DATA", "--model", "DATA"],
    ],
)
def test_a_second_writer_of_an_apps_out_is_refused_with_the_holders_pid(
    tmp_path, capsys, another_writer, command
) -> None:
    """Two runs of an app on one OUT skipped and overwrote each other's steps: no lock."""
    out = tmp_path / "out"
    argv = [str(tmp_path / "data") if arg == "DATA" else arg for arg in command]
    with another_writer(out) as pid:
        assert main([*argv, "--out", str(out)]) == 1
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and f"pid {pid}" in error, error
    assert [path.name for path in out.iterdir()] == [".bertlab.lock"]
