"""What a feature-based head reads (BERT Sec. 5.3, Table 7): the layer combinations and
`FeatureHeadConfig`, declared without torch so that `bertlab finetune --help` lists them fast.

`bertlab.network.feature_heads` builds the head they describe.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# BERT Sec. 5.3, Table 7: which hidden states a feature-based head reads. `hidden_states` are the
# embeddings then every layer's output (N + 1 for N layers). "Last four" is the top
# min(4, N) layers, so a model of fewer than four layers sums or concatenates all of them.
LAYER_COMBINATIONS = (
    "embeddings",  # Table 7 "Embeddings": the input layer only
    "second-to-last",  # Table 7 "Second-to-Last Hidden"
    "last",  # Table 7 "Last Hidden": what fine-tuning reads
    "sum-last-four",  # Table 7 "Weighted Sum Last Four Hidden", with equal weights
    "concat-last-four",  # Table 7 "Concat Last Four Hidden": 4H features
    "sum-all",  # every hidden state (embeddings included) with equal weights
    "scalar-mix",  # ELMo eq. 1 over every hidden state: learned softmax weights and a scale
)
LAST_FOUR = 4  # BERT Table 7: the top four hidden layers
# The name `embed` and `neighbours` take, beside the layers' numbers, for ELMo's scalar mix of
# every hidden state (a pre-trained biLM's fixed one, a fine-tuned head's learned one).
SCALAR_MIX_LAYER = "mix"
NUM_LSTM_LAYERS = 2  # BERT Sec. 5.3: "a randomly initialized two-layer 768-dimensional BiLSTM"


@dataclass(frozen=True)
class FeatureHeadConfig:
    """How a head reads the encoder when it reads more than the last layer (BERT Sec. 5.3).

    Attributes:
        layers: one of LAYER_COMBINATIONS.
        use_bilstm: a randomly initialized two-layer BiLSTM between the features and the task
            layer (BERT Sec. 5.3 for the feature-based approach; Table 5's "+ BiLSTM").
        lstm_hidden_size: units per direction; None: the encoder's hidden_size (BERT used 768
            with BERT-base, its hidden size).
        do_freeze_encoder: True: the encoder's weights are fixed and it runs without dropout,
            only the mix, the BiLSTM and the task layer learn (the feature-based approach);
            False: the encoder is fine-tuned with them.
    """

    layers: str = "last"
    use_bilstm: bool = False
    lstm_hidden_size: int | None = None
    do_freeze_encoder: bool = True

    def __post_init__(self) -> None:
        if self.layers not in LAYER_COMBINATIONS:
            raise ValueError(
                f"unknown layer combination {self.layers!r}; choose one of "
                f"{', '.join(LAYER_COMBINATIONS)}"
            )
        if self.lstm_hidden_size is not None and self.lstm_hidden_size < 1:
            raise ValueError(f"lstm_hidden_size must be positive, got {self.lstm_hidden_size}")
        if self.lstm_hidden_size is not None and not self.use_bilstm:
            raise ValueError("lstm_hidden_size needs use_bilstm")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> FeatureHeadConfig:
        return cls(**values)

    def describe(self) -> str:
        """In words, e.g. "scalar-mix of the layers, a BiLSTM, frozen encoder"."""
        parts = [f"{self.layers} of the layers" if self.layers != "last" else "last layer"]
        if self.use_bilstm:
            parts.append("a two-layer BiLSTM")
        parts.append("frozen encoder" if self.do_freeze_encoder else "fine-tuned encoder")
        return ", ".join(parts)
