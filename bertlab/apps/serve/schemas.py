"""The JSON API's requests and answers, as pydantic models: FastAPI validates requests against
them (422 with the field and the reason) and writes the OpenAPI description from them.

Limits that the server is started with (characters per text, texts per request) are checked by
the handlers, so one schema serves every setting; the description of each field names them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from bertlab.use.feature_options import POOLINGS
from bertlab.use.generation_options import DEFAULT_MAX_NEW_TOKENS, DEFAULT_TOP_K

NonEmpty = Annotated[str, Field(min_length=1)]
Texts = Annotated[
    list[NonEmpty],
    Field(min_length=1, description="the texts, one result each (limits: GET /api/models)"),
]


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not ignored


class FillMaskRequest(Request):
    texts: Texts
    top_k: int = Field(5, ge=1, description="candidates per [MASK]")


class GenerateRequest(Request):
    texts: Annotated[
        list[NonEmpty],
        Field(
            min_length=1, description="the prompts, one continuation each (limits: GET /api/models)"
        ),
    ]
    max_new_tokens: int = Field(DEFAULT_MAX_NEW_TOKENS, ge=1, description="pieces to add at most")
    temperature: float = Field(
        1.0,
        gt=0,
        allow_inf_nan=False,
        description="below 1 sharpens the next piece's distribution, above 1 flattens",
    )
    top_k: int | None = Field(
        DEFAULT_TOP_K, ge=1, description="sample among this many pieces; null: every piece"
    )
    seed: int = Field(
        0, ge=0, lt=2**63, description="the same prompt, settings and seed give the same text"
    )


class ScoreRequest(Request):
    texts: Texts


class ClassifyRequest(Request):
    texts: Texts
    text_pairs: list[NonEmpty] | None = Field(
        None, description="second texts, one per text, for models fine-tuned on pairs"
    )


class TagRequest(Request):
    texts: Texts


class Question(Request):
    question: NonEmpty
    context: NonEmpty


class AnswerRequest(Request):
    inputs: list[Question] = Field(min_length=1)


class AttentionRequest(Request):
    text: NonEmpty
    pair: NonEmpty | None = Field(
        None, description="sentence B: the pair [CLS] text [SEP] pair [SEP], B in segment 1"
    )
    layer: int | None = Field(
        None, description="1-based (negative counts from the last); null for every layer"
    )


PoolingName = Literal[POOLINGS]  # type: ignore[valid-type]


class EmbedRequest(Request):
    texts: Texts
    pooling: PoolingName = Field(
        "mean",
        description="bertlab embed's names (bertlab.use.feature_options.POOLINGS), at the last "
        "layer: one "
        "vector per text (cls; mean over the pieces; last, a left-to-right model's; pooler, the "
        "pooled [CLS] vector) or one per piece (pieces; tokens, its old name) or per word "
        "(first, mean-pieces)",
    )


# --- answers --------------------------------------------------------------------------------------


class Limits(BaseModel):
    max_text_characters: int
    max_texts: int
    max_body_bytes: int
    max_attention_pieces: int
    max_top_k: int
    max_new_tokens: int
    max_masked_score_pieces: int


class ModelInfo(BaseModel):
    name: str
    architecture: str
    capabilities: list[str] = Field(
        description="what it can do: the endpoints (and views) that take it, in the page's order"
    )
    is_causal: bool = Field(description="a left-to-right model (generate, not fill-mask)")
    task: str | None
    labels: list[str] | None
    label_names: list[str] | None = Field(
        description="the labels' names, in the order of labels, where the task names them"
    )
    is_regression: bool
    is_pair: bool
    has_pooler: bool
    num_layers: int
    num_heads: int | None = Field(description="attention heads; None: an LSTM-era model")
    hidden_size: int
    vocab_size: int
    max_position_embeddings: int | None = Field(
        description="the longest input; None: any length (an LSTM-era model)"
    )


class ModelsAnswer(BaseModel):
    models: list[ModelInfo]
    limits: Limits


class Mask(BaseModel):
    position: int = Field(description="index of the [MASK] among the pieces, [CLS] = 0")
    tokens: list[str]
    probabilities: list[float]


class FillMaskResult(BaseModel):
    masks: list[Mask]


class GenerateResult(BaseModel):
    text: str = Field(description="the prompt and its continuation, as the tokenizer writes them")
    continuation: str = Field(description="what the model added")


class ScoreResult(BaseModel):
    kind: Literal["log-probability", "pseudo-log-likelihood"] = Field(
        description="a left-to-right model's log-probability, or a masked model's "
        "pseudo-log-likelihood (Salazar et al. 2020)"
    )
    total: float = Field(description="the sum over the pieces, in nats; higher is more probable")
    perplexity: float = Field(description="exp(-total / number of pieces)")
    pieces: list[str] = Field(description="the scored pieces ([SEP], the end, for a causal model)")
    log_probs: list[float] = Field(description="each piece's term of the total")
    is_all_unknown: bool = Field(description="every piece is [UNK]: the score says nothing")
    rank: int | None = Field(
        description="1 for the request's most probable text; null for a text of [UNK]s only"
    )


class LabelProbability(BaseModel):
    label: str
    name: str | None = Field(description="the label's name (SST-2: 1 is positive), or null")
    probability: float


class ClassifyResult(BaseModel):
    label: str | None = Field(description="the most probable label; null for regression")
    name: str | None = Field(
        description="its name where the task names its labels (SST-2: 1 is positive), or null"
    )
    score: float = Field(description="its probability, or the regression output")
    probabilities: list[LabelProbability] = Field(description="every label, most probable first")


class Word(BaseModel):
    text: str
    start: int
    end: int
    tag: str


class Entity(BaseModel):
    type: str
    text: str
    start: int = Field(description="first character in the text")
    end: int = Field(description="one past the last character")


class TagResult(BaseModel):
    words: list[Word]
    entities: list[Entity]


class AnswerResult(BaseModel):
    answer: str = Field(description="the span of the context; empty when there is none")
    start: int | None
    end: int | None
    score: float | None = Field(description="start logit + end logit (BERT Sec. 4.2)")


class EmbedResult(BaseModel):
    tokens: list[str]
    vector: list[float] | None
    vectors: list[list[float]] | None


class FillMaskAnswer(BaseModel):
    model: str
    results: list[FillMaskResult]


class GenerateAnswer(BaseModel):
    model: str
    results: list[GenerateResult]


class ScoreAnswer(BaseModel):
    model: str
    results: list[ScoreResult]


class ClassifyAnswer(BaseModel):
    model: str
    results: list[ClassifyResult]


class TagAnswer(BaseModel):
    model: str
    results: list[TagResult]


class AnswerAnswer(BaseModel):
    model: str
    results: list[AnswerResult]


class AttentionAnswer(BaseModel):
    model: str
    tokens: list[str]
    segments: list[int] = Field(
        description="each piece's segment: 0 for [CLS], the text and its [SEP], 1 for sentence B"
    )
    layers: list[int] = Field(description="the 1-based layers, one per entry of attentions")
    attentions: list[list[list[list[float]]]] = Field(
        description="(layers, heads, L, L): row = the attending piece, column = the attended-to"
    )


class EmbedAnswer(BaseModel):
    model: str
    pooling: str
    results: list[EmbedResult]


class Problem(BaseModel):
    detail: str = Field(description="what was wrong, in one line")
