"""The web app: the JSON API under /api, the page at /, the OpenAPI description at /openapi.json.

Every error is JSON `{"detail": "one line"}` with a 4xx status that says whose fault it was:
404 an unknown model, 413 a body over the size limit, 400 a body that is not UTF-8 or a Host
header that is not this server's, 415 a body not sent as `application/json`, 422 a
request the schema or the model cannot take (empty or too long text, wrong types, missing
fields, a task the model's head cannot do), 503 a full queue (with Retry-After). The server keeps
serving after each.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from bertlab.apps.serve import fonts, inference, language_model
from bertlab.apps.serve.guards import RequestGuard
from bertlab.apps.serve.models import (
    ANSWER,
    ATTENTION,
    CLASSIFY,
    EMBED,
    FILL_MASK,
    GENERATE,
    SCORE,
    TAG,
    CapabilityError,
    ServedModel,
)
from bertlab.apps.serve.queue import BatchingQueue, Overloaded
from bertlab.apps.serve.schemas import (
    AnswerAnswer,
    AnswerRequest,
    AttentionAnswer,
    AttentionRequest,
    ClassifyAnswer,
    ClassifyRequest,
    EmbedAnswer,
    EmbedRequest,
    FillMaskAnswer,
    FillMaskRequest,
    GenerateAnswer,
    GenerateRequest,
    ModelsAnswer,
    Problem,
    ScoreAnswer,
    ScoreRequest,
    TagAnswer,
    TagRequest,
)
from bertlab.apps.serve.settings import ServeLimits
from bertlab.tokenizer.wordpiece import MASK_TOKEN

logger = logging.getLogger(__name__)

STATIC = Path(str(resources.files("bertlab.apps.serve") / "static"))
RETRY_AFTER_SECONDS = "1"
ERRORS = {status: {"model": Problem} for status in (400, 404, 413, 415, 422, 503)}


class Service:
    """What the routes share: the models by name, the limits and the queue."""

    def __init__(self, models: Sequence[ServedModel], limits: ServeLimits, workers: int) -> None:
        self.models = {model.name: model for model in models}
        self.limits = limits
        self.queue = BatchingQueue(workers, limits.max_pending, limits.max_batch_texts)

    def model(self, name: str, capability: str) -> ServedModel:
        """The model named `name`, if it can do `capability` (else 404 or 422)."""
        if name not in self.models:
            raise HTTPException(
                404, f"no model named {name!r}; this server has: {', '.join(self.models)}"
            )
        try:
            self.models[name].require(capability)
        except CapabilityError as error:
            raise HTTPException(422, str(error)) from None
        return self.models[name]

    def check_texts(self, texts: Sequence[str], field: str) -> None:
        """422 for too many texts, an empty one, or one over the character limit."""
        limits = self.limits
        if len(texts) > limits.max_texts:
            raise HTTPException(
                422, f"{field}: {len(texts)} texts; this server takes at most {limits.max_texts}"
            )
        for index, text in enumerate(texts):
            if not text.strip():
                raise HTTPException(422, f"{field}[{index}] is empty (only whitespace)")
            if len(text) > limits.max_text_characters:
                raise HTTPException(
                    422,
                    f"{field}[{index}] has {len(text)} characters; this server takes at most "
                    f"{limits.max_text_characters} per text",
                )

    async def run(self, key: tuple, function: Callable, inputs: Sequence) -> list:
        """`function(inputs)` through the queue; 503 when it is full, 422 for a ValueError."""
        try:
            return await self.queue.submit(key, function, inputs)
        except Overloaded as error:
            raise HTTPException(503, str(error), {"Retry-After": RETRY_AFTER_SECONDS}) from None
        except ValueError as error:
            raise HTTPException(422, str(error)) from None


def create_app(
    models: Sequence[ServedModel],
    limits: ServeLimits | None = None,
    workers: int = 1,
    allowed_hosts: Sequence[str] = ("*",),
) -> FastAPI:
    """The ASGI app serving `models` (already loaded) within `limits`.

    Args:
        models: the loaded models, each under its name.
        limits: input and queue limits; the defaults when None.
        workers: threads that run the models.
        allowed_hosts: values of the Host header to answer (others get 400), against DNS
            rebinding: a page elsewhere cannot reach a loopback server under its own name.
    """
    service = Service(models, limits or ServeLimits(), workers)
    if fonts.cjk_font_file() is None:
        logger.warning(fonts.MISSING_CJK_FONT)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        service.queue.start()
        yield
        await service.queue.stop()

    app = FastAPI(
        title="bertlab serve",
        summary="Use and look inside BERT models: fill-mask, generate, score, classify, tag, "
        "answer, attention, embed",
        version="1",
        docs_url=None,  # Swagger UI loads its scripts from a CDN; the page here needs none
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.service = service
    app.add_middleware(
        RequestGuard,
        max_body_bytes=service.limits.max_body_bytes,
        allowed_hosts=tuple(allowed_hosts),
    )
    app.add_exception_handler(RequestValidationError, _validation_problem)
    app.include_router(router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def _service(request: Request) -> Service:
    return request.app.state.service


Served = Annotated[Service, Depends(_service)]
router = APIRouter()


@router.get("/", include_in_schema=False)
async def page() -> FileResponse:
    return FileResponse(STATIC / "index.html")


@router.get(fonts.CJK_FONT_ROUTE, include_in_schema=False)
def cjk_font() -> Response:
    """The CJK font the page's CSS falls back on (Noto Sans CJK SC), or 404 without it.

    A plain function, so FastAPI runs it in a thread: the first call copies the face out of
    the collection (0.3 s) without holding up the other requests.
    """
    font = fonts.cjk_font()
    if font is None:
        raise HTTPException(404, fonts.MISSING_CJK_FONT)
    headers = {"Cache-Control": fonts.CJK_FONT_CACHE_CONTROL}
    return Response(font, media_type=fonts.CJK_FONT_MEDIA_TYPE, headers=headers)


@router.get("/api/models", response_model=ModelsAnswer)
async def list_models(service: Served) -> dict:
    """The served models, what each can do, and the server's input limits."""
    shown = ("max_text_characters", "max_texts", "max_body_bytes", "max_attention_pieces")
    shown += ("max_top_k", "max_new_tokens", "max_masked_score_pieces")
    return {
        "models": [model.describe() for model in service.models.values()],
        "limits": {name: getattr(service.limits, name) for name in shown},
    }


