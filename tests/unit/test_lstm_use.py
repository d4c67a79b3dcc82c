"""The LSTM-era models used as every bertlab model (network.architectures, network.lm_views,
use.lstm_models): loaded by their folder's `architecture`, embedded (each layer, ELMo's scalar
mix), their static and contextual neighbours, sentence scores and samples, on real tiny folders of
each architecture (tests/conftest.py's `lstm_models`, as `bertlab pretrain --architecture` writes
OUT/final)."""

from __future__ import annotations

import math

import pytest
import torch

import bertlab
from bertlab.core.lstm_config import LM_ARCHITECTURE_NAMES
from bertlab.network.architectures import (
    ARCHITECTURES,
    BERT,
    architecture_of,
    folder_architecture,
)
from bertlab.network.feature_head_config import SCALAR_MIX_LAYER
from bertlab.network.lm_architectures import lm_architecture
from bertlab.network.lm_views import LanguageModelEncoder
from bertlab.use.features import extract_features
from bertlab.use.inspection import load_encoder, load_for_attention, load_with_lm_head
from bertlab.use.language_model import generate, score_texts
from bertlab.use.lstm_models import PretrainedLanguageModel
from bertlab.use.neighbours import embedding_neighbours, word_vectors_in

pytestmark = pytest.mark.usefixtures("one_thread")

TEXTS = ["the cat sat on the mat .", "a good film", "the dog sat on the rug and it was dull"]


def language_model(folder):
    """The folder's language model class, loaded (not through the entry under test), with its
    weights frozen (the tests read its outputs as plain tensors)."""
    _, model_class = lm_architecture(folder_architecture(folder).name)
    return model_class.from_pretrained(folder).eval().requires_grad_(False)


def encoded(tokenizer, texts):
    encoding = tokenizer(list(texts), padding=True)
    return torch.tensor(encoding["input_ids"]), torch.tensor(encoding["attention_mask"])


# --- the table ------------------------------------------------------------------------------------


def test_every_architecture_has_an_entry_found_by_its_folders_config(lstm_models) -> None:
    assert set(ARCHITECTURES) == {BERT, *LM_ARCHITECTURE_NAMES}
    for name, folder in lstm_models.items():
        assert folder_architecture(folder).name == name
    assert architecture_of({"hidden_size": 32}).name == BERT  # a BERT folder has no key
    with pytest.raises(ValueError, match="'gpt9'.*bert, nnlm, elmo, awd-lstm"):
        architecture_of({"architecture": "gpt9"})


def test_load_gives_each_lstm_folder_its_ready_model(lstm_models) -> None:
    for name, folder in lstm_models.items():
        model = bertlab.load(folder)
        assert isinstance(model, PretrainedLanguageModel)
        assert model.architecture.name == name and model.model is None
        with pytest.raises(ValueError, match="has no task head"):
            model.predict(["a good film"])


# --- embed ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", LM_ARCHITECTURE_NAMES)
def test_embed_reads_each_layer_of_the_language_model(lstm_models, lstm_tokenizer, name) -> None:
    folder = lstm_models[name]
    layers = language_model(folder)(*encoded(lstm_tokenizer, TEXTS[:1])).layers
    encoder, tokenizer = load_encoder(folder)
    assert isinstance(encoder, LanguageModelEncoder)
    assert encoder.config.num_hidden_layers == len(layers) - 1
    for layer in range(len(layers)):
        features = extract_features(encoder, tokenizer, TEXTS[:1], (layer,), "pieces")
        expected = layers[layer][0].numpy()  # (L, H_l): one text, no padding
        assert features.vectors.shape == (expected.shape[0], 1, expected.shape[1])
        torch.testing.assert_close(
            torch.from_numpy(features.vectors[:, 0]), torch.from_numpy(expected)
        )


@pytest.mark.parametrize("name", LM_ARCHITECTURE_NAMES)
def test_padding_in_a_batch_does_not_change_a_texts_vectors(lstm_models, name) -> None:
    model = bertlab.load(lstm_models[name])
    alone = [model.embed([text], pooling="pieces", layer=-1)[0] for text in TEXTS]
    together = model.embed(TEXTS, pooling="pieces", layer=-1)  # padded to the longest
    for one, batched in zip(alone, together, strict=True):
        torch.testing.assert_close(one, batched, atol=1e-5, rtol=1e-5)


def test_nnlm_embeds_its_vectors_by_default(lstm_models, lstm_tokenizer) -> None:
    folder = lstm_models["nnlm"]
    vectors = language_model(folder).word_vectors()  # C: (V, m)
    ids = lstm_tokenizer(TEXTS[1])["input_ids"]
    model = bertlab.load(folder)
    torch.testing.assert_close(model.embed(TEXTS[1]), vectors[ids].mean(dim=0, keepdim=True))
    pieces = model.embed(TEXTS[1], pooling="pieces")[0]
    torch.testing.assert_close(pieces, vectors[ids])


