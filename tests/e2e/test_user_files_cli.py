"""What a user has is never lost to a command's output: an output that is one of the command's
inputs, lies inside one or inside the corpus cache, a folder bertlab did not write, a link. Each
case is run as a user runs it, through the command line, on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from bertlab.cli import main

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
