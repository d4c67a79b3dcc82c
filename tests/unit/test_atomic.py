"""bertlab.core.atomic: every file and directory the project writes is complete or absent."""

from __future__ import annotations

import errno
import io
import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import SafetensorError

from bertlab.core import atomic
from bertlab.core.atomic import (
    WriteError,
    atomic_directory,
    atomic_file,
    atomic_files,
    json_text,
    lock_holder,
    remove_temporaries,
    run_lock,
    write_json,
    write_text,
)
from bertlab.core.replacing import claim, replacing, restore_interrupted, restore_replaced
from bertlab.core.run_folder import LOCK_FILE, OWNER_FILE

FULL_DEVICE = Path("/dev/full")  # every write fails with ENOSPC


def test_write_text_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "out" / "predictions.jsonl"
    write_text(target, "x\n")
    assert target.read_text() == "x\n"
    assert [path.name for path in target.parent.iterdir()] == ["predictions.jsonl"]
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_a_failed_write_keeps_the_previous_file(tmp_path):
    target = tmp_path / "results.json"
    write_json(target, {"accuracy": 0.5})
    with pytest.raises(RuntimeError), atomic_file(target) as temporary:
        temporary.write_text("{half")
        raise RuntimeError("disk full")
    assert target.read_text() == '{\n  "accuracy": 0.5\n}\n'
    assert [path.name for path in tmp_path.iterdir()] == ["results.json"]


def test_the_temporary_file_keeps_the_destination_suffix(tmp_path):
    with atomic_file(tmp_path / "curves.png") as temporary:
        assert temporary.suffix == ".png"  # matplotlib picks the format by it
        temporary.write_bytes(b"png")
    assert (tmp_path / "curves.png").read_bytes() == b"png"


def test_files_written_together_replace_none_when_one_fails(tmp_path):
    first, second = tmp_path / "vocab.txt", tmp_path / "tokenizer.json"
    write_text(first, "old\n")
    with pytest.raises(ValueError), atomic_files([first, second]) as (a, b):
        a.write_text("new\n")
        raise ValueError("the second file could not be written")
    assert first.read_text() == "old\n"
    assert not second.exists()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["vocab.txt"]


def test_a_special_file_is_written_in_place(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_text(fifo, "through the pipe\n")
        assert os.read(reader, 100) == b"through the pipe\n"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.stat().st_mode)  # still the pipe, not a regular file


def test_a_directory_is_replaced_whole_or_not_at_all(tmp_path):
    model = tmp_path / "best"
    with atomic_directory(model) as temporary:
        (temporary / "config.json").write_text("{}")
    with pytest.raises(OSError), atomic_directory(model) as temporary:
        (temporary / "config.json").write_text('{"new": 1}')
        raise OSError(28, "No space left on device")
    assert (model / "config.json").read_text() == "{}"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["best"]
    with atomic_directory(model) as temporary:
        (temporary / "weights").write_text("w")
    assert sorted(path.name for path in model.iterdir()) == ["weights"]
    assert stat.S_IMODE(model.stat().st_mode) == 0o755


def test_json_text_is_valid_json_without_nan(tmp_path):
    """A correlation of constant predictions is NaN, which json.dumps writes as invalid JSON."""
    value = {"pearson": math.nan, "loss": [1.0, math.inf, -math.inf], "n": 3, "name": "x"}
    expected = {"pearson": None, "loss": [1.0, None, None], "n": 3, "name": "x"}
    assert json.loads(json_text(value)) == expected
    path = write_json(tmp_path / "result.json", value)
    assert json.loads(path.read_text())["pearson"] is None


# --- failures: one line naming the destination and the system's reason ------------------------


def test_a_full_disk_names_the_destination_and_says_no_space_left(tmp_path):
    """A full disk raised "[Errno 28] No space left on device", naming no file (or a temporary
    one); now the destination, whichever step failed."""
    model = tmp_path / "checkpoints" / "step-000002"
    with pytest.raises(WriteError) as raised, atomic_directory(model) as temporary:
        with atomic_file(temporary / "config.json") as config:
            config.write_text("{")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert str(raised.value) == f"could not write {model}: no space left on device"
    assert raised.value.errno == errno.ENOSPC
    assert [path.name for path in model.parent.iterdir()] == []