def test_awd_lstm_layers_of_different_widths_are_refused_in_one_call(lstm_models) -> None:
    encoder, tokenizer = load_encoder(lstm_models["awd-lstm"])
    widths = [encoder(*encoded(tokenizer, TEXTS[:1]), output_hidden_states=True)]
    assert widths[0].hidden_states[0].shape[-1] != widths[0].hidden_states[1].shape[-1]
    with pytest.raises(ValueError, match="differ in width"):
        extract_features(encoder, tokenizer, TEXTS[:1], (0, 1), "mean")
    both = extract_features(encoder, tokenizer, TEXTS[:1], (0, -1), "mean")  # both E wide
    assert both.vectors.shape[1] == 2


def test_elmo_fixed_scalar_mix_is_the_average_of_its_layers(lstm_models, lstm_tokenizer) -> None:
    folder = lstm_models["elmo"]
    layers = language_model(folder)(*encoded(lstm_tokenizer, TEXTS[:1])).layers
    model = bertlab.load(folder)
    mix = model.embed(TEXTS[0], pooling="pieces", layer=SCALAR_MIX_LAYER)[0]
    torch.testing.assert_close(mix, torch.stack(layers).mean(dim=0)[0], atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(model.embed(TEXTS[0]), mix.mean(dim=0, keepdim=True))  # default
    with pytest.raises(ValueError, match="'mix'"):
        bertlab.load(lstm_models["awd-lstm"]).embed(TEXTS[0], layer=SCALAR_MIX_LAYER)


def test_a_fine_tuned_elmo_embeds_with_its_learned_mix(lstm_models, lstm_tokenizer, tmp_path):
    folder = lstm_models["elmo"]
    model = bertlab.load(folder, task="sst2")
    mix = model.model.features.scalar_mix
    with torch.no_grad():  # as learned: other weights, and a scale
        mix.weights.copy_(torch.tensor([2.0, -1.0, 0.5]))
        mix.gamma.fill_(1.7)
    model.save(tmp_path / "tuned")
    layers = language_model(folder)(*encoded(lstm_tokenizer, TEXTS[:1])).layers
    learned = bertlab.load(tmp_path / "tuned").embed(TEXTS[0], "pieces", SCALAR_MIX_LAYER)[0]
    s = torch.softmax(torch.tensor([2.0, -1.0, 0.5]), dim=0)  # ELMo eq. 1: gamma * sum s_j h_j
    expected = 1.7 * sum(weight * layer[0] for weight, layer in zip(s, layers, strict=True))
    torch.testing.assert_close(learned, expected, atol=1e-5, rtol=1e-5)


def test_elmo_with_the_character_cnn_embeds_and_has_static_vectors(
    tmp_path, lstm_tokenizer, lstm_model_writer
) -> None:
    folder = lstm_model_writer(tmp_path / "chars", "elmo", lstm_tokenizer, use_char_cnn=True)
    model = bertlab.load(folder)
    assert model.embed(TEXTS[:2]).shape == (2, 16)
    table = model.encoder.input_vectors()  # the char CNN's output for every piece
    piece = lstm_tokenizer.convert_tokens_to_ids(["cat"])[0]
    expected = language_model(folder).token_embedder(torch.tensor([[piece]]))[0, 0]
    torch.testing.assert_close(table[piece], expected.detach())


# --- neighbours -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", LM_ARCHITECTURE_NAMES)
def test_static_neighbours_are_the_nearest_input_vectors(lstm_models, lstm_tokenizer, name):
    encoder, tokenizer = load_encoder(lstm_models[name])
    table = encoder.input_vectors()
    word = lstm_tokenizer.convert_tokens_to_ids(["cat"])[0]
    similarity = torch.nn.functional.cosine_similarity(table, table[word][None], dim=-1)
    similarity[[word, *tokenizer.special_token_ids]] = -2
    found = embedding_neighbours(encoder, tokenizer, "cat", top_k=3)
    assert [piece for piece, _ in found][0] == tokenizer.convert_ids_to_tokens(
        [int(similarity.argmax())]
    )[0]
    assert found[0][1] == pytest.approx(float(similarity.max()), abs=1e-5)


def test_nnlm_static_vectors_are_its_c(lstm_models) -> None:
    encoder, _ = load_encoder(lstm_models["nnlm"])
    torch.testing.assert_close(
        encoder.input_vectors(), language_model(lstm_models["nnlm"]).word_vectors()
    )


@pytest.mark.parametrize("name", LM_ARCHITECTURE_NAMES)
def test_contextual_vectors_differ_by_context_above_the_input_layer(
    tmp_path, lstm_tokenizer, lstm_model_writer, name
) -> None:
    # An untrained folder: the trained tiny AWD-LSTM's layers saturate (every unit near -1, 0 or
    # 1), the same in any context.
    encoder, tokenizer = load_encoder(lstm_model_writer(tmp_path / name, name, lstm_tokenizer))
    sentences = ["the cat sat on the mat .", "a dull cat was boring"]
    static = word_vectors_in(encoder, tokenizer, sentences, "cat", layer=0)
    contextual = word_vectors_in(encoder, tokenizer, sentences, "cat", layer=-1)
    assert len(static) == len(contextual) == 2

    def cosine(pair) -> float:
        first, second = (torch.from_numpy(occurrence.vector) for occurrence in pair)
        return float(torch.nn.functional.cosine_similarity(first, second, dim=0))

    assert cosine(static) == pytest.approx(1.0, abs=1e-5)
    assert cosine(contextual) < 1 - 1e-4  # the static ones agree to 1e-5


# --- score-text and generate ----------------------------------------------------------------------


@pytest.mark.parametrize("name", LM_ARCHITECTURE_NAMES)
def test_score_is_the_sum_of_next_piece_log_probabilities(lstm_models, lstm_tokenizer, name):
    folder = lstm_models[name]
    ids = lstm_tokenizer(TEXTS[0])["input_ids"]  # [CLS] ... [SEP]
    logits = language_model(folder)(torch.tensor([ids])).logits[0]  # ELMo: the forward LM's
    expected = sum(
        float(logits[t].log_softmax(-1)[ids[t + 1]]) for t in range(len(ids) - 1)
    )  # every piece after [CLS], [SEP] included
    lm, tokenizer = load_with_lm_head(folder)
    (score,) = score_texts(lm, tokenizer, [TEXTS[0]])
    assert score.pieces[-1] == "[SEP]" and len(score.log_probs) == len(ids) - 1
    assert score.total == pytest.approx(expected, abs=1e-4)


# The tiny AWD-LSTM (three layers under an 8-wide tied embedding) learns no word order in the
# fixture's 150 steps (it learns slowly: tests/unit/test_lstm_networks.py's OVERFIT gives it more
# width, steps and rate); its scores are checked exactly above.
@pytest.mark.parametrize("name", ["nnlm", "elmo"])
def test_a_trained_model_prefers_its_sentences_to_their_shuffled_words(
    lstm_models, lstm_sentences, name
) -> None:
    model = bertlab.load(lstm_models[name])
    real = lstm_sentences[0]
    shuffled = "mat the on sat cat the ."
    scores = model.score([real, shuffled])
    assert scores[0].total > scores[1].total + 1.0, [s.total for s in scores]


@pytest.mark.parametrize("name", LM_ARCHITECTURE_NAMES)
def test_generate_continues_with_the_language_models_choices_and_repeats_with_its_seed(
    lstm_models, lstm_tokenizer, name
):
    folder = lstm_models[name]
    model = bertlab.load(folder)
    greedy = model.generate("the cat sat", temperature=1e-6, max_new_tokens=6)
    ids = lstm_tokenizer("the cat sat")["input_ids"][:-1]  # [CLS] the cat sat, no [SEP]
    banned = [lstm_tokenizer.pad_token_id, lstm_tokenizer.cls_token_id]
    banned.append(lstm_tokenizer.mask_token_id)
    lm = language_model(folder)  # the folder's own class: each step its forward LM's argmax
    for _ in range(6):
        logits = lm(torch.tensor([ids])).logits[0, -1]
        logits[banned] = -math.inf
        if int(logits.argmax()) == lstm_tokenizer.sep_token_id:
            break
        ids.append(int(logits.argmax()))
    assert greedy == lstm_tokenizer.decode(ids)
    sampled = [model.generate("the", seed=3, max_new_tokens=8) for _ in range(2)]
    assert sampled[0] == sampled[1]
    assert (
        generate(model.language_model, model.tokenizer, "the", seed=3, max_new_tokens=8)
        == (sampled[0])
    )


# --- what does not apply, refused in one line -----------------------------------------------------


def test_attention_fill_mask_and_a_fine_tuned_heads_language_model_are_refused(
    lstm_models, tmp_path
) -> None:
    from bertlab.use.inspection import load_for_fill_mask, load_for_next_sentence

    folder = lstm_models["awd-lstm"]
    with pytest.raises(ValueError, match="no attention to draw"):
        load_for_attention(folder)
    with pytest.raises(ValueError, match="left-to-right"):
        load_for_fill_mask(folder)
    with pytest.raises(ValueError, match="next-sentence head"):
        load_for_next_sentence(folder)
    model = bertlab.load(folder, task="sst2")
    model.save(tmp_path / "classifier")
    with pytest.raises(ValueError, match="left the language model's decoder out"):
        bertlab.load(tmp_path / "classifier").score(["a good film"])
    assert not math.isnan(bertlab.load(tmp_path / "classifier").embed("a good film")[0, 0])
