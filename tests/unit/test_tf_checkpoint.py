"""Google's original checkpoints: the TensorFlow-name mapping, the casing rule, and the errors.
Reading a real TensorFlow checkpoint is tested in tests/e2e/test_convert_tf.py (slow tier)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from bertlab.cli import main
from bertlab.network.bert import BertForPreTraining, BertModel
from bertlab.network.checkpoint import TIED_KEYS
from bertlab.network.tf_checkpoint import (
    hf_key,
    infer_lowercase,
    is_google_folder,
    pretraining_keys,
    state_dict_from_tf,
)
from bertlab.tokenizer.wordpiece import SPECIAL_TOKENS, read_vocab_file

TEST_DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def model(tiny_config) -> BertForPreTraining:
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config).eval()
    with torch.no_grad():
        model.cls.predictions.bias.normal_()
    return model


def test_the_key_list_equals_the_transformers_manifest():
    lines = (TEST_DATA / "hf_bert_for_pretraining_keys.txt").read_text().splitlines()
    manifest = [line for line in lines if line and not line.startswith("#")]
    assert pretraining_keys(2) == [key for key in manifest if key not in TIED_KEYS]


@pytest.mark.parametrize(
    ("tf_name", "expected"),
    [
        ("bert/embeddings/word_embeddings", ("bert.embeddings.word_embeddings.weight", False)),
        ("bert/encoder/layer_11/output/dense/kernel", ("bert.encoder.layer.11.output.dense.weight",
                                                       True)),
        ("bert/encoder/layer_0/attention/output/LayerNorm/beta",
         ("bert.encoder.layer.0.attention.output.LayerNorm.bias", False)),
        ("cls/predictions/output_bias", ("cls.predictions.bias", False)),
        ("cls/seq_relationship/output_weights", ("cls.seq_relationship.weight", False)),
        ("global_step", None),
        ("bert/pooler/dense/kernel/adam_m", None),
        ("bert/pooler/dense/kernel/adam_v", None),
        ("bert/pooler/dense/kernel/AdamWeightDecayOptimizer_1", None),
    ],
)  # fmt: skip
def test_google_names_map_to_hugging_face_keys(tf_name, expected):
    assert hf_key(tf_name) == expected


def test_converted_weights_give_the_same_outputs(model, batch, to_google_variables):
    variables = to_google_variables(model)
    variables["global_step"] = np.array(1000)
    variables["bert/pooler/dense/kernel/adam_m"] = np.zeros((32, 32))
    converted = BertForPreTraining(model.config).eval()
    converted.load_state_dict(state_dict_from_tf(variables, 2), strict=False)
    converted.tie_weights()
    with torch.no_grad():
        ours, reference = converted(**batch), model(**batch)
    torch.testing.assert_close(ours.mlm_logits, reference.mlm_logits, rtol=0, atol=0)
    torch.testing.assert_close(ours.nsp_logits, reference.nsp_logits, rtol=0, atol=0)


def test_a_missing_encoder_weight_is_refused(model, to_google_variables):
    variables = to_google_variables(model)
    del variables["bert/encoder/layer_1/output/dense/kernel"]
    with pytest.raises(ValueError, match=r"lacks 1 encoder weights, e.g. bert.encoder.layer.1"):
        state_dict_from_tf(variables, 2)


def test_fine_tuning_variables_are_left_out_with_a_warning(model, caplog, to_google_variables):
    variables = to_google_variables(model) | {"output_weights": np.zeros((2, 32))}
    assert "output_weights" not in state_dict_from_tf(variables, 2)
    assert "not converted" in caplog.text and "output_weights" in caplog.text


def test_casing_is_read_from_the_vocabulary(shared_data):
    vocab = shared_data / "vocab"
    assert infer_lowercase(read_vocab_file(vocab / "bert-base-uncased-vocab.txt"))
    assert not infer_lowercase(read_vocab_file(vocab / "bert-base-cased-vocab.txt"))
    # Google lists chinese_L-12_H-768_A-12 as lower-cased; its <S> and <T> are markers.
    assert infer_lowercase(read_vocab_file(vocab / "bert-base-chinese-vocab.txt"))


def test_casing_rule_on_small_vocabularies():
    words = [f"word{index}" for index in range(300)]
    assert infer_lowercase({piece: i for i, piece in enumerate([*SPECIAL_TOKENS, *words])})
    cased = [*SPECIAL_TOKENS, *words, *(word.title() for word in words)]
    assert not infer_lowercase({piece: i for i, piece in enumerate(cased)})


def _google_folder(tmp_path, model) -> Path:
    folder = tmp_path / "uncased_L-2_H-32_A-4"
    folder.mkdir()
    values = {key: value for key, value in model.config.to_dict().items() if key != "model_type"}
    (folder / "bert_config.json").write_text(json.dumps(values))
    (folder / "vocab.txt").write_text("\n".join(SPECIAL_TOKENS) + "\n")
    return folder


def test_loading_a_google_folder_says_to_convert_it(tmp_path, model):
    folder = _google_folder(tmp_path, model)
    assert is_google_folder(folder)
    with pytest.raises(
        FileNotFoundError, match=r"Google's original TensorFlow checkpoint; .*convert"
    ):
        BertModel.from_pretrained(folder)


def test_convert_without_tensorflow_is_one_line_naming_the_extra(
    tmp_path, model, capsys, monkeypatch
):
    folder = _google_folder(tmp_path, model)
    (folder / "bert_model.ckpt.index").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # as if not installed
    with open(folder / "vocab.txt", "w") as file:
        file.write("\n".join([*SPECIAL_TOKENS, *(f"w{i}" for i in range(99 - 5))]) + "\n")
    code = main(["convert", str(folder), "--out", str(tmp_path / "out")])
    stderr = capsys.readouterr().err
    assert code == 1 and stderr.count("\n") == 1, stderr
    assert "pip install 'bertlab[tf]'" in stderr
    assert not (tmp_path / "out").exists()


def test_convert_refuses_a_folder_without_bert_config(tmp_path, capsys):
    code = main(["convert", str(tmp_path), "--out", str(tmp_path / "out")])
    stderr = capsys.readouterr().err
    assert code == 1 and "no bert_config.json" in stderr and stderr.count("\n") == 1
