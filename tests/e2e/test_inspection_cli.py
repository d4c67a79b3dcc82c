"""`bertlab fill-mask`, `bertlab nsp` and `bertlab attention` on small random models on disk."""

from __future__ import annotations

import shutil

import pytest
import torch

from bertlab.cli import main
from bertlab.network.bert import BertForPreTraining
from bertlab.network.heads import BertForSequenceClassification
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.use.inspection import (
    all_attention_maps,
    attention_maps,
    fill_mask,
    load_encoder,
    load_for_fill_mask,
    load_for_next_sentence,
    next_sentence_probabilities,
)


@pytest.fixture
def model_dirs(tmp_path, pretrain_files, tiny_config):
    vocab, _ = pretrain_files
    tokenizer = Tokenizer.from_pretrained(vocab)
    config = tiny_config.replace(vocab_size=tokenizer.vocab_size)
    torch.manual_seed(0)
    pretrained, finetuned = tmp_path / "pretrained", tmp_path / "finetuned"
    BertForPreTraining(config).save_pretrained(pretrained)
    BertForSequenceClassification(config, num_labels=2).save_pretrained(finetuned)
    for directory in (pretrained, finetuned):
        tokenizer.save_pretrained(directory)
    return pretrained, finetuned


def test_fill_mask_gives_the_mlm_heads_softmax(model_dirs) -> None:
    model, tokenizer = load_for_fill_mask(model_dirs[0])
    text = "w1 [MASK] w3 . [MASK]"
    predictions = fill_mask(model, tokenizer, text, top_k=3)
    assert [p.position for p in predictions] == [2, 5]
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    expected = model(ids).mlm_logits[0, 2].softmax(-1).topk(3)
    assert predictions[0].probabilities == pytest.approx(expected.values.tolist(), abs=1e-6)
    assert predictions[0].tokens == tokenizer.convert_ids_to_tokens(expected.indices.tolist())
    assert predictions[0].probabilities == sorted(predictions[0].probabilities, reverse=True)


@pytest.mark.golden
def test_attention_maps_equal_transformers(model_dirs) -> None:
    transformers = pytest.importorskip("transformers")
    model, tokenizer = load_encoder(model_dirs[1])
    pieces, attentions = attention_maps(model, tokenizer, "w1 w2 w3 .", layer=2)
    assert pieces == ["[CLS]", "w1", "w2", "w3", ".", "[SEP]"]
    reference = transformers.BertModel.from_pretrained(model_dirs[1], attn_implementation="eager")
    ids = torch.tensor([tokenizer("w1 w2 w3 .")["input_ids"]])
    expected = reference(ids, output_attentions=True).attentions[1][0]
    torch.testing.assert_close(attentions, expected, atol=1e-5, rtol=1e-5)
    assert attentions.sum(-1) == pytest.approx(torch.ones(4, 6))


