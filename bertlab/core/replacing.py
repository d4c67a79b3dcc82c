"""Replacing a run's outputs only once the new run has succeeded, and whose run a folder holds.

`replacing` moves the earlier run's outputs aside into OUT/.replaced, removes them once the
block that writes the new run succeeds, and puts them back if it fails; `restore_replaced` and
`restore_interrupted` put back what a killed replacement left aside. `claim` makes a folder the
run directory of one bertlab command (OUT/.bertlab-run), refusing one that holds another
command's run or files bertlab did not write. All of it is called holding `atomic.run_lock`.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from bertlab.core.atomic import lock_holder, remove_directory, run_lock, write_text
from bertlab.core.run_folder import OWNER_FILE
from bertlab.core.wording import Worded

logger = logging.getLogger(__name__)

REPLACED_DIR = ".replaced"  # in a run's directory: the earlier run's outputs while a new run runs
_MOVING = ".moving"  # in REPLACED_DIR while the earlier outputs are moved into it
_RESTORING = ".restoring"  # in REPLACED_DIR once the failed run's outputs are removed
_OUTPUTS = ".outputs"  # in REPLACED_DIR: the names of a run's outputs, so any reader can restore


def outputs_in(directory: str | os.PathLike, names: Sequence[str]) -> list[Path]:
    """The files and directories of `directory` that `names` name (glob patterns: `seed-*`)."""
    directory = Path(directory)
    return [path for name in names for path in sorted(directory.glob(name))]


@contextmanager
def replacing(directory: str | os.PathLike, names: Sequence[str]) -> Iterator[None]:
    """Run the block that writes a new run into `directory` in place of the earlier run's
    outputs there (`names`: what a run writes there, as `outputs_in` takes them): they are
    moved aside into REPLACED_DIR first, removed once the block succeeds, and put back if it
    fails (an error, Ctrl-C), after what the failed run wrote is removed. A process killed
    meanwhile leaves REPLACED_DIR, with the names, which `restore_replaced` puts back before the
    next run, and `restore_interrupted` before any command reads from the directory: the earlier
    run goes only once a new one has replaced it.

    Call it holding `run_lock(directory)`.
    """
    directory = Path(directory)
    earlier = outputs_in(directory, names)
    if not earlier:
        yield
        return
    backup = directory / REPLACED_DIR
    backup.mkdir()
    (backup / _MOVING).touch()
    write_text(backup / _OUTPUTS, "".join(f"{name}\n" for name in names))
    for path in earlier:
        os.rename(path, backup / path.name)
    (backup / _MOVING).unlink()
    try:
        yield
    except BaseException:
        restore_replaced(directory)
        raise
    remove_directory(backup)


def restore_replaced(directory: str | os.PathLike) -> bool:
    """Put back the earlier run that `replacing` moved aside in `directory`, if there is one:
    remove what the failed (or killed) new run wrote (the outputs `replacing` named), then move
    the earlier run's back. Safe to interrupt and call again. Call it holding
    `run_lock(directory)`. Returns whether there was one to put back."""
    directory = Path(directory)
    backup = directory / REPLACED_DIR
    if not backup.is_dir():
        return False
    moving = (backup / _MOVING).exists()  # killed before the new run started: nothing new
    if not moving and not (backup / _RESTORING).exists():
        for path in outputs_in(directory, _replaced_names(backup)):
            _remove(path)
        (backup / _RESTORING).touch()
    for path in backup.iterdir():
        if path.name in (_MOVING, _RESTORING, _OUTPUTS):
            continue
        target = directory / path.name
        if target.exists() or target.is_symlink():
            _remove(target)
        os.rename(path, target)
    shutil.rmtree(backup)
    return True


def _replaced_names(backup: Path) -> list[str]:
    """The names of the outputs that `replacing` recorded; those of the earlier outputs in
    `backup` where it was killed before it recorded them."""
    try:
        return (backup / _OUTPUTS).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return [path.name for path in backup.iterdir() if path.name not in (_MOVING, _RESTORING)]


def restore_interrupted(path: str | os.PathLike) -> None:
    """Before `path` is read: put back the earlier run of each directory at or above it whose
    replacement (`replacing`) was killed, so that a model folder the killed run had moved aside
    (OUT/best) is where it was.

    Raises:
        ValueError: a running bertlab process is replacing the directory that holds `path`.
    """
    path = Path(os.path.abspath(path))
    for directory in (path, *path.parents):
        backup = directory / REPLACED_DIR
        if not backup.is_dir() or lock_holder(directory) == str(os.getpid()):
            continue  # none, or this process's own replacement (it reads what it writes)
        try:
            with run_lock(directory):
                if restore_replaced(directory):
                    logger.warning(
                        "%s: put back the earlier run that an interrupted run had moved aside",
                        directory,
                    )
        except ValueError:  # a live writer's replacement
            if path != directory and (backup / path.relative_to(directory).parts[0]).exists():
                raise ValueError(
                    f"{path} is being replaced by a running bertlab process (pid "
                    f"{lock_holder(directory)}); until it ends, the earlier one is in {backup}"
                ) from None


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        remove_directory(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def claim(
    directory: str | os.PathLike,
    command: str,
    names: Sequence[str],
    is_earlier_run: Callable[[Path], bool] = lambda directory: False,
) -> None:
    """Make `directory` the run directory of bertlab's `command` (OWNER_FILE says so), before
    the command writes or replaces its outputs there (`names`, as `outputs_in` takes them). A
    directory that holds another command's run, or such outputs that `command` did not write
    (the user's own, made without bertlab), is refused: bertlab replaces only what it wrote.
    `is_earlier_run` recognizes a run of `command` written before runs said whose they were (by
    its layout). Call it holding `run_lock(directory)`.

    Raises:
        ValueError: the directory holds another command's run, or outputs `command` did not
            write (naming them).
    """
    directory = Path(directory)
    try:
        owner = (directory / OWNER_FILE).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        owner = None
    if owner == command:
        return
    if owner is not None:
        raise ValueError(
            Worded(
                "{out} {path} holds a run of bertlab {other}; choose another {out}",
                path=directory,
                other=owner,
            )
        )
    found = outputs_in(directory, names)
    if found and not is_earlier_run(directory):
        listed = ", ".join(path.name + ("/" if path.is_dir() else "") for path in found)
        raise ValueError(
            Worded(
                "{out} {path} holds {listed}, which bertlab {command} did not write; move them "
                "out, or choose another {out}",
                path=directory,
                listed=listed,
                command=command,
            )
        )
    write_text(directory / OWNER_FILE, command + "\n")