@router.get("/api/health")
async def health(service: Served) -> dict:
    """Whether the server answers, its queue, and how many calls ran how many inputs."""
    return {
        "status": "ok",
        "pending": service.queue.num_pending,
        "batch_sizes": dict(sorted(service.queue.batch_sizes.items())),
    }


@router.post("/api/models/{name}/fill-mask", response_model=FillMaskAnswer, responses=ERRORS)
async def fill_mask(name: str, body: FillMaskRequest, service: Served) -> dict:
    """The most probable pieces at every [MASK] of each text (a pre-trained model)."""
    model = service.model(name, FILL_MASK)
    service.check_texts(body.texts, "texts")
    if body.top_k > service.limits.max_top_k:
        raise HTTPException(422, f"top_k is at most {service.limits.max_top_k}, got {body.top_k}")
    for index, text in enumerate(body.texts):
        if MASK_TOKEN not in text:
            raise HTTPException(422, f"texts[{index}] has no {MASK_TOKEN} to fill")
    run_batch = functools.partial(inference.fill_mask, model, top_k=body.top_k)
    results = await service.run((name, FILL_MASK, body.top_k), run_batch, body.texts)
    return {"model": name, "results": results}


@router.post("/api/models/{name}/generate", response_model=GenerateAnswer, responses=ERRORS)
async def generate(name: str, body: GenerateRequest, service: Served) -> dict:
    """Each prompt continued by a left-to-right model, sampled with the seed given."""
    model = service.model(name, GENERATE)
    service.check_texts(body.texts, "texts")
    if body.max_new_tokens > service.limits.max_new_tokens:
        raise HTTPException(
            422,
            f"max_new_tokens is at most {service.limits.max_new_tokens}, got {body.max_new_tokens}",
        )
    sampling = language_model.Sampling(body.max_new_tokens, body.temperature, body.top_k, body.seed)
    run_batch = functools.partial(language_model.continue_texts, model, sampling=sampling)
    results = await service.run((name, GENERATE, sampling), run_batch, body.texts)
    return {"model": name, "results": results}


@router.post("/api/models/{name}/score", response_model=ScoreAnswer, responses=ERRORS)
async def score(name: str, body: ScoreRequest, service: Served) -> dict:
    """How probable each text is (nats), and its rank among the request's texts."""
    model = service.model(name, SCORE)
    service.check_texts(body.texts, "texts")
    run_batch = functools.partial(
        language_model.score, model, max_masked_pieces=service.limits.max_masked_score_pieces
    )
    results = await service.run((name, SCORE), run_batch, body.texts)
    return {"model": name, "results": language_model.ranked(results)}


