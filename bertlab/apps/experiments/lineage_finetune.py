"""How each cell of the lineage experiment measures an arm on a task (`METHODS`), and each arm's
fine-tuning in its paper's way behind one function (`paper_way`, by `Arm.way`: `PAPER_WAYS`).

- BERT, GPT and the random twin: the whole network fine-tuned with a task layer on top
  (`flows.finetune_and_test`, bertlab's fine-tuning at `experiment transfer`'s rate).
- AWD-LSTM: ULMFiT's classifier (Howard & Ruder 2018 Sec. 3.2-3.3): concat pooling, rates
  divided by 2.6 per layer group, slanted triangular rates, gradual unfreezing. ULMFiT's second
  stage, fine-tuning the language model on the task's text, is not run: every arm sees the same
  unlabeled text, the corpus.
- ELMo: the biLM frozen, a learned scalar mix of its layers, the task's BiLSTM (Sec. 3.3).
- NNLM and word2vec: their vectors start the word embeddings of a task model trained from
  random weights, a BERT-Tiny-shaped encoder at their width, and train with it, as `bertlab
  finetune` takes an NNLM folder (`network.architectures.NNLM_VECTORS_TRAIN`: kept fixed, they
  left that model at the class prior on SST-2 with 1,000 labels).

The LSTM-era arms train with `lineage_heads.train_head` here; `bertlab finetune` fine-tunes the
LSTM-era networks in their papers' ways once it takes every architecture, and `paper_way` is
the one place to hand them to it.

Besides its paper's way, every arm is measured by the same two readers of its frozen layers: the
linear probe (`lineage_heads.linear_probe`) and the BiLSTM tagger over the scalar mix
(`lineage_heads.LayerTagger`); an arm with `tags_whole` is also fine-tuned whole as a tagger.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from bertlab.apps.experiments.grid import GridTask
from bertlab.apps.experiments.lineage_heads import (
    HeadTraining,
    LayerClassifier,
    LayerTagger,
    UlmfitHead,
    linear_probe,
    train_head,
)
from bertlab.apps.experiments.lineage_models import load_layers
from bertlab.apps.experiments.lineage_options import (
    ELMO_FEATURES,
    FINE_TUNED_WHOLE,
    FROZEN_VECTORS,
    LINEAR_PROBE,
    MIX_TAGGER,
    PAPER_WAY,
    ULMFIT,
    WHOLE_NETWORK,
    Arm,
)
from bertlab.apps.experiments.transfer_rows import FINETUNE_BATCH_SIZE, FINETUNE_LEARNING_RATE
from bertlab.apps.flows import TEST_FILE, finetune_and_test, random_twin, read_test
from bertlab.core.config import BertConfig
from bertlab.core.finetune_config import FinetuneConfig
from bertlab.core.optional import require
from bertlab.core.runtime import set_seed
from bertlab.network.architectures import NNLM_VECTORS_TRAIN
from bertlab.task_families import Task
from bertlab.tokenizer.wordpiece import Tokenizer
from bertlab.training.finetuning.finetune import TaskData
from bertlab.training.pretraining.budget import BudgetRecipe

FEATURE_LEARNING_RATE = 1e-3  # the mix, the BiLSTM and the task layer: Adam's usual rate
ULMFIT_LEARNING_RATE = 1e-2  # fastai's text classifier's top rate (Howard & Ruder 2018)
ULMFIT_GROUP_DECAY = 1 / 2.6  # ULMFiT Sec. 3.2: eta^(l-1) = eta^l / 2.6
VECTOR_MODEL_SIZE = "tiny"  # the task model over static vectors: BERT-Tiny's shape at their width
HEAD_SIZE = 64  # per attention head, as BERT's presets


@dataclass(frozen=True)
class CellInputs:
    """What one cell reads: an arm's model (for the random twin, its seed's), one task's parts,
    the shared tokenizer, the seed and the cell's run folder."""

    arm: Arm
    model_dir: Path
    row: GridTask
    task: Task
    data: TaskData
    test: list
    tokenizer: Tokenizer
    seed: int
    run_dir: Path
    show_progress: bool


# --- its paper's way ------------------------------------------------------------------------------


def _whole(inputs: CellInputs) -> dict[str, float]:
    """BERT's and GPT's way: the whole network and a task layer, fine-tuned."""
    return finetune_and_test(
        inputs.task,
        inputs.data,
        inputs.test,
        inputs.model_dir,
        _bert_finetuning(inputs),
        inputs.run_dir,
        inputs.show_progress,
    )


def _bert_finetuning(inputs: CellInputs) -> FinetuneConfig:
    return FinetuneConfig(
        learning_rate=FINETUNE_LEARNING_RATE,
        batch_size=FINETUNE_BATCH_SIZE,
        num_train_epochs=inputs.row.num_epochs,
        seed=inputs.seed,
    )


def _ulmfit(inputs: CellInputs) -> dict[str, float]:
    """ULMFiT's classifier on the AWD-LSTM: discriminative, slanted, gradually unfrozen."""
    set_seed(inputs.seed)
    head = UlmfitHead(inputs.model_dir, inputs.data.label_names)
    training = HeadTraining(
        ULMFIT_LEARNING_RATE,
        inputs.row.num_epochs,
        FINETUNE_BATCH_SIZE,
        group_decay=ULMFIT_GROUP_DECAY,
        is_slanted=True,
        gradual_unfreezing=True,
    )
    return _train(inputs, head, training)


