"""The LSTM-era language models by name: `LM_ARCHITECTURES` maps each name `--architecture`
takes (`core.lstm_config.LM_ARCHITECTURE_NAMES`, torch-free for `--help`) to its config class
and model class, in one place.
"""

from __future__ import annotations

from bertlab.core.lstm_config import (
    AWD_LSTM,
    ELMO,
    LM_ARCHITECTURE_NAMES,
    NNLM,
    AwdLstmConfig,
    ElmoConfig,
    NnlmConfig,
)
from bertlab.network.awd_lstm import AwdLstmForLanguageModeling
from bertlab.network.elmo import ElmoForLanguageModeling
from bertlab.network.lm_base import LanguageModel
from bertlab.network.nnlm import NnlmForLanguageModeling

LM_ARCHITECTURES: dict[str, tuple[type, type[LanguageModel]]] = {
    NNLM: (NnlmConfig, NnlmForLanguageModeling),
    ELMO: (ElmoConfig, ElmoForLanguageModeling),
    AWD_LSTM: (AwdLstmConfig, AwdLstmForLanguageModeling),
}
assert tuple(LM_ARCHITECTURES) == LM_ARCHITECTURE_NAMES  # one list of names


def lm_architecture(name: str) -> tuple[type, type[LanguageModel]]:
    """(config class, model class) of architecture `name`.

    Raises:
        ValueError: an unknown name, naming the known ones.
    """
    if name not in LM_ARCHITECTURES:
        raise ValueError(f"unknown architecture {name!r}; choose one of {LM_ARCHITECTURE_NAMES}")
    return LM_ARCHITECTURES[name]
