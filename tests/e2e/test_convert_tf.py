"""`bertlab convert` on a Google-layout folder whose checkpoint TensorFlow itself wrote (slow
tier; needs the `bertlab[tf]` extra, skipped without TensorFlow): the converted model's outputs
equal `transformers` running the same weights, within 1e-5.

Run it in an environment with TensorFlow: `pip install -e '.[dev,tf]'`, then
`python -m pytest -m slow tests/e2e/test_convert_tf.py`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bertlab.cli import main
from bertlab.network.bert import BertForPreTraining
from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS, Tokenizer

pytestmark = pytest.mark.slow
tf = pytest.importorskip("tensorflow")


def write_google_folder(folder: Path, model: BertForPreTraining, vocab: list[str], variables):
    """bert_config.json, vocab.txt and bert_model.ckpt.* as google-research/bert's releases hold
    them: a TF1 name-based checkpoint written by `tf.compat.v1.train.Saver`."""
    folder.mkdir()
    config = {
        k: v for k, v in model.config.to_dict().items() if k not in ("model_type", "is_decoder")
    }
    (folder / "bert_config.json").write_text(json.dumps(config, indent=2))
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    with tf.Graph().as_default():
        tf_variables = [
            tf.compat.v1.Variable(value, name=name) for name, value in variables.items()
        ]
        tf_variables.append(tf.compat.v1.Variable(1000, name="global_step", dtype=tf.int64))
        saver = tf.compat.v1.train.Saver(tf_variables)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(folder / "bert_model.ckpt"))


@pytest.fixture
def vocab() -> list[str]:
    return [*SPECIAL_TOKENS, *(f"word{index}" for index in range(94))]


@pytest.fixture
def model(tiny_config) -> BertForPreTraining:
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config).eval()
    with torch.no_grad():
        model.cls.predictions.bias.normal_()
    return model


def test_converted_checkpoint_matches_transformers_on_the_same_weights(
    tmp_path, model, vocab, batch, to_google_variables, capsys
):
    hf = pytest.importorskip("transformers")
    google = tmp_path / "uncased_L-2_H-32_A-4"
    write_google_folder(google, model, vocab, to_google_variables(model))
    assert {"bert_model.ckpt.index", "bert_model.ckpt.data-00000-of-00001"} <= {
        path.name for path in google.iterdir()
    }
    out = tmp_path / "converted"
    assert main(["convert", str(google), "--out", str(out)]) == 0, capsys.readouterr().err
    ours = BertForPreTraining.from_pretrained(out).eval()
    reference = hf.BertForPreTraining(hf.BertConfig(**model.config.to_dict())).eval()
    reference.load_state_dict(model.state_dict(), strict=True)
    with torch.no_grad():
        mine, theirs = ours(**batch), reference(**batch)
    torch.testing.assert_close(mine.mlm_logits, theirs.prediction_logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(mine.nsp_logits, theirs.seq_relationship_logits, rtol=0, atol=1e-5)
    converted = hf.BertForPreTraining.from_pretrained(out).eval()  # loads in transformers too
    with torch.no_grad():
        torch.testing.assert_close(
            converted(**batch).prediction_logits, theirs.prediction_logits, rtol=0, atol=1e-5
        )
    assert Tokenizer.from_pretrained(out).options.lowercase  # an uncased vocabulary


def test_a_cased_vocabulary_converts_to_a_cased_tokenizer(
    tmp_path, model, vocab, to_google_variables, capsys
):
    cased = [*SPECIAL_TOKENS, *(f"Word{index}" for index in range(94))]
    google = tmp_path / "cased_L-2_H-32_A-4"
    write_google_folder(google, model, cased, to_google_variables(model))
    out = tmp_path / "converted"
    assert main(["convert", str(google), "--out", str(out)]) == 0, capsys.readouterr().err
    assert not Tokenizer.from_pretrained(out).options.lowercase
    assert main(["convert", str(google), "--out", str(tmp_path / "forced"), "--lowercase"]) == 0
    assert Tokenizer.from_pretrained(tmp_path / "forced").options.lowercase


def test_the_converted_folder_serves_as_model(tmp_path, model, vocab, to_google_variables, capsys):
    google = tmp_path / "uncased_L-2_H-32_A-4"
    write_google_folder(google, model, vocab, to_google_variables(model))
    out = tmp_path / "converted"
    assert main(["convert", str(google), "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["fill-mask", "--model", str(out), "word1 [MASK] word2"]) == 0
    assert "[MASK] 1:" in capsys.readouterr().out
