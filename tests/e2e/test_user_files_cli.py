"""What a user has is never lost to a command's output: an output that is one of the command's
inputs, lies inside one or inside the corpus cache, a folder bertlab did not write, a link. Each
case is run as a user runs it, through the command line, on real files."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bertlab.cli import main
from bertlab.core.config import BertConfig

pytestmark = pytest.mark.usefixtures("one_thread")

EXIT_USER_ERROR = 1


def run_cli(capsys, *argv: object) -> tuple[int, str]:
    """The exit code and stderr of `bertlab ARGV`."""
    code = main([str(arg) for arg in argv])
    return code, capsys.readouterr().err


def assert_one_line_error(code: int, stderr: str, *fragments: str) -> None:
    assert code == EXIT_USER_ERROR, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("bertlab: error:")]
    assert len(errors) == 1 and "Traceback" not in stderr, stderr
    for fragment in fragments:
        assert fragment in errors[0], errors[0]


def files_and_bytes(directory: Path) -> dict[str, bytes | None]:
    """Every path under `directory` (links not followed), with each regular file's bytes."""
    return {
        str(path.relative_to(directory)): path.read_bytes()
        if path.is_file() and not path.is_symlink()
        else None
        for path in sorted(directory.rglob("*"))
    }


# --- links ---------------------------------------------------------------------------------------


def test_pretrain_writes_through_links_and_keeps_them(tiny_pretrain_args, tmp_path, capsys):
    """`--out` and `--corpus-cache` that are symbolic links (one to a folder, one to nowhere
    yet): the write failed ("could not write cache: none") and the link became a real folder
    beside a `.cache.*.tmp.old`; the dangling link gave "[Errno 17] File exists"."""
    (tmp_path / "scratch").mkdir()
    out, cache = tmp_path / "run", tmp_path / "cache"
    out.symlink_to(tmp_path / "scratch" / "run")  # leads nowhere yet
    (tmp_path / "scratch" / "cache").mkdir()
    cache.symlink_to(tmp_path / "scratch" / "cache")
    args = tiny_pretrain_args(out, "--max-steps", "2", "--corpus-cache", cache)
    code, stderr = run_cli(capsys, *args)
    assert code == 0, stderr
    assert out.is_symlink() and cache.is_symlink()
    assert (tmp_path / "scratch" / "run" / "final" / "model.safetensors").is_file()
    assert (tmp_path / "scratch" / "cache" / "meta.json").is_file()
    assert not [path for path in tmp_path.rglob(".*") if ".tmp" in path.name]
    code, stderr = run_cli(capsys, "fill-mask", "--model", out / "final", "w1 [MASK] .")
    assert code == 0, stderr


def test_a_saved_model_goes_through_a_link(tmp_path, hub_model_folder, capsys):
    """`save('my-model')` where my-model is a link to a folder on another disk: the folder behind
    it receives the model, the link stays."""
    import bertlab

    (tmp_path / "disk" / "my-model").mkdir(parents=True)
    link = tmp_path / "my-model"
    link.symlink_to(tmp_path / "disk" / "my-model")
    bertlab.load(hub_model_folder).save(link)
    assert link.is_symlink()
    assert (tmp_path / "disk" / "my-model" / "config.json").is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["disk", "my-model"]
    code, stderr = run_cli(capsys, "fill-mask", "--model", link, "the [MASK] sat .")
    assert code == 0, stderr


# --- an output that is an input, or lies inside one or inside the corpus cache --------------------

TASK_DATA = Path(__file__).resolve().parents[1] / "data" / "tasks"


def test_predict_refuses_to_write_its_predictions_over_its_data(tmp_path, serve_models, capsys):
    """`predict --data dev.tsv --output dev.tsv` exited 0 and replaced the labelled data with
    predictions."""
    data = tmp_path / "dev.tsv"
    data.write_bytes((TASK_DATA / "stsb_style.tsv").read_bytes())
    before = files_and_bytes(tmp_path)
    predict = ("predict", "--task", "stsb", "--model", serve_models["stsb"], "--data", data)
    code, stderr = run_cli(capsys, *predict, "--output", data)
    assert_one_line_error(code, stderr, f"--output {data} is --data {data}", "another --output")
    code, stderr = run_cli(capsys, *predict, "--output", serve_models["stsb"] / "dev.jsonl")
    assert_one_line_error(code, stderr, f"is inside --model {serve_models['stsb']}")
    assert files_and_bytes(tmp_path) == before
    assert not (serve_models["stsb"] / "dev.jsonl").exists()


