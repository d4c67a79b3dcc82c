"""A model loaded by Hub id from the test's offline cache equals `transformers` loading the same
id from the same cache: the cache layout is the real one, and so are the weights and tokenizer."""

import pytest
import torch

import bertlab
from bertlab.network.bert import BertForPreTraining

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.golden

ATOL = 1e-5
REPO_ID = "google-bert/bert-base-uncased"
TEXTS = ["The cat sat on the mat.", "Paris is a city in France, not London!"]


def test_loading_by_id_matches_transformers_from_the_same_cache(hub_cache):
    reference = transformers.BertForPreTraining.from_pretrained(
        REPO_ID, cache_dir=hub_cache, local_files_only=True
    ).eval()
    reference_tokenizer = transformers.AutoTokenizer.from_pretrained(
        REPO_ID, cache_dir=hub_cache, local_files_only=True
    )
    bert = bertlab.load(REPO_ID)
    encoding = bert.tokenizer(TEXTS, padding=True)
    expected = reference_tokenizer(TEXTS, padding=True)
    assert encoding["input_ids"] == expected["input_ids"]
    inputs = {key: torch.tensor(encoding[key]) for key in ("input_ids", "attention_mask")}
    ours = BertForPreTraining.from_pretrained(REPO_ID).eval()
    with torch.no_grad():
        theirs = reference(**inputs)
        mine = ours(**inputs)
        torch.testing.assert_close(mine.mlm_logits, theirs.prediction_logits, rtol=0, atol=ATOL)
        cls = reference.bert(**inputs).last_hidden_state[:, 0]
    torch.testing.assert_close(bert.embed(TEXTS), cls, rtol=0, atol=ATOL)
