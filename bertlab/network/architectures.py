"""Every network bertlab uses, one entry each: how a folder of it is loaded and read, and how it
fine-tunes by default. Code looks the entry up by the folder's config.json (`architecture`:
`nnlm`, `elmo`, `awd-lstm`; a BERT folder has none) and calls it; no use, loop or command tests
an architecture's name or a model's class.

- `bert`: `embed` reads its hidden states; `score-text` and `generate` a left-to-right
  (`--objective clm`) model's next token, `score-text` a masked model's pseudo-log-likelihood;
  it fine-tunes its task heads with BERT's recipe, the rate and epochs by its width.
- `nnlm`: `embed` reads its vectors C (layer 0) and its tanh layer; `score-text` and `generate`
  the next piece from the window; it fine-tunes its vectors as the starting embeddings of the
  task model word2vec's vectors start (a random encoder of BERT-Tiny's shape at their width),
  trained with it (frozen, they left that model at the class prior: `NNLM_VECTORS_TRAIN`).
- `elmo`: `embed` reads the token layer, each biLSTM layer and the scalar mix (fixed; a
  fine-tuned head's, learned); `score-text` and `generate` the forward LM; it fine-tunes for
  classification and tagging ELMo's way: the biLM frozen, a learned scalar mix, a BiLSTM.
- `awd-lstm`: `embed` reads the embedding and each LSTM layer; `score-text` and `generate` the
  LM; it fine-tunes for classification ULMFiT's way: concat pooling, rates divided by 2.6 per
  layer group, slanted triangular rates, gradual unfreezing.

An entry's `load_head` builds a task head on a pre-trained folder or loads a fine-tuned one,
as `Task.load_head` asks (`HeadRequest`); `finetune_defaults` are the `FinetuneConfig` fields
it trains with when the user sets none; what does not apply to it (a task family, the
feature-based flags) it refuses in one line (`check_finetune`).

This is the use side's table; pre-training has its own, `training.pretraining.networks.NETWORKS`
(how a network is built, trained and written into OUT/final, by `--architecture`). They share no
fact but the names, which both import from `core.lstm_config` (`BERT`, `NNLM`, `ELMO`,
`AWD_LSTM`): a folder written by pre-training is read here by its config.json alone, and neither
table imports the other (this one sits in `network`, below `training`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from bertlab.core import hub
from bertlab.core.config import BertConfig, read_json_object
from bertlab.core.finetune_config import (
    BERT_BASE_DEFAULTS,
    SLANTED_TRIANGULAR_SCHEDULE,
    width_defaults,
)
from bertlab.core.lstm_config import AWD_LSTM, BERT, ELMO, NNLM, NnlmConfig
from bertlab.network import checkpoint
from bertlab.network.awd_lstm import AwdLstmForLanguageModeling
from bertlab.network.bert import BertForPreTraining, BertModel
from bertlab.network.electra import GENERATOR_ARCHITECTURE
from bertlab.network.elmo import ElmoForLanguageModeling
from bertlab.network.elmo_heads import (
    ELMO_FEATURES,
    ElmoForSequenceClassification,
    ElmoForTask,
    ElmoForTokenClassification,
)
from bertlab.network.feature_head_config import SCALAR_MIX_LAYER, FeatureHeadConfig
from bertlab.network.feature_heads import ScalarMix
from bertlab.network.heads import (
    BertForMultipleChoice,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
)
from bertlab.network.lm_base import validate_ids
from bertlab.network.lm_views import (
    LanguageModelEncoder,
    LeftToRightLanguageModel,
    ViewConfig,
)
from bertlab.network.nnlm import NnlmForLanguageModeling
from bertlab.network.ulmfit import UlmfitForSequenceClassification

MLM_HEAD_KEY = "cls.predictions.transform.dense.weight"
CLASSIFICATION, TAGGING, QA, MULTIPLE_CHOICE = "classification", "tagging", "qa", "multiple-choice"
FAMILIES = (CLASSIFICATION, TAGGING, QA, MULTIPLE_CHOICE)
FEATURE_FLAGS = "--features and --bilstm"  # the flags that set a head's FeatureHeadConfig


@dataclass(frozen=True)
class HeadRequest:
    """What a task asks of a head (`task_families.Task.head_request`).

    Attributes:
        family: the task family (`FAMILIES`).
        head_class: BERT's head of that family (the task's declaration).
        id2label: the labels of a new head; None: the folder's own (a fine-tuned head).
        is_regression: one output scored with MSE (STS-B, `--regression`).
        features: a feature-based reading (`FeatureHeadConfig`); None: the architecture's own.
    """

    family: str
    head_class: type
    id2label: dict[int, str] | None = None
    is_regression: bool = False
    features: FeatureHeadConfig | None = None


@dataclass(frozen=True)
class FinetuneDefaults:
    """What fine-tuning takes for an architecture's model when the user sets nothing.

    Attributes:
        settings: `FinetuneConfig` fields (a `num_train_epochs` of None: the task's own).
        why: the choice in words, for the run's output.
        features: the head's reading of the encoder by default; None: the head's own.
    """

    settings: dict[str, Any]
    why: str
    features: FeatureHeadConfig | None = None


@dataclass(frozen=True)
class Architecture:
    """One network family, as every use of bertlab reads it (the module's table).

    Attributes:
        name: config.json's `architecture` (BERT: none, `BERT`).
        title: in words, for messages and cards.
        families: the task families it fine-tunes; others are refused (`check_finetune`).
        why_not: why the other families are refused.
        head_families: the class name of each fine-tuned head it saves -> its task family.
        load_head: (folder or Hub id, request, revision) -> a task head: a new one on a
            pre-trained folder, or a fine-tuned folder's own.
        finetune_defaults: config.json's values -> `FinetuneDefaults`.
        load_model: folder -> the model `encoder_of` reads (a BERT folder's encoder; an LSTM-era
            folder's language model or task head), in eval mode.
        encoder_of: a model `load_model`, `load_head` or `load_language_model` gave -> what
            `embed` and `neighbours` read (`BertModel` or `lm_views.LanguageModelEncoder`),
            sharing its weights.
        load_language_model: folder -> what `score-text` and `generate` read, in eval mode
            (`next_piece_logits`); raises ValueError saying why a folder has none.
        has_language_model: (config.json's values, the weights' names) -> whether
            `load_language_model` has one to load.
        embed_layers: the hidden states `embed` reads by default.
        embed_pooling: the pooling `PretrainedModel.embed` takes by default; None: [CLS], or the
            last piece of a left-to-right model.
        refuses_features: why `FEATURE_FLAGS` do not apply; None: they do.
        has_attention: `bertlab attention` has maps to draw.
        transformers_loads: `transformers` loads its folders (Hugging Face's BERT layout).
    """

    name: str
    title: str
    families: tuple[str, ...]
    why_not: str
    head_families: dict[str, str]
    load_head: Callable[[str | Path, HeadRequest, str | None], nn.Module]
    finetune_defaults: Callable[[dict[str, Any]], FinetuneDefaults]
    load_model: Callable[[str | Path], nn.Module]
    encoder_of: Callable[[nn.Module], nn.Module]
    load_language_model: Callable[[str | Path], nn.Module]
    has_language_model: Callable[[dict[str, Any], Collection[str]], bool]
    embed_layers: tuple[int | str, ...] = (-1,)
    embed_pooling: str | None = None
    refuses_features: str | None = None
    has_attention: bool = False
    transformers_loads: bool = False

    def check_finetune(self, family: str, features: FeatureHeadConfig | None) -> None:
        """Refuse, in one line, a task family or a feature-based head this architecture has
        no head for.

        Raises:
            ValueError: saying what it fine-tunes instead.
        """
        if family not in self.families:
            raise ValueError(
                f"{self.title} fine-tunes for {', '.join(self.families)}; {self.why_not}"
            )
        if features is not None and self.refuses_features is not None:
            raise ValueError(
                f"{FEATURE_FLAGS} do not apply to {self.title}: {self.refuses_features}"
            )

    def load_encoder(self, directory: str | Path) -> nn.Module:
        """What `embed` and `neighbours` read of a folder, in eval mode (a fine-tuned ELMo's
        with its learned scalar mix)."""
        return self.encoder_of(self.load_model(directory)).eval()

    def head_family(self, values: dict[str, Any]) -> str | None:
        """The task family of a fine-tuned folder's head (config.json's values); None for a
        folder without one (a pre-trained model)."""
        return self.head_families.get(_class_name(values))


# --- finding the entry ----------------------------------------------------------------------------


def architecture_of(values: dict[str, Any]) -> Architecture:
    """The entry of a config.json's values, by its `architecture` key (none: BERT's).

    Raises:
        ValueError: an architecture bertlab does not know, naming the known ones.
    """
    name = values.get("architecture", BERT)
    if name not in ARCHITECTURES:
        raise ValueError(
            f"config.json names architecture {name!r}; bertlab reads {', '.join(ARCHITECTURES)}"
        )
    return ARCHITECTURES[name]


def folder_architecture(name_or_path: str | Path, revision: str | None = None) -> Architecture:
    """The entry of a model folder or Hub id (BERT's when there is no config.json to read: its
    loaders then say what is missing)."""
    directory = hub.resolve(name_or_path, revision)
    path = directory / checkpoint.CONFIG_NAME
    return architecture_of(read_json_object(path)) if path.is_file() else ARCHITECTURES[BERT]


def folder_finetune_defaults(name_or_path: str | Path) -> FinetuneDefaults:
    """How the model of a folder (or Hub id) fine-tunes when the user sets nothing."""
    values = _read_config(name_or_path)
    return architecture_of(values).finetune_defaults(values)


def _class_name(values: dict[str, Any]) -> str:
    return (values.get("architectures") or [""])[0]


def _read_config(directory: str | Path) -> dict[str, Any]:
    return read_json_object(hub.resolve(directory) / checkpoint.CONFIG_NAME)


def _view_config(config: Any, num_layers: int, width: int, is_causal: bool) -> ViewConfig:
    return ViewConfig(config.vocab_size, config.pad_token_id, num_layers, width, is_causal)


# --- BERT -----------------------------------------------------------------------------------------


def _bert_head(directory: str | Path, request: HeadRequest, revision: str | None) -> nn.Module:
    """The task's BERT head: its class's `from_pretrained` (a new head on a pre-trained encoder,
    or a fine-tuned folder's own), with the request's labels and reading."""
    kwargs: dict[str, Any] = {} if request.features is None else {"features": request.features}
    if request.is_regression:
        kwargs |= {"num_labels": 1, "problem_type": "regression"}
    elif request.id2label is not None:
        kwargs |= {"id2label": request.id2label, "num_labels": None}
    return request.head_class.from_pretrained(directory, revision=revision, **kwargs)


def _bert_width_defaults(width: int | None) -> FinetuneDefaults:
    """BERT's recipe with the rate and epochs of `core.finetune_config`'s width table."""
    row = BERT_BASE_DEFAULTS if width is None else width_defaults(width)
    settings = {"learning_rate": row.learning_rate, "num_train_epochs": row.num_train_epochs}
    why = row.why(width) if width is not None else f"{row.model}'s ({row.source})"
    return FinetuneDefaults(settings, why)


def _bert_finetune_defaults(values: dict[str, Any]) -> FinetuneDefaults:
    width = values.get("hidden_size")
    return _bert_width_defaults(width if isinstance(width, int) else None)


def _bert_encoder_of(model: nn.Module) -> nn.Module:
    """The `BertModel` of any BERT class (itself, or its `bert`)."""
    return next(module for module in model.modules() if isinstance(module, BertModel))


def _has_mlm_head(values: dict[str, Any], keys: Collection[str]) -> bool:
    return MLM_HEAD_KEY in checkpoint.normalize_keys(dict.fromkeys(keys), "bert.")


def _bert_language_model(directory: str | Path) -> nn.Module:
    """The model with its language-model head (masked or left-to-right).

    Raises:
        ValueError: the checkpoint has no LM head (a fine-tuned model, for instance).
    """
    config_values, weights = checkpoint.read_model(directory)
    keys = checkpoint.normalize_keys(weights, BertForPreTraining.base_prefix)
    if MLM_HEAD_KEY not in keys:
        architecture = _class_name(config_values) or "a model without it"
        if architecture == GENERATOR_ARCHITECTURE:
            raise ValueError(
                f"{directory} is an ELECTRA generator ({architecture}): bertlab predicts words "
                "with BERT's language-model head only; transformers' ElectraForMaskedLM loads it"
            )
        raise ValueError(
            f"{directory} has no language-model head ({architecture}), so it predicts no words "
            "(a fine-tuned model, a bare encoder, or the discriminator that `--objective "
            "electra` leaves in OUT/final); this needs a model pre-trained with masked LM, such "
            "as the OUT/final of `bertlab pretrain` with its default objective"
        )
    return BertForPreTraining.from_pretrained(directory).eval()


# --- NNLM (Bengio et al. 2003) --------------------------------------------------------------------

# The task model NNLM's vectors feed: the shape bertlab's word-vector start fills (a random BERT
# encoder whose embedding matrix is the vectors; `apps.flows.random_twin`), at BERT-Tiny's depth
# and heads (Turc et al. 2019: L-2, A-2; one head where the vectors' width is odd) and the
# vectors' width, so that a vector is an embedding row.
NNLM_TASK_PRESET = "tiny"
NNLM_TASK_HEADS = 2


def nnlm_task_config(nnlm: NnlmConfig) -> BertConfig:
    """The random encoder NNLM's vectors start the embeddings of (the comment above)."""
    width = nnlm.embedding_size
    heads = NNLM_TASK_HEADS if width % NNLM_TASK_HEADS == 0 else 1
    return BertConfig.from_preset(
        NNLM_TASK_PRESET,
        vocab_size=nnlm.vocab_size,
        hidden_size=width,
        num_attention_heads=heads,
        intermediate_size=4 * width,
        pad_token_id=nnlm.pad_token_id,
    )


def rescaled_vectors(vectors: torch.Tensor, std: float) -> torch.Tensor:
    """Every vector times one factor, std / the standard deviation of all their coordinates:
    the scale of a BERT's random rows, directions and relative lengths kept (the rule of the
    word-vector start, `training.word2vec.vectors.embedding_rows`). (V, H) -> (V, H)."""
    return vectors * (std / float(vectors.float().std()))


# NNLM's vectors start the task model's word embeddings and train with it (the word-vector
# start). Frozen, they kept it at the class prior: SST-2's first 1,000 rows, the 10-minute IMDB
# NNLM at its defaults (1e-3 x 4 epochs), seeds 1-3 on 1,680 rows that share no sentence with
# them: 0.568 every seed (majority), training loss 0.67 at the end; trained, 0.640-0.660,
# training loss 0.13.
NNLM_VECTORS_TRAIN = True


def _nnlm_head(directory: str | Path, request: HeadRequest, revision: str | None) -> nn.Module:
    """A BERT head (BERT-Tiny's shape at the vectors' width, `nnlm_task_config`) whose word
    embeddings start as NNLM's C, rescaled; all of it trained (`NNLM_VECTORS_TRAIN`)."""
    nnlm = NnlmForLanguageModeling.from_pretrained(directory, revision=revision)
    config = nnlm_task_config(nnlm.config)
    kwargs: dict[str, Any] = {} if request.features is None else {"features": request.features}
    if request.is_regression:
        head = request.head_class(config, num_labels=1, problem_type="regression", **kwargs)
    elif request.id2label is not None:
        head = request.head_class(config, id2label=request.id2label, **kwargs)
    else:
        head = request.head_class(config, **kwargs)
    embeddings = head.bert.embeddings.word_embeddings
    with torch.no_grad():
        embeddings.weight.copy_(rescaled_vectors(nnlm.word_vectors(), config.initializer_range))
    embeddings.weight.requires_grad_(NNLM_VECTORS_TRAIN)
    return head


def _nnlm_finetune_defaults(values: dict[str, Any]) -> FinetuneDefaults:
    defaults = _bert_width_defaults(values.get("embedding_size", NnlmConfig.embedding_size))
    why = f"{defaults.why}: a random BERT encoder whose embeddings start as NNLM's vectors"
    return FinetuneDefaults(defaults.settings, why)


def _nnlm_encoder_of(model: nn.Module) -> nn.Module:
    """Layer 0 is C(w_t), the piece's own vector; layer 1 the tanh layer over the window."""
    nnlm = _language_model_in(model)
    config = nnlm.config

    def read(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> tuple:
        return nnlm(input_ids, attention_mask, output_logits=False).layers

    view = _view_config(config, 1, config.hidden_size, is_causal=True)
    return LanguageModelEncoder(nnlm, view, read, nnlm.word_vectors)


# --- what the LSTM-era entries share --------------------------------------------------------------


def _loader(*classes: type) -> Callable[[str | Path], nn.Module]:
    """A folder's model, by its config.json's class name among `classes`."""
    by_name = {cls.__name__: cls for cls in classes}

    def load(directory: str | Path) -> nn.Module:
        name = _class_name(_read_config(directory))
        if name not in by_name:
            raise ValueError(
                f"{directory} holds a {name or 'model without a class name'}; bertlab reads "
                f"{', '.join(by_name)} there"
            )
        return by_name[name].from_pretrained(directory).eval()

    return load


def _holds(language_model: type) -> Callable[[dict[str, Any], Collection[str]], bool]:
    """Whether a folder holds `language_model` (not a task head on its body)."""
    return lambda values, keys: _class_name(values) == language_model.__name__


def _language_model_loader(language_model: type, why_not: str) -> Callable[[str | Path], nn.Module]:
    """A folder's language model as `score-text` and `generate` read it, or `why_not` a task
    head's folder has none."""

    def load(directory: str | Path) -> nn.Module:
        values = _read_config(directory)
        if not _holds(language_model)(values, ()):
            raise ValueError(f"{directory} holds {_class_name(values)}, {why_not}")
        model = language_model.from_pretrained(directory).eval()
        view = _view_config(model.config, 0, 0, is_causal=True)
        return LeftToRightLanguageModel(model, view).eval()

    return load


def _language_model_in(model: nn.Module) -> nn.Module:
    """The language model a view wraps, or the model itself."""
    return model.model if isinstance(model, LeftToRightLanguageModel) else model


def _labels(request: HeadRequest) -> dict[str, Any]:
    """A new LSTM-era head's label arguments; none for a fine-tuned folder's own."""
    if request.is_regression:
        return {"num_labels": 1, "problem_type": "regression"}
    if request.id2label is not None:
        return {"id2label": request.id2label}
    return {}


def _check_same_labels(head: nn.Module, labels: dict[str, Any], directory: str | Path) -> None:
    """A fine-tuned LSTM-era head is trained on with its own labels only."""
    wanted = labels.get("id2label")
    if wanted is not None and dict(head.id2label) != dict(wanted):
        raise ValueError(
            f"{directory}'s head has the labels {list(head.id2label.values())}, not "
            f"{list(wanted.values())}: fine-tune a new head from its pre-trained model"
        )


# --- ELMo (Peters et al. 2018) --------------------------------------------------------------------

ELMO_HEADS = {
    CLASSIFICATION: ElmoForSequenceClassification,
    TAGGING: ElmoForTokenClassification,
}
ELMO_LEARNING_RATE = 1e-3  # only the mix, the BiLSTM and the task layer learn: Adam's usual rate
ELMO_EPOCHS = 4  # as the small BERTs' (core.finetune_config); not measured for ELMo here


def _elmo_head(directory: str | Path, request: HeadRequest, revision: str | None) -> nn.Module:
    """ELMo's head of the family: new on a pre-trained biLM (its reading `request.features`, or
    ELMo's, `elmo_heads.ELMO_FEATURES`), or a fine-tuned folder's own."""
    head_class, labels = ELMO_HEADS[request.family], _labels(request)
    if _holds(ElmoForLanguageModeling)(_read_config(directory), ()):
        if not labels:
            raise ValueError(f"a new {request.family} head on {directory} needs its labels")
        features = request.features or ELMO_FEATURES
        return head_class.from_language_model(
            directory, revision=revision, features=features, **labels
        )
    head = head_class.from_pretrained(directory, revision=revision)
    _check_same_labels(head, labels, directory)
    return head


def _elmo_finetune_defaults(values: dict[str, Any]) -> FinetuneDefaults:
    settings = {"learning_rate": ELMO_LEARNING_RATE, "num_train_epochs": ELMO_EPOCHS}
    why = (
        "ELMo's way (Peters et al. 2018 Sec. 3.3): the biLM frozen, a learned scalar mix of its "
        "layers and a two-layer BiLSTM under the task layer, at Adam's usual rate"
    )
    return FinetuneDefaults(settings, why, ELMO_FEATURES)


def _elmo_encoder_of(model: nn.Module) -> nn.Module:
    """[x; x], then each layer's [forward; backward] (2 x projection wide), and the scalar mix:
    a task head's learned one, else the fixed one (uniform weights, gamma 1: the average)."""
    model = _language_model_in(model)
    elmo, mix = model, None
    if isinstance(model, ElmoForTask):  # a task head on the biLM: its biLM and its own mix
        elmo, mix = model.elmo, model.features.scalar_mix
    config = elmo.config
    mix = mix if mix is not None else ScalarMix(config.num_hidden_layers + 1)

    def read(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> tuple:
        return elmo(input_ids, attention_mask, output_logits=False).layers

    def input_vectors() -> torch.Tensor:  # the token layer x of every piece, (V, P)
        ids = torch.arange(config.vocab_size, device=elmo.softmax.weight.device)
        return elmo.token_embedder(ids[None])[0]

    view = _view_config(config, config.num_hidden_layers, config.layer_size, is_causal=False)
    return LanguageModelEncoder(model, view, read, input_vectors, mix)


# --- AWD-LSTM and ULMFiT (Merity et al. 2017; Howard & Ruder 2018) --------------------------------

ULMFIT_LEARNING_RATE = 1e-2  # ULMFiT Sec. 4: "0.01 for fine-tuning the classifier"
ULMFIT_DECAY = 1 / 2.6  # ULMFiT Sec. 3.2: eta^(l-1) = eta^l / 2.6
ULMFIT_BATCH_SIZE = 64  # ULMFiT Sec. 4: "a batch size of 64"


def _ulmfit_head(directory: str | Path, request: HeadRequest, revision: str | None) -> nn.Module:
    """ULMFiT's classifier: new on a pre-trained AWD-LSTM (fastai's classifier dropouts), or a
    fine-tuned folder's own."""
    labels = _labels(request)
    if _holds(AwdLstmForLanguageModeling)(_read_config(directory), ()):
        if not labels:
            raise ValueError(f"a new classifier on {directory} needs its labels")
        return UlmfitForSequenceClassification.from_language_model(
            directory, revision=revision, **labels
        )
    head = UlmfitForSequenceClassification.from_pretrained(directory, revision=revision)
    _check_same_labels(head, labels, directory)
    return head


def _ulmfit_finetune_defaults(values: dict[str, Any]) -> FinetuneDefaults:
    """ULMFiT's three (Sec. 3.2, 3.3): discriminative rates, slanted triangular rates and
    gradual unfreezing, over one epoch per layer group (the classifier, each LSTM, the
    embedding) and one more with every group training, as fastai's last stage."""
    layers = values.get("num_hidden_layers", 3)
    settings = {
        "learning_rate": ULMFIT_LEARNING_RATE,
        "num_train_epochs": layers + 3,
        "batch_size": ULMFIT_BATCH_SIZE,
        "layerwise_lr_decay": ULMFIT_DECAY,
        "schedule": SLANTED_TRIANGULAR_SCHEDULE,
        "do_gradual_unfreezing": True,
    }
    why = (
        "ULMFiT's way (Howard & Ruder 2018): its classifier with concat pooling, rates divided "
        "by 2.6 per layer group, slanted triangular rates, gradual unfreezing"
    )
    return FinetuneDefaults(settings, why)


def _awd_lstm_encoder_of(model: nn.Module) -> nn.Module:
    """The embedding, then each LSTM layer's output (the last one the embedding's width), of a
    language model or of ULMFiT's classifier."""
    model = _language_model_in(model)
    config, body = model.config, model.awd_lstm

    def read(input_ids: torch.Tensor, attention_mask: torch.Tensor | None) -> tuple:
        validate_ids(input_ids, attention_mask, None, config.vocab_size)
        return body(input_ids)

    view = _view_config(config, config.num_hidden_layers, config.embedding_size, is_causal=True)
    return LanguageModelEncoder(model, view, read, lambda: body.encoder.weight)


# --- the table ------------------------------------------------------------------------------------

ARCHITECTURES: dict[str, Architecture] = {
    BERT: Architecture(
        name=BERT,
        title="BERT",
        families=FAMILIES,
        why_not="",
        head_families={
            BertForSequenceClassification.architecture: CLASSIFICATION,
            BertForTokenClassification.architecture: TAGGING,
            BertForQuestionAnswering.architecture: QA,
            BertForMultipleChoice.architecture: MULTIPLE_CHOICE,
        },
        load_head=_bert_head,
        finetune_defaults=_bert_finetune_defaults,
        load_model=BertModel.from_pretrained,
        encoder_of=_bert_encoder_of,
        load_language_model=_bert_language_model,
        has_language_model=_has_mlm_head,
        has_attention=True,
        transformers_loads=True,
    ),
    NNLM: Architecture(
        name=NNLM,
        title="Bengio et al.'s neural language model (NNLM)",
        families=FAMILIES,
        why_not="",
        head_families={},  # its task model is a BERT folder
        load_head=_nnlm_head,
        finetune_defaults=_nnlm_finetune_defaults,
        load_model=_loader(NnlmForLanguageModeling),
        encoder_of=_nnlm_encoder_of,
        load_language_model=_language_model_loader(NnlmForLanguageModeling, "not NNLM's"),
        has_language_model=_holds(NnlmForLanguageModeling),
        embed_layers=(0,),
        embed_pooling="mean",
    ),
    ELMO: Architecture(
        name=ELMO,
        title="ELMo's biLM",
        families=(CLASSIFICATION, TAGGING),
        why_not="question answering and multiple choice need a BERT",
        head_families={cls.__name__: family for family, cls in ELMO_HEADS.items()},
        load_head=_elmo_head,
        finetune_defaults=_elmo_finetune_defaults,
        load_model=_loader(ElmoForLanguageModeling, *ELMO_HEADS.values()),
        encoder_of=_elmo_encoder_of,
        load_language_model=_language_model_loader(
            ElmoForLanguageModeling,
            "a fine-tuned ELMo head; score and generate with the biLM it was fine-tuned from",
        ),
        has_language_model=_holds(ElmoForLanguageModeling),
        embed_layers=(SCALAR_MIX_LAYER,),
        embed_pooling="mean",
    ),
    AWD_LSTM: Architecture(
        name=AWD_LSTM,
        title="AWD-LSTM",
        families=(CLASSIFICATION,),
        why_not="ULMFiT fine-tunes it for text classification (Howard & Ruder 2018); tagging "
        "needs ELMo's biLM or a BERT",
        head_families={UlmfitForSequenceClassification.__name__: CLASSIFICATION},
        load_head=_ulmfit_head,
        finetune_defaults=_ulmfit_finetune_defaults,
        load_model=_loader(AwdLstmForLanguageModeling, UlmfitForSequenceClassification),
        encoder_of=_awd_lstm_encoder_of,
        load_language_model=_language_model_loader(
            AwdLstmForLanguageModeling,
            "ULMFiT's classifier, which left the language model's decoder out; score and "
            "generate with the pre-trained AWD-LSTM",
        ),
        has_language_model=_holds(AwdLstmForLanguageModeling),
        refuses_features="ULMFiT's classifier reads its last layer by concat pooling, and its "
        "layers differ in width (no scalar mix)",
    ),
}
