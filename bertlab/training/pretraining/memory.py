"""What a pre-training run's model and batch must fit, checked before anything is trained: the
sequences within the model's positions, a micro-batch's training memory within the machine's.
Beside the budget recipe (`budget`), whose batch is planned on the machine.
"""

from __future__ import annotations

import os

from bertlab.core.config import BertConfig, PretrainDataConfig

# Training memory per layer and token, from Korthikanti et al. 2022 ("Reducing Activation
# Recomputation in Large Transformer Models", section 4.1): s·b·h·(34 + 5·a·s/h) bytes in 16-bit,
# twice that in fp32. Weights, gradients and Adam's two moments: 16 bytes per parameter in fp32.
ACTIVATION_BYTES_PER_HIDDEN = 34
ATTENTION_BYTES_PER_HEAD_POSITION = 5
FP32_FACTOR = 2
TRAINING_BYTES_PER_PARAMETER = 16
MEMORY_HEADROOM = 0.9  # refuse when the estimate exceeds this share of physical memory


def check_length(config: BertConfig, data_config: PretrainDataConfig) -> None:
    """Refuse sequences longer than the model's positions."""
    if data_config.max_seq_length > config.max_position_embeddings:
        raise ValueError(
            f"--max-seq-length {data_config.max_seq_length} exceeds the model's "
            f"max_position_embeddings {config.max_position_embeddings}"
        )


def check_memory(config: BertConfig, batch_size: int, length: int) -> None:
    """Refuse a micro-batch whose training memory clearly exceeds the machine's RAM.

    Raises:
        ValueError: the estimate exceeds MEMORY_HEADROOM of the physical memory.
    """
    layer = batch_size * length * config.hidden_size
    per_layer = layer * (
        ACTIVATION_BYTES_PER_HIDDEN
        + ATTENTION_BYTES_PER_HEAD_POSITION
        * config.num_attention_heads
        * length
        / config.hidden_size
    )
    parameters = config.vocab_size * config.hidden_size + config.num_hidden_layers * (
        12 * config.hidden_size**2
    )
    needed = FP32_FACTOR * per_layer * config.num_hidden_layers
    needed += TRAINING_BYTES_PER_PARAMETER * parameters
    available = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if needed > MEMORY_HEADROOM * available:
        raise ValueError(
            f"a micro-batch of {batch_size} x {length} tokens needs about {needed / 2**30:.0f} GiB "
            f"to train, more than this machine's {available / 2**30:.0f} GiB; lower --batch-size "
            "and raise --gradient-accumulation-steps"
        )