def test_cli_prints_predictions_and_draws_attention(model_dirs, tmp_path, capsys) -> None:
    assert main(["fill-mask", "--model", str(model_dirs[0]), "w1 [MASK] .", "--top-k", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "w1 [MASK] ." and lines[1].strip() == "[MASK] 1:" and len(lines) == 4
    assert lines[2].strip().endswith("%")
    out = tmp_path / "maps" / "attention.png"
    for directory in model_dirs:  # pre-trained and fine-tuned models alike
        assert (
            main(["attention", "--model", str(directory), "--text", "w1 w2", "--out", str(out)])
            == 0
        )
        assert out.read_bytes()[:4] == b"\x89PNG"


def test_cli_errors_are_one_line(model_dirs, tmp_path, capsys) -> None:
    cases = [
        (["fill-mask", "--model", str(model_dirs[1]), "w1 [MASK]"], "no language-model head"),
        (["fill-mask", "--model", str(model_dirs[0]), "no mask here"], "has no [MASK]"),
        (["fill-mask", "--model", str(tmp_path / "nowhere"), "[MASK]"], "nowhere"),
        (["attention", "--model", str(model_dirs[0]), "--text", "w1", "--layer", "9",
          "--out", str(tmp_path / "a.png")], "layers 1..2"),
        (["attention", "--model", str(model_dirs[0]), "--text", "w1", "--out", "a.jpg"], ".png"),
    ]  # fmt: skip
    for args, message in cases:
        assert main(args) == 1
        error = capsys.readouterr().err.strip()
        assert message in error and "\n" not in error, error
    assert not (tmp_path / "a.png").exists()


def test_a_mostly_unknown_input_is_warned_about_with_its_share(model_dirs, tmp_path, capsys):
    """Chinese text for an English model: every piece [UNK], said on stderr, answered still."""
    assert main(["fill-mask", "--model", str(model_dirs[0]), "这家酒店很[MASK]。"]) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        "bertlab: warning: 100% of the input's pieces are [UNK] for this model's vocabulary "
        "(is it the model for this language?)\n"
    )
    assert "[MASK] 1:" in captured.out
    assert main(["fill-mask", "--model", str(model_dirs[0]), "w1 w2 zz [MASK]"]) == 0
    assert capsys.readouterr().err == ""  # a third [UNK]: no warning
    out = str(tmp_path / "a.png")
    assert main(["attention", "--model", str(model_dirs[1]), "--text", "酒店", "--out", out]) == 0
    assert "100% of the input's pieces are [UNK]" in capsys.readouterr().err


def test_attention_of_a_text_longer_than_the_positions_warns_that_it_is_cut(
    model_dirs, tmp_path, capsys, caplog
):
    """It drew the first 64 tokens without a word (the same text as a pair is refused)."""
    out = tmp_path / "long.png"
    argv = ["attention", "--model", str(model_dirs[1]), "--out", str(out), "--text"]
    assert main([*argv, " ".join(["w1"] * 100)]) == 0
    assert "(layer 2, 4 heads, 64 tokens)" in capsys.readouterr().out
    warning = (
        "the text has 100 pieces, more than the 62 that the model reads with [CLS] and [SEP]: "
        "only its first 62 are read"
    )
    assert [record.getMessage() for record in caplog.records] == [warning]
    caplog.clear()
    assert main([*argv, " ".join(["w1"] * 62)]) == 0
    assert not caplog.records


def test_an_argument_that_is_not_utf8_is_one_line(model_dirs, capsys):
    """Python hands on argv bytes that are not UTF-8 as lone surrogates (PEP 383)."""
    assert main(["fill-mask", "--model", str(model_dirs[0]), "\udce8abc [MASK]"]) == 1
    error = capsys.readouterr().err
    assert error == (
        "bertlab: error: the text '\\xe8abc [MASK]' is not UTF-8 (at character 1); convert it "
        "first (e.g. iconv -t utf-8)\n"
    )


def test_next_sentence_probability_is_the_heads_is_next_softmax(model_dirs) -> None:
    model, tokenizer = load_for_next_sentence(model_dirs[0])
    seconds = ["w2 w3 .", "w1 w1 w1 w1 w1 ."]
    probabilities = next_sentence_probabilities(model, tokenizer, "w1 w2 .", seconds)
    for second, probability in zip(seconds, probabilities, strict=True):
        encoding = tokenizer("w1 w2 .", second)
        ids = torch.tensor([encoding["input_ids"]])
        logits = model(ids, token_type_ids=torch.tensor([encoding["token_type_ids"]])).nsp_logits[0]
        assert probability == pytest.approx(logits.softmax(-1)[0].item(), abs=1e-6)


@pytest.mark.golden
def test_next_sentence_probability_equals_transformers(model_dirs) -> None:
    transformers = pytest.importorskip("transformers")
    model, tokenizer = load_for_next_sentence(model_dirs[0])
    reference = transformers.BertForNextSentencePrediction.from_pretrained(model_dirs[0]).eval()
    encoding = tokenizer("w1 w2 .", "w3 w4 .")
    with torch.no_grad():
        logits = reference(
            torch.tensor([encoding["input_ids"]]),
            token_type_ids=torch.tensor([encoding["token_type_ids"]]),
        ).logits
    # transformers' label 0: "sequence B is a continuation of sequence A"
    expected = logits.softmax(-1)[0, 0].item()
    assert next_sentence_probabilities(model, tokenizer, "w1 w2 .", ["w3 w4 ."]) == [
        pytest.approx(expected, abs=1e-6)
    ]


def test_nsp_command_prints_each_candidates_probability(model_dirs, capsys) -> None:
    assert main(["nsp", "--model", str(model_dirs[0]), "w1 w2 .", "w3 .", "w4 w5 ."]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "A: w1 w2 ."
    assert [line.split("B: ")[1] for line in lines[1:]] == ["w3 .", "w4 w5 ."]
    assert all(line.strip().split()[0].endswith("%") for line in lines[1:])


def test_nsp_refuses_models_whose_head_is_untrained_in_one_line(model_dirs, tmp_path, capsys):
    mlm_only = tmp_path / "mlm-only"
    shutil.copytree(model_dirs[0], mlm_only)
    (mlm_only / "README.md").write_text("| setting | value |\n|---|---|\n| objective | mlm |\n")
    long_text = " ".join(["w1"] * 70)
    for argv, expected in (
        (["nsp", "--model", str(model_dirs[1]), "w1 .", "w2 ."], "has no such head"),
        (["nsp", "--model", str(mlm_only), "w1 .", "w2 ."], "was pre-trained with mlm only"),
        (["nsp", "--model", str(model_dirs[0]), "w1 .", long_text], "more than the model's 64"),
    ):
        assert main(argv) == 1
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1 and expected in error, error


def test_nsp_refuses_a_pair_without_one_of_its_sentences(model_dirs, capsys):
    """A probability (51.5%) was answered for a pair that lacked a sentence."""
    model = str(model_dirs[0])
    for argv, expected in (
        (["", "w2 ."], "sentence A '' has no pieces: nothing to judge"),
        (["w1 .", "w2 .", " "], "sentence B ' ' has no pieces: nothing to judge"),
    ):
        assert main(["nsp", "--model", model, *argv]) == 1
        captured = capsys.readouterr()
        assert captured.err == f"bertlab: error: {expected}\n" and captured.out == ""


@pytest.mark.golden
def test_a_pairs_attention_equals_transformers_with_segment_ids(model_dirs) -> None:
    transformers = pytest.importorskip("transformers")
    model, tokenizer = load_encoder(model_dirs[1])
    pieces, attentions = all_attention_maps(model, tokenizer, "w1 w2 .", "w3 w4 .")
    assert pieces == ["[CLS]", "w1", "w2", ".", "[SEP]", "w3", "w4", ".", "[SEP]"]
    reference = transformers.BertModel.from_pretrained(model_dirs[1], attn_implementation="eager")
    encoding = tokenizer("w1 w2 .", "w3 w4 .")
    assert encoding["token_type_ids"] == [0] * 5 + [1] * 4
    expected = reference(
        torch.tensor([encoding["input_ids"]]),
        token_type_ids=torch.tensor([encoding["token_type_ids"]]),
        output_attentions=True,
    ).attentions
    torch.testing.assert_close(attentions, torch.stack([a[0] for a in expected]), atol=1e-5, rtol=0)


def test_attention_draws_a_pair_every_layer_and_the_line_view(model_dirs, tmp_path, capsys):
    model = str(model_dirs[0])
    base = ["attention", "--model", model, "--text", "w1 w2 .", "--pair", "w3 w4 ."]
    for extra, name, said in (
        (["--layer", "all"], "grid.png", "(2 layers, 4 heads, 9 tokens)"),
        (["--view", "lines"], "lines.png", "(layer 2, 4 heads, 9 tokens)"),
        (["--view", "lines", "--token", "w3", "--layer", "1"], "w3.png", "(layer 1, 4 heads"),
    ):
        out = tmp_path / name
        assert main([*base, *extra, "--out", str(out)]) == 0
        assert said in capsys.readouterr().out
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_attention_refuses_mixed_up_views_in_one_line(model_dirs, tmp_path, capsys) -> None:
    base = ["attention", "--model", str(model_dirs[0]), "--text", "w1 w2 ."]
    out = ["--out", str(tmp_path / "a.png")]
    for extra, expected in (
        (["--layer", "all", "--view", "lines"], "--view lines draws one layer"),
        (["--token", "w1"], "--token picks a token's lines"),
        (["--view", "lines", "--token", "w9"], "--token 'w9' is not in the text"),
        (["--layer", "last"], "--layer must be a layer number or 'all'"),
        (["--pair", " ".join(["w1"] * 70)], "more than the model's 64"),
    ):
        assert main([*base, *extra, *out]) == 1
        error = capsys.readouterr().err.strip()
        assert len(error.splitlines()) == 1 and expected in error, error


@pytest.mark.usefixtures("one_thread")
def test_nsp_refuses_the_checkpoints_of_a_run_that_never_trained_the_head(
    tiny_pretrain_args, tmp_path, capsys
):
    """A checkpoint of `--objective mlm` answered "53.25% that B follows A" from a head never
    trained (its final/ was refused by its card; a checkpoint has none): a checkpoint says its
    objective in the settings it was saved with. An mlm+nsp run's checkpoint still answers."""
    for objective in ("mlm", "mlm+nsp"):
        out = tmp_path / objective
        steps = ["--max-steps", "2", "--checkpoint-every", "2", "--objective", objective]
        assert main(tiny_pretrain_args(out, *steps)) == 0
        capsys.readouterr()
        checkpoint = out / "checkpoints" / "step-000002"
        code = main(["nsp", "--model", str(checkpoint), "w1 w2 .", "w3 ."])
        captured = capsys.readouterr()
        if objective == "mlm":
            assert code == 1 and captured.out == ""
            assert captured.err == (
                f"bertlab: error: {checkpoint} was pre-trained with mlm only: its next-sentence "
                "head is untrained, so it cannot say whether B follows A; this needs a model "
                "pre-trained with next-sentence prediction (`bertlab pretrain --objective "
                "mlm+nsp`, or Google's BERT checkpoints)\n"
            )
        else:
            assert code == 0 and "% that B follows A" in captured.out, captured