def test_a_rust_writers_error_names_the_destination(tmp_path):
    """safetensors (like tokenizers) reports the disk in words of its own, "(os error 28)", and
    its SafetensorError ended the CLI with a traceback."""
    target = tmp_path / "model.safetensors"
    rust_error = "Error while serializing: I/O error: No space left on device (os error 28)"
    with pytest.raises(WriteError, match="no space left on device"), atomic_file(target):
        raise SafetensorError(rust_error)
    assert list(tmp_path.iterdir()) == []


def test_an_error_that_is_not_the_disks_passes_unchanged(tmp_path):
    with pytest.raises(FileNotFoundError), atomic_file(tmp_path / "out.txt"):
        open(tmp_path / "missing input")  # a writer that reads


@pytest.mark.skipif(not FULL_DEVICE.is_char_device(), reason="needs /dev/full")
def test_torch_save_on_a_full_disk_says_no_space_left():
    """torch.save says "unexpected pos 576 vs 534" on a full disk; the writer it is given keeps
    the system's error and raises it."""
    with pytest.raises(WriteError) as raised, atomic.atomic_writer(FULL_DEVICE) as file:
        torch.save({"weights": torch.zeros(10_000)}, file)
    assert str(raised.value) == f"could not write {FULL_DEVICE}: no space left on device"
    with pytest.raises(WriteError, match="no space left on device"):
        atomic.append_text(FULL_DEVICE, "a metrics record\n")
    assert FULL_DEVICE.is_char_device()  # written in place, never renamed over


def test_torch_save_interrupted_in_a_write_is_an_interruption(tmp_path, monkeypatch):
    """SIGTERM (as Ctrl-C) while torch.save wrote a checkpoint ended in torch's RuntimeError
    "unexpected pos ... inline_container.cc", a traceback instead of the orderly stop."""
    signals = [KeyboardInterrupt()]  # one SIGTERM, as the handler raises it, in the first write

    class InterruptedFile(io.FileIO):
        def write(self, data):
            if signals:
                raise signals.pop()
            return super().write(data)

    monkeypatch.setattr(atomic.io, "FileIO", InterruptedFile)
    path = tmp_path / "training_state.pt"
    path.write_bytes(b"the previous checkpoint")
    with pytest.raises(KeyboardInterrupt), atomic.atomic_writer(path) as file:
        torch.save({"weights": torch.zeros(100_000)}, file)
    assert path.read_bytes() == b"the previous checkpoint"
    assert [p.name for p in tmp_path.iterdir()] == ["training_state.pt"]


def test_dev_stdout_is_written_in_place_never_renamed_over(monkeypatch, capfd):
    """`predict --output /dev/stdout` with stdout redirected to a file (as root) replaced the
    /dev/stdout link with a regular file: the path names a stream, not a file to replace."""

    def refuse(*args):
        raise AssertionError(f"renamed over a stream: {args}")

    monkeypatch.setattr(atomic.os, "replace", refuse)
    monkeypatch.setattr(atomic.os, "rename", refuse)
    write_text("/dev/stdout", "one prediction\n")
    assert capfd.readouterr().out == "one prediction\n"


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="needs /dev/shm")
def test_a_regular_file_on_dev_shm_is_still_replaced_whole():
    """Only a process's streams are written in place, not every path under /dev."""
    target = Path("/dev/shm") / f"bertlab-test-{os.getpid()}.json"
    try:
        write_text(target, "first\n")
        write_text(target, "second\n")
        assert target.read_text() == "second\n"
    finally:
        target.unlink(missing_ok=True)


