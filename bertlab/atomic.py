"""The one way bertlab writes files and directories: complete or not at all.

Every file is written under a temporary name beside its destination and renamed into place when
complete (`os.replace` is atomic on POSIX), so a crash, a kill or a full disk never leaves a
half-written file where a reader expects a whole one. A directory (a model, a checkpoint, a
tokenized corpus) is filled under a temporary name and renamed into place the same way. Special
files (a terminal, `/dev/stdout`, a pipe) cannot be renamed over: they are written in place.

    write_text(path, text)                       # results.json, table.md, predictions
    with atomic_file(path) as temporary:         # a library that writes to a path itself
        torch.save(state, temporary)
    with atomic_files([a, b]) as (ta, tb): ...   # several files that only make sense together
    with atomic_directory(directory) as temporary:  # a model directory or a checkpoint
        model.save_pretrained(temporary)

A run's directory is written by one process at a time (`run_lock`); what killed writers left
behind is removed when the next one starts (`remove_temporaries`).
"""

from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

# tempfile makes private files (0o600) and directories (0o700); what bertlab writes is for sharing.
FILE_MODE = 0o644
DIRECTORY_MODE = 0o755
TEMPORARY_MARK = ".tmp"  # in the names of temporary files and directories
LOCK_FILE = ".bertlab.lock"  # in a run's directory while a process writes to it; holds its pid


def is_special(path: Path) -> bool:
    """True for an existing path that is not a regular file or directory (a device, a pipe)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


@contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; it replaces `path` only if the block succeeds.

    A special file (`/dev/stdout`, a pipe) is yielded itself and written in place.
    """
    path = Path(path)
    if is_special(path):
        yield path
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # The destination's suffix last, for writers that choose the format by it (matplotlib).
    suffix = TEMPORARY_MARK + path.suffix
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, FILE_MODE)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


@contextmanager
def atomic_files(paths: Sequence[str | os.PathLike]) -> Iterator[list[Path]]:
    """`atomic_file` for several files at once: none is replaced unless all were written."""
    with ExitStack() as stack:
        yield [stack.enter_context(atomic_file(path)) for path in paths]


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically; return `path`."""
    with atomic_file(path) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return Path(path)


def json_text(value: Any, **options: Any) -> str:
    """`json.dumps(value, **options)`, valid JSON always: NaN and infinities (a correlation of
    constant predictions, a diverged loss), which JSON cannot hold, become null."""
    return json.dumps(_finite(value), allow_nan=False, **options)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def write_json(path: str | os.PathLike, value: Any, sort_keys: bool = False) -> Path:
    """Write `value` as indented JSON (`json_text`) with a final newline, atomically."""
    text = json_text(value, indent=2, sort_keys=sort_keys, ensure_ascii=False) + "\n"
    return write_text(path, text)


@contextmanager
def atomic_directory(directory: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary directory beside `directory`; when the block succeeds it takes the place
    of `directory` (replacing an earlier one), otherwise it is removed.

    Between the two renames at the end `directory` is briefly absent, never half-written.
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    temporary = Path(
        tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.", suffix=TEMPORARY_MARK)
    )
    os.chmod(temporary, DIRECTORY_MODE)
    try:
        yield temporary
        old = None
        if directory.exists():
            old = temporary.with_name(f"{temporary.name}.old")
            os.rename(directory, old)
        os.rename(temporary, directory)
        if old is not None:
            shutil.rmtree(old)
    finally:
        if temporary.exists():
            shutil.rmtree(temporary)


def remove_temporaries(directory: str | os.PathLike) -> int:
    """Remove what interrupted writers left in `directory`: this module's temporary files and
    directories (hidden, with TEMPORARY_MARK in the name). Call it while holding `run_lock`, so
    no live writer's temporary is taken. Returns how many were removed."""
    directory = Path(directory)
    if not directory.is_dir():
        return 0
    removed = 0
    for path in directory.iterdir():
        if path.name.startswith(".") and TEMPORARY_MARK in path.name:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed += 1
    return removed


@contextmanager
def run_lock(directory: str | os.PathLike) -> Iterator[Path]:
    """Hold `directory` for this process: an advisory lock on DIRECTORY/.bertlab.lock,
    released by the system if the process dies (a process that holds it may take it again). A
    directory this call created is removed again if the block leaves nothing else in it (a
    refused run leaves no empty --out behind).

    Raises:
        ValueError: another process holds the directory (naming its pid).
    """
    directory = Path(directory)
    created = not directory.exists()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    handle = open(path, "a+", encoding="utf-8")
    try:
        try:
            # A POSIX record lock: held by this process only (a forked data worker does not
            # inherit it, so a killed run's orphans cannot keep the directory locked).
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise ValueError(
                f"{directory} is being written by another bertlab process (pid {holder}); wait "
                "for it to finish or choose another --out"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield directory
    finally:
        if created and [p.name for p in directory.iterdir()] == [LOCK_FILE]:
            path.unlink(missing_ok=True)
            directory.rmdir()
        handle.close()