def _elmo(inputs: CellInputs) -> dict[str, float]:
    """ELMo's way: the frozen biLM's scalar mix under the task's BiLSTM."""
    set_seed(inputs.seed)
    head = LayerClassifier(
        load_layers(inputs.arm.reading, inputs.model_dir), inputs.data.label_names
    )
    return _train(inputs, head, HeadTraining(FEATURE_LEARNING_RATE, inputs.row.num_epochs))


def _train(inputs: CellInputs, head: torch.nn.Module, training: HeadTraining) -> dict[str, float]:
    return train_head(
        head,
        inputs.task,
        inputs.data,
        inputs.test,
        inputs.tokenizer,
        training,
        inputs.seed,
        inputs.run_dir,
    )


def static_table(inputs: CellInputs) -> torch.Tensor:
    """The arm's static vectors, (V, H): its lowest layer read for every piece alone (NNLM's
    table C, word2vec's vectors; the same whatever the sentence)."""
    reader = load_layers(inputs.arm.reading, inputs.model_dir)
    ids = torch.arange(inputs.tokenizer.vocab_size).unsqueeze(1)  # (V, 1): each piece alone
    with torch.inference_mode():
        return reader(ids, torch.ones_like(ids))[0][:, 0].float()  # (V, H)


def vector_model(inputs: CellInputs, directory: Path) -> Path:
    """A BERT-Tiny-shaped encoder at the static vectors' width, its word embeddings the vectors
    (`flows.random_twin`'s word-vector start: rescaled to BERT's initializer range; pieces
    without a vector keep their random rows), the rest the seed's random weights."""
    table = static_table(inputs)
    width = table.shape[1]
    config = BertConfig.from_preset(
        VECTOR_MODEL_SIZE,
        vocab_size=inputs.tokenizer.vocab_size,
        pad_token_id=inputs.tokenizer.pad_token_id,
    ).replace(
        hidden_size=width,
        num_attention_heads=max(1, width // HEAD_SIZE),
        intermediate_size=4 * width,
    )
    pieces = [index for index in range(len(table)) if bool(table[index].any())]
    keyed_vectors = require("gensim.models.keyedvectors", "the static vectors' task model")
    vectors = keyed_vectors.KeyedVectors(vector_size=width)
    vectors.add_vectors([str(index) for index in pieces], table[pieces].numpy())
    return random_twin(
        config, inputs.tokenizer, inputs.seed, BudgetRecipe.position_init, directory, vectors
    )


def _vectors(inputs: CellInputs) -> dict[str, float]:
    """Static vectors' way: the word-vector start, as `bertlab finetune` takes an NNLM folder
    (`NNLM_VECTORS_TRAIN`: the vectors start an encoder trained from random weights and train
    with it; its folder, beside the run's, is removed once the run is scored)."""
    if (inputs.run_dir / TEST_FILE).is_file():
        return read_test(inputs.run_dir)
    model_dir = vector_model(inputs, inputs.run_dir.with_name(f"{inputs.run_dir.name}-model"))
    head = inputs.task.load_head(model_dir, inputs.data.label_names)
    head.bert.embeddings.word_embeddings.requires_grad_(NNLM_VECTORS_TRAIN)
    scores = finetune_and_test(
        inputs.task,
        inputs.data,
        inputs.test,
        model_dir,
        _bert_finetuning(inputs),
        inputs.run_dir,
        inputs.show_progress,
        model=head,
    )
    shutil.rmtree(model_dir)
    return scores


PAPER_WAYS: dict[str, Callable[[CellInputs], dict[str, float]]] = {
    WHOLE_NETWORK: _whole,
    ULMFIT: _ulmfit,
    ELMO_FEATURES: _elmo,
    FROZEN_VECTORS: _vectors,
}


def paper_way(inputs: CellInputs) -> dict[str, float]:
    """The arm fine-tuned on the cell's task in its paper's way (`PAPER_WAYS[arm.way]`)."""
    return PAPER_WAYS[inputs.arm.way](inputs)


# --- the shared readers ---------------------------------------------------------------------------


def probe(inputs: CellInputs) -> dict[str, float]:
    """The shared linear probe on the arm's frozen, mean-pooled layers."""
    reader = load_layers(inputs.arm.reading, inputs.model_dir)
    return linear_probe(
        reader, inputs.task, inputs.data, inputs.test, inputs.tokenizer, inputs.seed, inputs.run_dir
    )


def mix_tagger(inputs: CellInputs) -> dict[str, float]:
    """The shared BiLSTM tagger over the scalar mix of the arm's frozen layers."""
    set_seed(inputs.seed)
    head = LayerTagger(load_layers(inputs.arm.reading, inputs.model_dir), inputs.data.label_names)
    return _train(inputs, head, HeadTraining(FEATURE_LEARNING_RATE, inputs.row.num_epochs))


METHODS: dict[str, Callable[[CellInputs], dict[str, float]]] = {
    PAPER_WAY: paper_way,
    LINEAR_PROBE: probe,
    MIX_TAGGER: mix_tagger,
    FINE_TUNED_WHOLE: _whole,
}