def test_a_replacement_killed_between_its_renames_is_finished_at_the_next_start(tmp_path):
    """Replacing final/ renames the old one away, then the new one into place: a kill between
    the two left both under temporary names, and the next start removed them both."""
    old = tmp_path / ".final.k3j4l5m6.tmp.old"
    new = tmp_path / ".final.k3j4l5m6.tmp"
    for directory, text in ((old, "old"), (new, "new")):
        directory.mkdir()
        (directory / "config.json").write_text(text)
    remove_temporaries(tmp_path)
    assert (tmp_path / "final" / "config.json").read_text() == "new"
    assert [path.name for path in tmp_path.iterdir()] == ["final"]


# --- one writer per run directory ------------------------------------------------------------


def test_the_lock_file_goes_with_its_holder_and_a_removed_one_is_taken_anew(tmp_path, monkeypatch):
    """The lock file stayed in every directory written (a tokenizer's, an app's OUT). It is now
    removed on leaving; a process that opened it just before is not fooled into holding a file
    no longer there."""
    opened = []

    def open_then_removed(path, *args, **kwargs):
        handle = open(path, *args, **kwargs)
        if not opened:
            os.unlink(path)  # its holder left between this open and the lock
        opened.append(handle)
        return handle

    monkeypatch.setattr(atomic, "open", open_then_removed, raising=False)
    with run_lock(tmp_path / "out") as out:
        assert len(opened) == 2
        assert os.fstat(opened[1].fileno()).st_ino == (out / LOCK_FILE).stat().st_ino
        assert (out / LOCK_FILE).read_text() == f"{os.getpid()}\n"
        (out / "vocab.txt").write_text("[PAD]\n")
    assert [path.name for path in out.iterdir()] == ["vocab.txt"]


# Another process tries to take the directory; prints what it was told.
TRY_LOCK = """
import sys
from bertlab.core.atomic import run_lock
try:
    with run_lock(sys.argv[1]):
        print("taken")
except ValueError as error:
    print(error)
"""


