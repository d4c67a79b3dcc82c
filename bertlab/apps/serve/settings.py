"""What `bertlab serve` is told: the models to serve, where to listen, and the input limits.

The defaults are safe for a laptop: the server listens on the loopback interface only, every
request is bounded (characters per text, texts per request, bytes per body), and at most
`max_pending` requests wait for the model at once; more are refused with 503 until the queue
drains, so a burst never grows memory without bound.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK_HOST = "127.0.0.1"  # reachable from this machine only
DEFAULT_PORT = 8000
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # a URL path segment as it is

# BERT reads at most 512 pieces (paper Appendix A.2), about 2,000 characters of English; a QA
# context may span several windows, so a text may be twice that.
MAX_TEXT_CHARACTERS = 4000
MAX_TEXTS = 32  # per request
# 32 texts of 4,000 characters at 4 UTF-8 bytes each at worst (512 KiB) fit, with JSON quoting;
# anything bigger is refused before it is read.
MAX_BODY_BYTES = 1024 * 1024
# The attention of one layer is N * L * L numbers: 128 pieces keep a whole BERT-base answer
# (12 layers, 12 heads) under 2.4M numbers.
MAX_ATTENTION_PIECES = 128
MAX_TOP_K = 50  # fill-mask candidates per [MASK]
# Generation runs one forward pass over the text so far per new piece: 128 pieces per prompt,
# about three times `bertlab generate`'s default.
MAX_NEW_TOKENS = 128
# A masked model scores a text with one forward pass per piece (pseudo-log-likelihood): 128
# pieces per text, as for attention, keep a request of 32 texts at 4,096 short passes.
MAX_MASKED_SCORE_PIECES = 128
MAX_PENDING = 64  # requests queued or running; more get 503 and Retry-After
MAX_CONNECTIONS = 256  # open connections; uvicorn answers more with 503
# Texts of concurrent requests run in one forward pass, up to this many; 1 turns batching off.
MAX_BATCH_TEXTS = 32


@dataclass(frozen=True)
class ServeLimits:
    """Input and queue limits; each refusal names the limit it hit."""

    max_text_characters: int = MAX_TEXT_CHARACTERS
    max_texts: int = MAX_TEXTS
    max_body_bytes: int = MAX_BODY_BYTES
    max_attention_pieces: int = MAX_ATTENTION_PIECES
    max_top_k: int = MAX_TOP_K
    max_new_tokens: int = MAX_NEW_TOKENS
    max_masked_score_pieces: int = MAX_MASKED_SCORE_PIECES
    max_pending: int = MAX_PENDING
    max_batch_texts: int = MAX_BATCH_TEXTS
    max_connections: int = MAX_CONNECTIONS

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ServeLimits.{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class ServeConfig:
    """The models (name -> directory), the address to listen on, and the limits.

    Attributes:
        models: (name, directory) pairs, served in this order; names are unique URL segments.
        host: the interface to bind; the loopback one unless told otherwise.
        port: the TCP port; 0 lets the system pick a free one.
        workers: threads that run the models; one uses every core through PyTorch's own threads.
        limits: input and queue limits.
    """

    models: tuple[tuple[str, Path], ...]
    host: str = LOOPBACK_HOST
    port: int = DEFAULT_PORT
    workers: int = 1
    limits: ServeLimits = field(default_factory=ServeLimits)

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("give at least one model directory")
        names = [name for name, _ in self.models]
        for name in names:
            if not MODEL_NAME.fullmatch(name):
                raise ValueError(
                    f"model name {name!r} must be 1-64 letters, digits, '_', '.' or '-', "
                    "starting with a letter or digit"
                )
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(
                f"two models are named {repeated[0]!r}; name them apart with --model NAME=DIR"
            )
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be a positive integer, got {self.workers!r}")