def test_word2vec_refuses_to_save_its_vectors_over_its_corpus(pretrain_files, tmp_path, capsys):
    """`neighbours word2vec --corpus c.txt --save-vectors c.txt` exited 0 and replaced the
    corpus with a binary vectors file."""
    corpus = tmp_path / "c.txt"
    corpus.write_bytes(pretrain_files[1].read_bytes())
    before = files_and_bytes(tmp_path)
    code, stderr = run_cli(
        capsys, "neighbours", "word2vec", "w1", "--corpus", corpus, "--save-vectors", corpus
    )
    assert_one_line_error(code, stderr, f"--save-vectors {corpus} is --corpus {corpus}")
    assert files_and_bytes(tmp_path) == before


def test_tokenizer_train_refuses_to_write_its_vocabulary_over_its_corpus(tmp_path, capsys):
    """A corpus named vocab.txt in --out: the vocabulary replaced it."""
    corpus = tmp_path / "vocab.txt"
    corpus.write_text("a b c\n" * 50, encoding="utf-8")
    before = files_and_bytes(tmp_path)
    code, stderr = run_cli(capsys, "tokenizer", "train", corpus, "--vocab-size", "50",
                           "--out", tmp_path)  # fmt: skip
    assert_one_line_error(code, stderr, f"--out {corpus} is the corpus {corpus}")
    assert files_and_bytes(tmp_path) == before


def test_pretrain_refuses_an_out_inside_the_corpus_cache(tiny_pretrain_args, tmp_path, capsys):
    """`pretrain --corpus-cache cache --out cache/run` was accepted; a later run with another
    tokenizer and the same cache rebuilt it, and deleted cache/run with its final model."""
    cache = tmp_path / "cache"
    code, stderr = run_cli(
        capsys, *tiny_pretrain_args(tmp_path / "first", "--max-steps", "1", "--corpus-cache", cache)
    )
    assert code == 0, stderr
    before = files_and_bytes(tmp_path)
    args = tiny_pretrain_args(cache / "run", "--max-steps", "1", "--corpus-cache", cache)
    code, stderr = run_cli(capsys, *args)
    assert_one_line_error(
        code, stderr, f"--out {cache / 'run'} is inside --corpus-cache {cache}", "another --out"
    )
    assert files_and_bytes(tmp_path) == before


@pytest.mark.parametrize(
    ("command", "flag", "name"),
    [
        (("embed", "--text", "a good film"), "--out", "features"),
        (("attention", "--text", "a good film"), "--out", "attention.png"),
        (
            ("neighbours", "contextual", "film", "--context", "a film", "--reference", "r.txt"),
            "--figure",
            "uses.png",
        ),
    ],
)
def test_commands_refuse_to_write_inside_the_model_they_read(
    command, flag, name, tmp_path, serve_models, capsys
):
    model = tmp_path / "model"
    model.mkdir()
    for path in serve_models["mlm"].iterdir():
        (model / path.name).write_bytes(path.read_bytes())
    before = files_and_bytes(tmp_path)
    code, stderr = run_cli(capsys, *command, flag, model / name, "--model", model)
    assert_one_line_error(code, stderr, f"{flag} {model / name} is inside --model {model}")
    assert files_and_bytes(tmp_path) == before


