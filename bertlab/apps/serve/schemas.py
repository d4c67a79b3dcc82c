"""The JSON API's requests and answers, as pydantic models: FastAPI validates requests against
them (422 with the field and the reason) and writes the OpenAPI description from them.

Limits that the server is started with (characters per text, texts per request) are checked by
the handlers, so one schema serves every setting; the description of each field names them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

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
    layer: int | None = Field(
        None, description="1-based (negative counts from the last); null for every layer"
    )


class EmbedRequest(Request):
    texts: Texts
    pooling: Literal["pooler", "mean", "tokens"] = Field(
        "mean",
        description="pooler: the pooled [CLS] vector; mean: the last layer's mean over the "
        "pieces; tokens: one vector per piece",
    )


# --- answers --------------------------------------------------------------------------------------


class Limits(BaseModel):
    max_text_characters: int
    max_texts: int
    max_body_bytes: int
    max_attention_pieces: int
    max_top_k: int


class ModelInfo(BaseModel):
    name: str
    architecture: str
    capabilities: list[str]
    task: str | None
    labels: list[str] | None
    label_names: list[str] | None = Field(
        description="the labels' names, in the order of labels, where the task names them"
    )
    is_regression: bool
    is_pair: bool
    has_pooler: bool
    num_layers: int
    num_heads: int
    hidden_size: int
    vocab_size: int
    max_position_embeddings: int


class ModelsAnswer(BaseModel):
    models: list[ModelInfo]
    limits: Limits


class Mask(BaseModel):
    position: int = Field(description="index of the [MASK] among the pieces, [CLS] = 0")
    tokens: list[str]
    probabilities: list[float]


class FillMaskResult(BaseModel):
    masks: list[Mask]


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
