"""AWD-LSTM and ULMFiT's classifier against fastai's (`fastai.text.models`), given the same
weights: the outputs agree to 1e-5 in eval mode (fp32, no padding: fastai pads at the start).

fastai is a test-only dependency, skipped when absent. Its plain `pip install fastai` does not
keep torch 2.13.0 (its torchvision requirement pulls a newer torch); what these tests need
installs beside it without touching torch:

    pip install fastcore fasttransform fastprogress fastdownload "plum-dispatch<2.10"
    pip install --no-deps fastai==2.8.12

(`fastai.text.models` imports neither torchvision nor spaCy.)
"""

from __future__ import annotations

import pytest
import torch

from bertlab.core.lstm_config import AwdLstmConfig
from bertlab.network.awd_lstm import AwdLstmForLanguageModeling
from bertlab.network.ulmfit import UlmfitForSequenceClassification

awdlstm = pytest.importorskip("fastai.text.models.awdlstm")
fastai_core = pytest.importorskip("fastai.text.models.core")
pytestmark = pytest.mark.golden

ATOL = 1e-5
VOCAB = 101


def fastai_config(config: AwdLstmConfig) -> dict:
    """fastai's `awd_lstm_lm_config` keys for `config`."""
    return {
        "emb_sz": config.embedding_size,
        "n_hid": config.hidden_size,
        "n_layers": config.num_hidden_layers,
        "pad_token": config.pad_token_id,
        "bidir": False,
        "output_p": config.output_dropout_prob,
        "hidden_p": config.hidden_dropout_prob,
        "input_p": config.input_dropout_prob,
        "embed_p": config.embedding_dropout_prob,
        "weight_p": config.weight_dropout_prob,
    }


def fastai_key(key: str, body: str) -> list[str]:
    """The fastai keys that hold our weight `key` (`body`: where fastai's AWD_LSTM sits)."""
    key = key.replace("awd_lstm.", body)
    if key == f"{body}encoder.weight":  # fastai's embedding dropout wraps the same module
        return [key, f"{body}encoder_dp.emb.weight"]
    if ".rnns." in key:
        prefix, name = key.rsplit(".", 1)
        return [
            f"{prefix}.weight_hh_l0_raw" if name == "weight_hh_l0" else f"{prefix}.module.{name}"
        ]
    if key.startswith("classifier.layers."):
        index, name = key.removeprefix("classifier.layers.").split(".", 1)
        block, position = divmod(int(index), 4)  # BN, Dropout, Linear, ReLU per LinBnDrop
        return [f"1.layers.{block}.{position}.{name}"]
    return [key.replace("decoder.", "1.decoder.")]


def copy_into_fastai(ours: torch.nn.Module, theirs: torch.nn.Module, body: str) -> None:
    state = {}
    for key, value in ours.state_dict().items():
        for target in fastai_key(key, body):
            state[target] = value
    assert set(state) == set(theirs.state_dict())
    theirs.load_state_dict(state, strict=True)


def random_config(**changes) -> AwdLstmConfig:
    return AwdLstmConfig(vocab_size=VOCAB, embedding_size=12, hidden_size=20, **changes)


def test_awd_lstm_language_model_matches_fastai() -> None:
    torch.manual_seed(0)
    config = random_config()
    ours = AwdLstmForLanguageModeling(config).eval()
    with torch.no_grad():
        ours.decoder.bias.normal_()
    theirs = fastai_core.get_language_model(
        awdlstm.AWD_LSTM,
        VOCAB,
        config=fastai_config(config) | {"tie_weights": True, "out_bias": True},
    ).eval()
    copy_into_fastai(ours, theirs, "0.")
    input_ids = torch.randint(1, VOCAB, (3, 17), generator=torch.Generator().manual_seed(1))
    theirs.reset()
    logits, last, _ = theirs(input_ids)
    with torch.no_grad():
        output = ours(input_ids)
    torch.testing.assert_close(output.layers[-1], last, rtol=0, atol=ATOL)
    torch.testing.assert_close(output.logits, logits, rtol=0, atol=ATOL)


def test_ulmfit_classifier_matches_fastai() -> None:
    torch.manual_seed(0)
    config = random_config().with_classifier_dropouts()
    ours = UlmfitForSequenceClassification(config, num_labels=3).eval()
    with torch.no_grad():  # non-trivial BatchNorm statistics and affine parameters
        for module in ours.classifier.layers:
            if isinstance(module, torch.nn.BatchNorm1d):
                module.running_mean.normal_()
                module.running_var.uniform_(0.5, 2.0)
                module.weight.normal_()
                module.bias.normal_()
    theirs = fastai_core.get_text_classifier(
        awdlstm.AWD_LSTM, VOCAB, 3, seq_len=72, config=fastai_config(config), pad_idx=0
    ).eval()
    copy_into_fastai(ours, theirs, "0.module.")
    input_ids = torch.randint(1, VOCAB, (4, 15), generator=torch.Generator().manual_seed(2))
    logits, _, _ = theirs(input_ids)
    with torch.no_grad():
        torch.testing.assert_close(ours(input_ids).logits, logits, rtol=0, atol=ATOL)