def test_finetune_refuses_an_out_that_is_its_model_or_holds_it(tmp_path, task_vocab, capsys):
    """`--out` that is the model folder, and `--overwrite` of an earlier run whose best/ is the
    model to fine-tune (the earlier run was moved aside, then the model was missing)."""
    data = TASK_DATA / "rte_style.tsv"
    finetune = ("finetune", "--task", "rte", "--train", data, "--epochs", "1", "--no-progress")
    out = tmp_path / "run"
    scratch = ("--from-scratch", "--model-size", "tiny", "--tokenizer", task_vocab)
    code, stderr = run_cli(capsys, *finetune, *scratch, "--out", out)
    assert code == 0, stderr
    before = files_and_bytes(tmp_path)
    code, stderr = run_cli(capsys, *finetune, "--model", out / "best", "--out", out / "best")
    assert_one_line_error(code, stderr, f"--out {out / 'best'} is --model {out / 'best'}")
    code, stderr = run_cli(capsys, *finetune, "--model", out / "best", "--out", out, "--overwrite")
    assert_one_line_error(
        code, stderr, f"--model {out / 'best'} is {out / 'best'}, which the command replaces whole"
    )
    assert files_and_bytes(tmp_path) == before


def test_a_corpus_cache_holding_other_files_is_not_rebuilt_over_them(
    tiny_pretrain_args, pretrain_files, tmp_path, capsys, caplog
):
    """A run kept inside the corpus cache (as `--out cache/run` was allowed before): a run with
    another tokenizer rebuilt the cache whole and deleted the run, without a word."""
    cache = tmp_path / "cache"
    args = tiny_pretrain_args(tmp_path / "first", "--max-steps", "1", "--corpus-cache", cache)
    assert run_cli(capsys, *args)[0] == 0
    (cache / "run").mkdir()
    (cache / "run" / "final").write_bytes(b"the user's model")
    vocab = tmp_path / "vocab.txt"  # another tokenizer: one piece more
    vocab.write_text(pretrain_files[0].read_text(encoding="utf-8") + "w999\n", encoding="utf-8")
    config = tmp_path / "config.json"
    pieces = len(vocab.read_text(encoding="utf-8").splitlines())
    BertConfig(vocab_size=pieces, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
               intermediate_size=64, max_position_embeddings=64).to_json_file(config)  # fmt: skip
    before = files_and_bytes(tmp_path)
    other = ["--tokenizer", vocab, "--config", config]
    code, stderr = run_cli(
        capsys,
        *tiny_pretrain_args(
            tmp_path / "second", "--max-steps", "1", "--corpus-cache", cache, *other
        ),
    )
    assert_one_line_error(
        code, stderr, f"--corpus-cache {cache} holds run, which are not the corpus's"
    )
    assert files_and_bytes(tmp_path) == before
    (cache / "run" / "final").unlink()
    (cache / "run").rmdir()
    code, stderr = run_cli(
        capsys,
        *tiny_pretrain_args(
            tmp_path / "second", "--max-steps", "1", "--corpus-cache", cache, *other
        ),
    )
    assert code == 0, stderr
    assert f"the corpus in {cache} was tokenized for another tokenizer" in caplog.text


# --- a replacement killed midway is undone by the next command that reads ----------------------

# Runs `bertlab ARGS` and SIGKILLs itself when fine-tuning starts to train: the earlier run has
# been moved aside into OUT/.replaced and the new one has begun.
KILLED_WHEN_TRAINING = """
import os, signal, sys
from bertlab.cli import main
from bertlab.training.finetuning import finetune

def killed(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

finetune.train_task_model = killed
sys.exit(main(sys.argv[1:]))
"""


