"""The commands of docs/word2vec-to-bert.md on tiny inputs: `embed`, `neighbours`, `generate`,
`score-text`, and the left-to-right model made usable (its LM loss, its sentence heads,
fill-mask refusing it)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from bertlab import PretrainRun, run_pretraining
from bertlab.cli import main
from bertlab.core.config import BertConfig
from bertlab.core.finetune_config import FinetuneConfig
from bertlab.core.run_folder import METRICS_FILE
from bertlab.data.tasks.classification import Example
from bertlab.task_families import make_task
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.finetuning.finetune import ModelSource, TaskData, finetune_task
from bertlab.training.metrics_log import read_metrics
from bertlab.use.features import load_features


@pytest.fixture(scope="module")
def causal_model(pretrain_files, tmp_path_factory):
    """A tiny left-to-right model pre-trained for a few steps (`--objective clm`)."""
    vocab, corpus = pretrain_files
    out = tmp_path_factory.mktemp("clm") / "run"
    run = PretrainRun(
        corpus=[corpus],
        out=out,
        tokenizer=vocab,
        model_size="tiny",
        objective="clm",
        max_steps=4,
        max_seq_length=32,
        eval_examples=8,
        eval_every_steps=2,
        log_every_steps=1,
        num_workers=0,
    )
    return run_pretraining(run, show_progress=False, say=lambda line: None).final_dir


def test_a_causal_run_logs_a_language_model_loss(causal_model):
    records = read_metrics(causal_model.parent / METRICS_FILE)
    for kind in ("train", "eval"):
        logged = [r for r in records if r["kind"] == kind]
        assert logged and all("lm_loss" in r and "lm_accuracy" in r for r in logged)
        assert not any("mlm_loss" in r for r in logged)
    assert BertConfig.from_json_file(causal_model / "config.json").is_causal


def test_a_fine_tuned_causal_classifier_depends_on_the_sentence(causal_model, tmp_path):
    """Must-show 5: with the last real token read, two sentences get different predictions
    (reading [CLS], which sees only itself under causal attention, they could not)."""
    rng = random.Random(0)
    examples = []
    for _ in range(64):
        words = [f"w{rng.randrange(1, 40)}" for _ in range(rng.randrange(3, 8))]
        label = "1" if "w1" in words or "w2" in words else "0"
        examples.append(Example(" ".join(words), None, label))
    task = make_task("sst2")
    data = TaskData(examples[:48], examples[48:], ("0", "1"))
    settings = FinetuneConfig(learning_rate=1e-3, batch_size=16, num_train_epochs=2, seed=1)
    result = finetune_task(task, data, ModelSource(causal_model), settings, tmp_path, False)
    head = task.load_head(result.best_dir, None).eval()
    assert head.config.is_causal
    tokenizer = Tokenizer.from_pretrained(result.best_dir)
    logits = [
        head(torch.tensor([tokenizer(text)["input_ids"]])).logits
        for text in ("w1 w5 w7 w9 .", "w30 w31 w33 .")
    ]
    assert not torch.allclose(logits[0], logits[1])


def test_fill_mask_refuses_a_causal_model_and_generate_continues(causal_model, capsys):
    assert main(["fill-mask", "--model", str(causal_model), "w1 [MASK] w3"]) == 1
    assert "left-to-right (causal) model" in capsys.readouterr().err
    assert main(["generate", "--model", str(causal_model), "w1 w2", "--max-new-tokens", "5"]) == 0
    assert capsys.readouterr().out.startswith("w1 w2")
    assert main(["score-text", "--model", str(causal_model), "w1 w2 w3 .", "w3 . w2 w1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("log-probability in nats (left-to-right model)")
    assert "1. " in out and "2. " in out


def test_score_text_with_a_masked_model_gives_pseudo_log_likelihoods(hub_model_folder, capsys):
    argv = ["score-text", "--model", str(hub_model_folder), "the cat sat on the mat", "--pieces"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("pseudo-log-likelihood in nats (masked model)")
    assert "cat " in out  # the pieces' own scores


def test_embed_writes_features_and_an_index(hub_model_folder, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("the cat sat on the mat\ngood film ||| bad film\n", encoding="utf-8")
    out = tmp_path / "features"
    argv = ["embed", "--model", str(hub_model_folder), "--input", str(texts), "--out", str(out)]
    argv += ["--layers", "-1", "-2", "0", "--pooling", "first", "--format", "safetensors"]
    assert main(argv) == 0
    assert "10 rows (first) x 3 layer(s) x 32" in capsys.readouterr().out
    features = load_features(out)
    assert features.vectors.shape == (10, 3, 32) and features.layers == (-1, -2, 0)
    record = json.loads((out / "index.jsonl").read_text(encoding="utf-8").splitlines()[1])
    assert record["units"] == ["good", "film", "bad", "film"] and record["segments"] == [0, 0, 1, 1]
    assert main(["embed", "--model", str(hub_model_folder), "--out", str(out)]) == 1
    assert "--input FILE or --text" in capsys.readouterr().err
    argv = ["embed", "--model", str(hub_model_folder), "--text", "a", "--layers", "9"]
    assert main([*argv, "--out", str(out)]) == 1
    assert "hidden states 0..2, not 9" in capsys.readouterr().err


def test_embed_warns_when_a_text_is_longer_than_it_reads(hub_model_folder, tmp_path, caplog):
    """It pooled the first pieces of a long text without a word (predict warns)."""
    texts = tmp_path / "texts.txt"
    texts.write_text("the cat sat\n" + "the cat sat " * 50 + "\n", encoding="utf-8")
    out = tmp_path / "features"
    argv = ["embed", "--model", str(hub_model_folder), "--input", str(texts), "--out", str(out)]
    assert main([*argv, "--pooling", "mean"]) == 0
    assert load_features(out).vectors.shape == (2, 1, 32)
    warning = "1 of 2 texts were longer than 128 pieces ([CLS] and [SEP] included) and were cut"
    assert [record.getMessage() for record in caplog.records] == [warning]
    caplog.clear()
    texts.write_text("the cat sat\n" + "the cat sat " * 42 + "\n", encoding="utf-8")  # 126
    assert main([*argv, "--pooling", "mean"]) == 0
    assert not caplog.records


def test_neighbours_of_vector_files_with_a_bom_or_a_header_that_lies(tmp_path, capsys):
    pytest.importorskip("gensim")
    lines = "cat 1.0 0.0\ndog 0.9 0.1\ncar 0.0 1.0\n"
    path = tmp_path / "vectors.txt"
    path.write_bytes(b"\xef\xbb\xbf3 2\n" + lines.encode())  # a UTF-8 byte order mark
    assert main(["neighbours", "word2vec", "cat", "--vectors", str(path), "--top-k", "1"]) == 0
    assert capsys.readouterr().out == "cat: dog 0.99\n"
    path.write_text("3 5\n" + lines, encoding="utf-8")
    assert main(["neighbours", "word2vec", "cat", "--vectors", str(path)]) == 1
    assert capsys.readouterr().err == (
        f"bertlab: error: {path}: its header '3 5' says 5 numbers per word, but line 2 has a "
        "word and 2; correct the header's second number\n"
    )


def test_neighbours_from_word2vec_embeddings_and_context(hub_model_folder, tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    lines = [f"the {w} sat on the mat. a {w} is good." for w in ("cat", "dog", "man") * 40]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    argv = ["neighbours", "word2vec", "cat", "zebra", "--corpus", str(corpus), "--epochs", "2"]
    assert main([*argv, "--save-vectors", str(tmp_path / "vectors.bin")]) == 0
    out = capsys.readouterr().out
    assert (
        "skip-gram vectors of" in out and "cat: " in out and "zebra: 'zebra' has no vector" in out
    )
    assert main(["neighbours", "word2vec", "dog", "--vectors", str(tmp_path / "vectors.bin")]) == 0
    assert capsys.readouterr().out.startswith("dog: ")
    argv = ["neighbours", "embeddings", "good", "--model", str(hub_model_folder), "--top-k", "3"]
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("good (good): ")
    figure = tmp_path / "cat.png"
    argv = ["neighbours", "contextual", "cat", "--model", str(hub_model_folder)]
    argv += ["--context", "the cat sat on the mat", "--context", "a cat is a good film"]
    assert main([*argv, "--reference", str(corpus), "--figure", str(figure), "--top-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "'cat': 80 uses in the reference" in out and "cosine between its vectors" in out
    assert out.count("[cat]") == 4 and figure.is_file()
    records = tmp_path / "reference.jsonl"  # the same reference as JSON Lines, by its field
    records.write_text("".join(json.dumps({"body": line}) + "\n" for line in lines))
    assert main([*argv, "--reference", str(records), "--text-field", "body"]) == 0
    assert "'cat': 80 uses in the reference" in capsys.readouterr().out
    assert main([*argv[:5], "--context", "no such word", "--reference", str(corpus)]) == 1
    assert "does not use 'cat'" in capsys.readouterr().err


def test_finetune_with_features_and_a_bilstm_then_evaluate(tmp_path, capsys, task_vocab):
    data = Path(__file__).resolve().parents[1] / "data" / "tasks" / "conll_iob1.txt"
    out = tmp_path / "run"
    argv = ["finetune", "--task", "conll2003", "--train", str(data), "--dev", str(data)]
    argv += ["--from-scratch", "--model-size", "tiny", "--tokenizer", str(task_vocab)]
    argv += ["--out", str(out), "--epochs", "1", "--batch-size", "4", "--no-progress"]
    assert main([*argv, "--features", "scalar-mix", "--bilstm"]) == 0
    saved = json.loads((out / "best" / "config.json").read_text(encoding="utf-8"))
    assert saved["bertlab_features"]["layers"] == "scalar-mix"
    assert (
        saved["bertlab_features"]["use_bilstm"] and saved["bertlab_features"]["do_freeze_encoder"]
    )
    capsys.readouterr()
    evaluate = ["evaluate", "--task", "conll2003", "--model", str(out / "best")]
    assert main([*evaluate, "--data", str(data)]) == 0
    assert "f1" in json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main([*argv, "--features", "last", "--freeze-layers", "1"]) == 1
    assert "--features freezes the whole encoder: --freeze-layers" in capsys.readouterr().err


def test_neighbours_word2vec_answers_analogies(tmp_path, capsys):
    gensim = pytest.importorskip("gensim")
    vectors = gensim.models.KeyedVectors(3)
    vectors.add_vectors(
        ["king", "man", "woman", "queen", "apple"],
        np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0.1, 1], [-1, 0.2, 0.1]], dtype=np.float32),
    )
    path = tmp_path / "vectors.bin"
    vectors.save_word2vec_format(str(path), binary=True)
    argv = ["neighbours", "word2vec", "--vectors", str(path), "--top-k", "1"]
    assert main([*argv, "--analogy", "King", "man", "woman", "--analogy", "a", "b", "c"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("King - man + woman: queen ")
    assert out[1] == "a - b + c: 'a', 'b', 'c' have no vector: not in the corpus, or fewer " \
        "times than min_count"  # fmt: skip
    assert main(argv) == 1  # neither words nor an analogy
    assert "--analogy" in capsys.readouterr().err


def test_word2vec_logs_its_progress_without_the_libraries_noise(tmp_path):
    """gensim's progress shows with -v only; its per-step records (dictionaries) and jieba's
    dictionary loading (printed twice: its own handler and ours) never do."""
    import subprocess
    import sys

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("我们喜欢自然语言处理。我们喜欢音乐。\n" * 30, encoding="utf-8")
    argv = ["neighbours", "word2vec", "我们", "--lang", "zh", "--corpus", str(corpus)]
    for verbose in ([], ["-v"]):
        result = subprocess.run(
            [sys.executable, "-m", "bertlab", *verbose, *argv, "--epochs", "1"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert result.stdout.startswith("skip-gram vectors of") and "我们: " in result.stdout
        is_shown = "collecting all words and their counts" in result.stderr  # gensim's progress
        assert is_shown == bool(verbose), result.stderr
        assert "lifecycle event" not in result.stderr
        assert "prefix dict" not in result.stderr


def test_score_text_neither_cuts_nor_ranks_a_text_it_cannot_read(hub_model_folder, capsys):
    """A sentence longer than the model's positions is refused (its score would be a cut
    sentence's); one whose pieces are all [UNK] is listed apart, not ranked first; an argument
    that is not UTF-8 is one line."""
    model = ["score-text", "--model", str(hub_model_folder)]
    assert main([*model, "the cat sat on the mat", "酒店服务", "这家"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[1].startswith("1. ") and lines[1].endswith("the cat sat on the mat")
    assert lines[2].startswith("not ranked (every piece is [UNK]")
    assert lines[3].startswith("- ") and lines[3].endswith("酒店服务") and len(lines) == 5
    assert "50% of the input's pieces are [UNK]" in captured.err  # 6 of 12
    assert main([*model, "the cat sat", " ".join(["the cat"] * 100)]) == 1
    error = capsys.readouterr().err
    assert "'the cat the cat" in error and "has 200 pieces, more than the 126" in error
    assert main([*model, "the \udce8 cat"]) == 1
    assert "bertlab: error: the text 'the \\xe8 cat' is not UTF-8" in capsys.readouterr().err


def test_generate_refuses_a_prompt_longer_than_the_positions(causal_model, capsys):
    argv = ["generate", "--model", str(causal_model), " ".join(["w1"] * 600)]
    assert main(argv) == 1
    error = capsys.readouterr().err
    assert error.startswith("bertlab: error: the prompt has 600 pieces") and "\n" not in error[:-1]


def test_generate_takes_a_temperature_near_zero_and_refuses_a_non_finite_one(causal_model, capsys):
    base = ["generate", "--model", str(causal_model), "w1 w2", "--max-new-tokens", "5"]
    assert main([*base, "--temperature", "1e-40"]) == 0
    near_zero = capsys.readouterr()
    assert near_zero.out.startswith("w1 w2") and near_zero.err == ""
    assert main([*base, "--top-k", "1"]) == 0
    assert capsys.readouterr().out == near_zero.out  # the most probable piece each time
    for value in ("inf", "nan", "0"):
        assert main([*base, "--temperature", value]) == 1
        error = capsys.readouterr().err
        assert error == f"bertlab: error: need a finite temperature > 0, got {float(value)}\n"


def test_embed_names_the_line_that_is_not_utf8(hub_model_folder, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_bytes(b"the cat sat\n\na caf\xe8 film\n")
    out = tmp_path / "features"
    argv = ["embed", "--model", str(hub_model_folder), "--input", str(texts), "--out", str(out)]
    assert main(argv) == 1
    error = capsys.readouterr().err
    assert error.startswith(f"bertlab: error: {texts}:3: not UTF-8 (byte 0xe8") and not out.exists()


def test_neighbours_refuse_unknown_words_and_a_corpus_of_rare_words(
    hub_model_folder, tmp_path, capsys
):
    """No [UNK] row's neighbours as a word's, and no gensim traceback."""
    argv = ["neighbours", "embeddings", "斑马", "good", "--model", str(hub_model_folder)]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "斑马: '斑马' is not in the vocabulary (its pieces: [UNK] [UNK])"
    assert lines[1].startswith("good (good): ") and len(lines) == 2
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the zebra sat\na zebra ran\n", encoding="utf-8")
    argv = ["neighbours", "contextual", "zebra", "--model", str(hub_model_folder)]
    assert main([*argv, "--context", "the zebra sat", "--reference", str(corpus)]) == 1
    assert "'zebra' is not in the vocabulary" in capsys.readouterr().err
    argv = ["neighbours", "word2vec", "zebra", "--corpus", str(corpus), "--min-count", "3"]
    assert main(argv) == 1
    error = capsys.readouterr().err
    assert error == (
        "bertlab: error: no word occurs at least 3 times (min_count) in the corpus of 6 words; "
        "lower min_count or give a larger corpus\n"
    )
