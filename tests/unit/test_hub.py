"""Models by Hugging Face Hub id, from a local cache built here (offline: no network needed)."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest
import torch
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)

from bertlab.cli import main
from bertlab.core import hub
from bertlab.core.model_card import CARD_NAME
from bertlab.network.bert import BertForPreTraining, BertModel
from bertlab.network.checkpoint import (
    CONFIG_NAME,
    LEGACY_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
)
from bertlab.task_families import TASK_FILE
from bertlab.tokenizer.wordpiece import TOKENIZER_FILES, Tokenizer

if TYPE_CHECKING:
    import httpx2


def _logits(model: BertForPreTraining, batch) -> torch.Tensor:
    with torch.no_grad():
        return model(batch["input_ids"] % model.config.vocab_size).mlm_logits


@pytest.mark.parametrize(
    ("name", "is_id"),
    [
        ("bert-base-uncased", True),
        ("google-bert/bert-base-uncased", True),
        ("google/bert_uncased_L-2_H-128_A-2", True),
        ("runs/my-bert/final", False),  # two slashes: a path
        ("./my-bert", False),
        ("/abs/model", False),
        ("~/models/bert", False),
        ("vocab.txt", False),  # a file name
        ("config.json", False),
        ("bad--name", False),  # not a valid repository id
    ],
)
def test_repo_ids_are_told_from_paths(name, is_id):
    assert hub.is_repo_id(name) is is_id


def test_an_existing_folder_is_used_as_it_is_without_the_hub(tmp_path, monkeypatch):
    def no_download(*args, **kwargs):
        raise AssertionError("the Hub was asked")

    monkeypatch.setattr(hub, "snapshot_download", no_download)
    folder = tmp_path / "bert-base-uncased"
    folder.mkdir()
    monkeypatch.chdir(tmp_path)
    assert hub.resolve("bert-base-uncased") == folder.relative_to(tmp_path)


def test_the_download_patterns_cover_every_file_the_loaders_read():
    assert {CONFIG_NAME, TASK_FILE, CARD_NAME, *TOKENIZER_FILES} <= set(hub.MODEL_FILES)
    assert {WEIGHTS_NAME, WEIGHTS_INDEX_NAME} <= set(hub.SAFETENSORS_FILES)
    assert hub.LEGACY_WEIGHTS_FILES == (LEGACY_WEIGHTS_NAME,)


def test_a_cached_id_loads_offline_with_the_same_weights(hub_cache, hub_model_folder, batch):
    by_id = BertForPreTraining.from_pretrained("google-bert/bert-base-uncased").eval()
    by_folder = BertForPreTraining.from_pretrained(hub_model_folder).eval()
    assert torch.equal(_logits(by_id, batch), _logits(by_folder, batch))
    tokenizer = Tokenizer.from_pretrained("google-bert/bert-base-uncased")
    assert tokenizer.tokenize("The Film") == ["the", "film"]


def test_the_legacy_short_name_finds_the_google_bert_cache(hub_cache, hub_model_folder):
    assert hub.resolve("bert-base-uncased").parent.parent.name == (
        "models--google-bert--bert-base-uncased"
    )
    model = BertModel.from_pretrained("bert-base-uncased")
    assert model.config.vocab_size == Tokenizer.from_pretrained("bert-base-uncased").vocab_size


def test_the_legacy_short_name_also_finds_a_cache_filled_under_it(
    add_to_hub_cache, hub_model_folder, tmp_path
):
    add_to_hub_cache("bert-base-cased", hub_model_folder)
    assert hub.resolve("bert-base-cased").parent.parent.name == "models--bert-base-cased"


def test_a_repository_with_only_pytorch_model_bin_loads(
    add_to_hub_cache, hub_model_folder, tmp_path, batch
):
    """The small BERTs (google/bert_uncased_L-*) ship pytorch_model.bin only."""
    reference = BertForPreTraining.from_pretrained(hub_model_folder).eval()
    folder = tmp_path / "bin-only"
    folder.mkdir()
    torch.save(reference.state_dict(), folder / LEGACY_WEIGHTS_NAME)
    for name in (CONFIG_NAME, "vocab.txt"):
        (folder / name).write_bytes((hub_model_folder / name).read_bytes())
    add_to_hub_cache("google/bert_uncased_L-2_H-32_A-4", folder)
    loaded = BertForPreTraining.from_pretrained("google/bert_uncased_L-2_H-32_A-4").eval()
    assert torch.equal(_logits(loaded, batch), _logits(reference, batch))


def test_safetensors_is_read_when_a_repository_has_both_formats(
    add_to_hub_cache, hub_model_folder, tmp_path
):
    folder = tmp_path / "both"
    folder.mkdir()
    for path in hub_model_folder.iterdir():
        (folder / path.name).write_bytes(path.read_bytes())
    (folder / LEGACY_WEIGHTS_NAME).write_bytes(b"not a pickle: reading it would fail")
    add_to_hub_cache("org/both-formats", folder)
    BertForPreTraining.from_pretrained("org/both-formats")


def test_a_revision_is_read_through_its_ref(add_to_hub_cache, hub_model_folder, tmp_path, batch):
    other = tmp_path / "v2"
    torch.manual_seed(1)
    BertForPreTraining(BertForPreTraining.from_pretrained(hub_model_folder).config).save_pretrained(
        other
    )
    for name in ("vocab.txt", "tokenizer_config.json"):
        (other / name).write_bytes((hub_model_folder / name).read_bytes())
    add_to_hub_cache("org/tiny", hub_model_folder)
    add_to_hub_cache("org/tiny", other, revision="v2")
    main = BertForPreTraining.from_pretrained("org/tiny").eval()
    v2 = BertForPreTraining.from_pretrained("org/tiny", revision="v2").eval()
    assert torch.equal(
        _logits(main, batch),
        _logits(BertForPreTraining.from_pretrained(hub_model_folder).eval(), batch),
    )
    assert not torch.equal(_logits(main, batch), _logits(v2, batch))


def test_the_tokenizer_by_id_needs_no_weights(add_to_hub_cache, hub_model_folder, tmp_path):
    add_to_hub_cache("org/tokenizer-only", hub_model_folder, files=("vocab.txt",))
    assert Tokenizer.from_pretrained("org/tokenizer-only").vocab_size > 5


def test_an_id_missing_from_the_offline_cache_is_one_line_with_a_hint(hub_cache):
    with pytest.raises(FileNotFoundError) as caught:
        BertModel.from_pretrained("org/not-cached")
    message = str(caught.value)
    assert "\n" not in message
    assert "org/not-cached" in message and "HF_HUB_OFFLINE" in message
    assert "pass a local model folder" in message
    with pytest.raises(FileNotFoundError, match="HF_HUB_OFFLINE"):
        Tokenizer.from_pretrained("bert-large-cased")  # a legacy name: both candidates missing


def _response(status: int) -> httpx2.Response:
    """A response of huggingface_hub's HTTP client, httpx2; a test that needs one skips where an
    older huggingface_hub uses httpx instead (the file is still collected there)."""
    httpx2 = pytest.importorskip("httpx2", reason="huggingface_hub's client httpx2 is absent")
    return httpx2.Response(status, request=httpx2.Request("GET", "https://huggingface.co/api"))


@pytest.mark.parametrize(
    ("error", "expected_type", "fragment"),
    [
        (
            RepositoryNotFoundError("404", response=_response(404)),
            FileNotFoundError,
            "neither a local folder nor a model on the Hugging Face Hub",
        ),
        (
            RevisionNotFoundError("404", response=_response(404)),
            ValueError,
            "has no revision 'v9'",
        ),
        (
            LocalEntryNotFoundError("no cache"),
            FileNotFoundError,
            "cannot be reached",
        ),
        (
            GatedRepoError("403", response=_response(403)),
            FileNotFoundError,
            "is a gated model on the Hugging Face Hub",
        ),
        (
            HfHubHTTPError("500", response=_response(500)),
            ValueError,
            "refused org/some-model (HTTP 500)",
        ),
    ],
)
def test_hub_failures_become_one_line(monkeypatch, error, expected_type, fragment):
    def failing_download(*args, **kwargs):
        raise error

    monkeypatch.setattr(hub, "snapshot_download", failing_download)
    with pytest.raises(expected_type) as caught:
        hub.resolve("org/some-model", revision="v9")
    assert fragment in str(caught.value) and "\n" not in str(caught.value)
    # From Python, the one line came after ~40 lines of the chained HTTP client's traceback.
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_offline_mode_is_named_as_the_reason(monkeypatch):
    def offline_download(*args, **kwargs):
        try:
            raise OfflineModeIsEnabled("offline")
        except OfflineModeIsEnabled as cause:
            raise LocalEntryNotFoundError("no snapshot") from cause

    monkeypatch.setattr(hub, "snapshot_download", offline_download)
    with pytest.raises(FileNotFoundError, match="HF_HUB_OFFLINE is set"):
        hub.resolve("org/some-model")


def test_a_repository_without_model_files_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(hub, "snapshot_download", lambda *args, **kwargs: str(tmp_path / "none"))
    with pytest.raises(FileNotFoundError, match="has none of the files bertlab reads"):
        hub.resolve("org/a-dataset-like-repo")


# --- the models that ship with bertlab (bertlab:NAME) ---------------------------------------------


@pytest.fixture
def shipped_dir(tmp_path, monkeypatch, hub_model_folder):
    """A shipped-models folder holding one model, `bertlab:tiny-test`."""
    import shutil

    shipped = tmp_path / "models"
    shutil.copytree(hub_model_folder, shipped / "tiny-test")
    (shipped / "not-a-model").mkdir()
    monkeypatch.setattr(hub, "SHIPPED_DIR", shipped)
    return shipped


def test_a_shipped_model_loads_by_its_short_name(shipped_dir, hub_model_folder, batch):
    assert hub.resolve("bertlab:tiny-test") == shipped_dir / "tiny-test"
    assert hub.shipped_models() == ["bertlab:tiny-test"]
    by_name = BertForPreTraining.from_pretrained("bertlab:tiny-test").eval()
    by_folder = BertForPreTraining.from_pretrained(hub_model_folder).eval()
    assert torch.equal(_logits(by_name, batch), _logits(by_folder, batch))
    assert Tokenizer.from_pretrained("bertlab:tiny-test").tokenize("The Film") == ["the", "film"]


def test_a_local_folder_named_like_a_shipped_model_wins_with_a_warning(
    shipped_dir, hub_model_folder, tmp_path, monkeypatch, caplog, capsys
):
    """As docs/models.md says: an existing folder is used as it is. The shipped model shadowed
    it without a word."""
    work = tmp_path / "work"
    local = work / "bertlab:tiny-test"
    shutil.copytree(hub_model_folder, local)
    monkeypatch.chdir(work)
    assert hub.resolve("bertlab:tiny-test") == local
    warning = (
        f"bertlab:tiny-test: using the local folder {local}, not the model shipped with bertlab "
        "under that name (rename it to use the shipped one)"
    )
    assert [record.getMessage() for record in caplog.records] == [warning]
    caplog.clear()
    assert main(["fill-mask", "--model", "bertlab:tiny-test", "the [MASK] sat ."]) == 0
    assert [record.getMessage() for record in caplog.records] == [warning]  # once, not per load
    capsys.readouterr()
    caplog.clear()
    monkeypatch.chdir(tmp_path)
    assert hub.resolve("bertlab:tiny-test") == shipped_dir / "tiny-test" and not caplog.records


@pytest.mark.parametrize(
    "name", ["bertlab:nope", "bertlab:", "bertlab:not-a-model", "bertlab:../x"]
)
def test_an_unknown_shipped_name_says_which_ship(shipped_dir, name):
    with pytest.raises(
        FileNotFoundError, match=r"ships with bertlab \(shipped: bertlab:tiny-test\)"
    ):
        hub.resolve(name)