def test_a_killed_overwrite_is_undone_by_the_next_command_that_reads_the_model(
    tmp_path, task_vocab, capsys, cli_env, caplog
):
    """`finetune --overwrite` killed with SIGKILL while training left OUT/.replaced, undone only
    by the next `finetune`: until then `evaluate --model OUT/best` failed, as if the model were
    gone."""
    data = TASK_DATA / "rte_style.tsv"
    out = tmp_path / "run"
    finetune = ["finetune", "--task", "rte", "--train", str(data), "--epochs", "1",
                "--from-scratch", "--model-size", "tiny", "--tokenizer", str(task_vocab),
                "--no-progress", "--out", str(out)]  # fmt: skip
    assert run_cli(capsys, *finetune)[0] == 0
    before = files_and_bytes(out)
    command = [sys.executable, "-c", KILLED_WHEN_TRAINING, *finetune, "--overwrite", "--seed", "7"]
    killed = subprocess.run(command, capture_output=True, text=True, env=cli_env, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (out / ".replaced" / "best").is_dir() and not (out / "best").exists()
    code, stderr = run_cli(capsys, "evaluate", "--task", "rte", "--model", out / "best",
                           "--data", data)  # fmt: skip
    assert code == 0, stderr
    assert "put back the earlier run" in caplog.text
    assert files_and_bytes(out) == before


# --- a folder bertlab did not write --------------------------------------------------------------


def test_the_demo_refuses_a_project_folder_it_did_not_write(tmp_path, hub_model_folder, capsys):
    """`bertlab demo --out proj`, proj being the user's own project with a pre-trained model in
    proj/pretrain/final: the demo deleted proj/pretrain and proj/finetune without asking whose
    they were."""
    project = tmp_path / "proj"
    (project / "pretrain" / "final").mkdir(parents=True)
    (project / "pretrain" / "final" / "config.json").write_text("{}", encoding="utf-8")
    (project / "finetune").mkdir()
    (project / "notes.txt").write_text("my notes\n", encoding="utf-8")
    before = files_and_bytes(tmp_path)
    code, stderr = run_cli(capsys, "demo", "--out", project, "--model", hub_model_folder)
    assert_one_line_error(
        code,
        stderr,
        f"--out {project} holds pretrain/, finetune/, which bertlab demo did not write",
    )
    assert files_and_bytes(tmp_path) == before


def test_finetune_overwrite_replaces_only_a_run_that_bertlab_wrote(tmp_path, task_vocab, capsys):
    """`--overwrite` replaces an earlier fine-tuning run; a best/ and result.json that the user
    made are not one, nor is another command's run."""
    out = tmp_path / "run"
    (out / "best").mkdir(parents=True)
    (out / "best" / "config.json").write_text("{}", encoding="utf-8")
    (out / "result.json").write_text("{}", encoding="utf-8")
    before = files_and_bytes(tmp_path)
    finetune = ("finetune", "--task", "rte", "--train", TASK_DATA / "rte_style.tsv",
                "--from-scratch", "--model-size", "tiny", "--tokenizer", task_vocab,
                "--epochs", "1", "--no-progress", "--overwrite", "--out")  # fmt: skip
    code, stderr = run_cli(capsys, *finetune, out)
    assert_one_line_error(
        code, stderr, f"--out {out} holds best/, result.json, which bertlab finetune did not write"
    )
    assert files_and_bytes(tmp_path) == before
    (tmp_path / "demo").mkdir()
    (tmp_path / "demo" / ".bertlab-run").write_text("demo\n", encoding="utf-8")
    code, stderr = run_cli(capsys, *finetune, tmp_path / "demo")
    assert_one_line_error(code, stderr, "holds a run of bertlab demo; choose another --out")
    earlier = tmp_path / "earlier"  # a run of a bertlab that wrote no .bertlab-run: replaced
    assert run_cli(capsys, *finetune, earlier)[0] == 0
    (earlier / ".bertlab-run").unlink()
    code, stderr = run_cli(capsys, *finetune, earlier)
    assert code == 0, stderr


def test_save_replaces_a_model_folder_but_no_other(tmp_path, hub_model_folder):
    """`save(folder)` replaced the folder whole, whatever it held: `save('.')` from a project
    folder would have deleted the project."""
    import bertlab

    model = bertlab.load(hub_model_folder)
    saved = tmp_path / "my-model"
    model.save(saved)
    model.save(saved)  # an earlier model is replaced
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("my notes\n", encoding="utf-8")
    (project / "config.json").write_text("{}", encoding="utf-8")
    before = files_and_bytes(tmp_path)
    with pytest.raises(ValueError) as raised:
        model.save(project)
    assert str(raised.value) == (
        f"{project} holds notes.txt, which no model folder has: save() replaces the folder "
        "whole; choose another folder"
    )
    assert files_and_bytes(tmp_path) == before