def _another_process_tries(directory: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", TRY_LOCK, str(directory)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_holder_keeps_its_directory_when_it_asks_who_holds_it_or_takes_it_again(tmp_path):
    """Closing any descriptor of a file releases the process's POSIX locks on it: the main
    process of a torchrun job read its own lock file (to check that the others see OUT) and
    left OUT to a second job; a nested `run_lock` dropped the outer one on leaving."""
    out = tmp_path / "out"
    refusal = f"{out} is being written by another bertlab process (pid {os.getpid()})"
    with run_lock(out):
        assert lock_holder(out) == str(os.getpid())
        assert lock_holder(os.path.relpath(out)) == str(os.getpid())  # however it is spelt
        with run_lock(out):
            pass
        assert (out / LOCK_FILE).is_file()  # the inner block did not remove it
        assert _another_process_tries(out).startswith(refusal)
    assert _another_process_tries(out) == "taken"
    with run_lock(out):  # what another process reads in the file
        assert _another_process_tries(out).startswith(refusal)


# --- replacing a run only once the new one has succeeded --------------------------------------


def _earlier_run(directory: Path) -> dict[str, str]:
    (directory / "best").mkdir(parents=True)
    (directory / "best" / "model.bin").write_text("old model", encoding="utf-8")
    (directory / "result.json").write_text('{"old": 1}', encoding="utf-8")
    return _contents(directory)


def _contents(directory: Path) -> dict[str, str]:
    return {
        str(path.relative_to(directory)): path.read_text(encoding="utf-8")
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }


OUTPUTS = ("best", "result.json", "seed-*")  # what the run of these tests writes


def test_replacing_removes_the_earlier_run_once_the_new_one_succeeded(tmp_path) -> None:
    _earlier_run(tmp_path)
    with replacing(tmp_path, OUTPUTS):
        assert not (tmp_path / "best").exists() and (tmp_path / ".replaced").is_dir()
        (tmp_path / "best").mkdir()
        (tmp_path / "best" / "model.bin").write_text("new model", encoding="utf-8")
    assert _contents(tmp_path) == {"best/model.bin": "new model"}


@pytest.mark.parametrize("failure", [ValueError("refused"), KeyboardInterrupt()])
def test_replacing_puts_the_earlier_run_back_when_the_new_one_fails(tmp_path, failure) -> None:
    before = _earlier_run(tmp_path)
    with pytest.raises(type(failure)):
        with replacing(tmp_path, OUTPUTS):
            (tmp_path / "best").mkdir()
            (tmp_path / "best" / "half.bin").write_text("half", encoding="utf-8")
            (tmp_path / "seed-2").mkdir()  # an output the earlier run did not have
            raise failure
    assert _contents(tmp_path) == before


def test_an_earlier_run_killed_while_being_moved_aside_is_put_back_whole(tmp_path) -> None:
    before = _earlier_run(tmp_path)
    backup = tmp_path / ".replaced"
    backup.mkdir()
    (backup / ".moving").touch()
    (tmp_path / "best").rename(backup / "best")  # result.json not moved yet: still the earlier's
    assert restore_replaced(tmp_path)
    assert _contents(tmp_path) == before
    assert not restore_replaced(tmp_path)  # nothing left to put back


def test_a_restore_killed_midway_finishes_when_called_again(tmp_path) -> None:
    before = _earlier_run(tmp_path)
    backup = tmp_path / ".replaced"
    backup.mkdir()
    for name in ("best", "result.json"):
        (tmp_path / name).rename(backup / name)
    (tmp_path / "seed-2").mkdir()  # the killed new run's
    # the first restore removed the new run's outputs, marked it and put best back, then died
    (tmp_path / "seed-2").rmdir()
    (backup / ".restoring").touch()
    (backup / "best").rename(tmp_path / "best")
    assert restore_replaced(tmp_path)
    assert _contents(tmp_path) == before


def _killed_while_replacing(directory: Path) -> None:
    """A process that holds `directory`, replaces its earlier run, writes a new best/ and a new
    seed-3/ (which the earlier run did not have) and is killed (no cleanup runs)."""
    pid = os.fork()
    if pid == 0:
        with run_lock(directory), replacing(directory, OUTPUTS):
            (directory / "best").mkdir()
            (directory / "best" / "model.bin").write_text("half a new model", encoding="utf-8")
            (directory / "seed-3").mkdir()
            os._exit(0)  # as SIGKILL: no `finally`, no cleanup
    os.waitpid(pid, 0)


def test_a_killed_replacement_is_undone_by_the_first_reader(tmp_path) -> None:
    """`finetune --overwrite` killed while training left OUT/.replaced: until the next finetune,
    `evaluate --model OUT/best` failed ("no config.json"), as if the model were gone."""
    before = _earlier_run(tmp_path)
    _killed_while_replacing(tmp_path)
    assert (tmp_path / ".replaced").is_dir()
    restore_interrupted(tmp_path / "best" / "model.bin")  # any path at or below the folder
    assert _contents(tmp_path) == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["best", "result.json"]


def test_a_running_replacement_is_left_to_its_writer(tmp_path, another_writer) -> None:
    """A live writer's earlier run is not put back under it: reading what it moved aside says
    so, naming its pid; reading elsewhere goes on; the writer itself reads its own new files."""
    _earlier_run(tmp_path)
    with replacing(tmp_path, OUTPUTS):
        (tmp_path / "best").mkdir()
        with run_lock(tmp_path):
            restore_interrupted(tmp_path / "best")  # this process's own replacement
            assert (tmp_path / ".replaced" / "best").is_dir()
        with another_writer(tmp_path) as pid:
            with pytest.raises(ValueError) as raised:
                restore_interrupted(tmp_path / "best")
            restore_interrupted(tmp_path / "tokenizer")  # not moved aside: nothing to say
            assert (tmp_path / ".replaced" / "best").is_dir()
        assert str(raised.value) == (
            f"{tmp_path / 'best'} is being replaced by a running bertlab process (pid {pid}); "
            f"until it ends, the earlier one is in {tmp_path / '.replaced'}"
        )


def test_a_run_directory_is_claimed_by_one_command_and_only_when_nothing_else_is_there(
    tmp_path,
) -> None:
    """bertlab replaces only outputs it wrote: a folder holding such names (made by the user)
    is refused, as is another command's run; a refused command leaves no folder it made."""
    out = tmp_path / "run"
    with run_lock(out):
        claim(out, "finetune", OUTPUTS)
        (out / "best").mkdir()
    claim(out, "finetune", OUTPUTS)  # its own, again: the earlier run may be replaced
    with pytest.raises(ValueError, match=f"^out {out} holds a run of bertlab finetune; "):
        claim(out, "demo", ("pretrain",))
    mine = tmp_path / "mine"
    (mine / "seed-1").mkdir(parents=True)
    (mine / "result.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError) as raised:
        claim(mine, "finetune", OUTPUTS)
    assert str(raised.value) == (
        f"out {mine} holds result.json, seed-1/, which bertlab finetune did not write; move "
        "them out, or choose another out"
    )
    assert sorted(path.name for path in mine.iterdir()) == ["result.json", "seed-1"]
    claim(mine, "finetune", OUTPUTS, lambda directory: (directory / "seed-1").is_dir())
    assert (mine / OWNER_FILE).read_text() == "finetune\n"  # a run from before the owner file
    refused = tmp_path / "refused"
    with pytest.raises(ValueError), run_lock(refused):
        claim(refused, "finetune", OUTPUTS)
        raise ValueError("refused after the claim")
    assert not refused.exists()


# --- a destination that is a symbolic link is written through ----------------------------------


def test_a_directory_behind_a_link_is_replaced_and_the_link_kept(tmp_path) -> None:
    """The link was renamed away and replaced by a real folder, then removing it failed ("could
    not write ...: none") and left a `.*.tmp.old` link behind."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "old.txt").write_text("old", encoding="utf-8")
    link = tmp_path / "model"
    link.symlink_to("real")
    with atomic_directory(link) as temporary:
        (temporary / "new.txt").write_text("new", encoding="utf-8")
    assert link.is_symlink() and os.readlink(link) == "real"
    assert sorted(path.name for path in (tmp_path / "real").iterdir()) == ["new.txt"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model", "real"]


def test_a_link_that_leads_nowhere_yet_leads_to_what_is_written(tmp_path) -> None:
    """A dangling link gave `[Errno 17] File exists`."""
    (tmp_path / "runs").mkdir()
    for name, write in (("model", _write_directory), ("predictions.jsonl", _write_file)):
        link = tmp_path / name
        link.symlink_to(tmp_path / "runs" / name)
        write(link)
        assert link.is_symlink() and (tmp_path / "runs" / name).exists()
    assert (tmp_path / "runs" / "predictions.jsonl").read_text() == "new\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "model",
        "predictions.jsonl",
        "runs",
    ]


def test_a_file_behind_a_link_is_replaced_and_the_link_kept(tmp_path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "out.jsonl").write_text("old\n", encoding="utf-8")
    link = tmp_path / "out.jsonl"
    link.symlink_to(tmp_path / "data" / "out.jsonl")
    _write_file(link)
    assert link.is_symlink() and link.read_text() == "new\n"
    assert sorted(path.name for path in (tmp_path / "data").iterdir()) == ["out.jsonl"]


def test_a_run_directory_behind_a_dangling_link_is_made_locked_and_left(tmp_path) -> None:
    link = tmp_path / "run"
    link.symlink_to(tmp_path / "elsewhere" / "run")
    with run_lock(link):
        assert (tmp_path / "elsewhere" / "run" / LOCK_FILE).is_file()
        write_text(link / "result.json", "{}\n")
    assert link.is_symlink() and (link / "result.json").read_text() == "{}\n"


def _write_directory(path: Path) -> None:
    with atomic_directory(path) as temporary:
        (temporary / "config.json").write_text("{}", encoding="utf-8")


def _write_file(path: Path) -> None:
    write_text(path, "new\n")