@router.post("/api/models/{name}/classify", response_model=ClassifyAnswer, responses=ERRORS)
async def classify(name: str, body: ClassifyRequest, service: Served) -> dict:
    """The label of each text (or text pair) with every label's probability, or a score."""
    model = service.model(name, CLASSIFY)
    service.check_texts(body.texts, "texts")
    pairs = body.text_pairs
    if model.is_pair and pairs is None:
        raise HTTPException(422, f"model {name!r} classifies text pairs: give text_pairs")
    if pairs is not None:
        if not model.is_pair:
            raise HTTPException(422, f"model {name!r} classifies single texts, not pairs")
        if len(pairs) != len(body.texts):
            raise HTTPException(
                422, f"{len(body.texts)} texts but {len(pairs)} text_pairs; give one each"
            )
        service.check_texts(pairs, "text_pairs")
    inputs = list(zip(body.texts, pairs or [None] * len(body.texts), strict=True))
    run_batch = functools.partial(inference.classify, model)
    return {"model": name, "results": await service.run((name, CLASSIFY), run_batch, inputs)}


@router.post("/api/models/{name}/tag", response_model=TagAnswer, responses=ERRORS)
async def tag(name: str, body: TagRequest, service: Served) -> dict:
    """Each word's tag, and the entities as character spans, of each text."""
    model = service.model(name, TAG)
    service.check_texts(body.texts, "texts")
    run_batch = functools.partial(inference.tag, model)
    return {"model": name, "results": await service.run((name, TAG), run_batch, body.texts)}


@router.post("/api/models/{name}/answer", response_model=AnswerAnswer, responses=ERRORS)
async def answer(name: str, body: AnswerRequest, service: Served) -> dict:
    """The answer span of each question in its context (extractive QA)."""
    model = service.model(name, ANSWER)
    questions = [item.question for item in body.inputs]
    contexts = [item.context for item in body.inputs]
    service.check_texts(questions, "questions")
    service.check_texts(contexts, "contexts")
    inputs = list(zip(questions, contexts, strict=True))
    run_batch = functools.partial(inference.answer, model)
    return {"model": name, "results": await service.run((name, ANSWER), run_batch, inputs)}


@router.post("/api/models/{name}/attention", response_model=AttentionAnswer, responses=ERRORS)
async def attention(name: str, body: AttentionRequest, service: Served) -> dict:
    """One layer's (or every layer's) attention over the pieces of a text or a pair, every
    head."""
    model = service.model(name, ATTENTION)
    service.check_texts([body.text], "text")
    if body.pair is not None:
        service.check_texts([body.pair], "pair")
    max_pieces = service.limits.max_attention_pieces

    def run_one(texts: list[str]) -> list[dict]:
        return [inference.attention(model, texts[0], body.layer, max_pieces, body.pair)]

    # A key of its own: an attention request is never batched with another.
    (result,) = await service.run((name, ATTENTION, object()), run_one, [body.text])
    return {"model": name, **result}


@router.post("/api/models/{name}/embed", response_model=EmbedAnswer, responses=ERRORS)
async def embed(name: str, body: EmbedRequest, service: Served) -> dict:
    """A vector per text, per piece or per word (`bertlab embed`'s pooling names)."""
    model = service.model(name, EMBED)
    service.check_texts(body.texts, "texts")
    # inference.embed refuses a pooling the model cannot give (a ValueError: 422, in its words)
    run_batch = functools.partial(inference.embed, model, pooling=body.pooling)
    results = await service.run((name, EMBED, body.pooling), run_batch, body.texts)
    return {"model": name, "pooling": body.pooling, "results": results}


async def _validation_problem(request: Request, error: RequestValidationError) -> JSONResponse:
    """422 with one line naming each bad field, and the fields (location, message, type)."""
    problems, errors = [], []
    for item in error.errors():
        location = [part for part in item.get("loc", ()) if part != "body"]
        if item.get("type") == "json_invalid":
            reason = (item.get("ctx") or {}).get("error", "")
            problems.append(f"the body is not valid JSON at character {location[0]}: {reason}")
        else:
            where = ".".join(str(part) for part in location) or "body"
            problems.append(f"{where}: {item.get('msg', 'invalid')}")
        errors.append({key: item.get(key) for key in ("loc", "msg", "type")})
    detail = "; ".join(problems) or "the request is not valid"
    return JSONResponse({"detail": detail, "errors": jsonable_encoder(errors)}, status_code=422)
