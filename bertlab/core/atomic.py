"""The one way bertlab writes files and directories: complete or not at all.

Every file is written under a temporary name beside its destination and renamed into place when
complete (`os.replace` is atomic on POSIX), so a crash, a kill or a full disk never leaves a
half-written file where a reader expects a whole one. A directory (a model, a checkpoint, a
tokenized corpus) is filled under a temporary name and renamed into place the same way. Special
files (a terminal, a pipe, a device, `/dev/stdout` and the other links to a process's streams)
cannot be renamed over: they are written in place.

    write_text(path, text)                       # results.json, table.md, predictions
    with atomic_file(path) as temporary:         # a library that writes to a path itself
        figure.savefig(temporary)
    with atomic_writer(path) as file:            # a library that writes to a file object
        torch.save(state, file)
    with atomic_files([a, b]) as (ta, tb): ...   # several files that only make sense together
    with atomic_directory(directory) as temporary:  # a model directory or a checkpoint
        model.save_pretrained(temporary)

A write that fails for a reason of the system (a full disk, a read-only file system, a quota)
raises `WriteError`, one line naming the destination and the reason ("could not write
runs/x/final: no space left on device"), whichever library did the writing: an OSError, a Rust
library's "(os error 28)" (safetensors, tokenizers) and torch's "unexpected pos" (through
`atomic_writer`) alike.

A destination that is a symbolic link is written through: the link stays and leads to the new
file or directory (`followed`), as `cp` writes through a link; a link that leads nowhere yet
leads to what is written.

A run's directory is written by one process at a time (`run_lock`); what killed writers left
behind is removed when the next one starts (`remove_temporaries`). Replacing an earlier run's
outputs, and whose run a folder holds, is `bertlab.core.replacing`.
"""

from __future__ import annotations

import errno
import fcntl
import io
import json
import math
import os
import re
import shutil
import stat
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from bertlab.core.run_folder import LOCK_FILE, OWNER_FILE
from bertlab.core.wording import Worded

# tempfile makes private files (0o600) and directories (0o700); what bertlab writes is for sharing.
FILE_MODE = 0o644
DIRECTORY_MODE = 0o755
TEMPORARY_MARK = ".tmp"  # in the names of temporary files and directories
OLD_MARK = ".old"  # ends the temporary name of a directory being replaced
# A process's streams are reached through /proc (/dev/stdout -> /proc/self/fd/1, /dev/fd/1):
# a rename over /dev/stdout would replace the link (as root), not write to the stream.
PROC = Path("/proc")
# Errors only writing causes. A writer's block may also read files; its OSError with another
# errno (a missing input) is not the destination's and passes unchanged.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})
# How Rust's std::io::Error ends (safetensors, tokenizers): "... No space left on device (os
# error 28)".
_RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")


class WriteError(OSError):
    """A file or directory could not be written. `str()` is one line naming the destination and
    the system's reason, and `hint` (what to do next) when set:
    "could not write runs/x/final: no space left on device"."""

    hint = ""

    def __str__(self) -> str:
        line = f"could not write {self.filename}: {str(self.strerror).lower()}"
        return f"{line}; {self.hint}" if self.hint else line


def write_error(error: BaseException, path: str | os.PathLike) -> WriteError | None:
    """`error`, raised while writing `path`, as a WriteError naming `path`; None when it is not
    a failure of writing (a bug of the writer, an input it could not read)."""
    code = _write_errno(error)
    return None if code is None else WriteError(code, os.strerror(code), str(path))


def _write_errno(error: BaseException | None) -> int | None:
    """The errno of a failure to write, found in `error` or the exceptions it was raised from."""
    while error is not None:
        if isinstance(error, WriteError):
            return error.errno
        if isinstance(error, OSError):
            return error.errno if error.errno in WRITE_ERRNOS else None
        match = _RUST_OS_ERROR.search(str(error))
        if match and int(match.group(1)) in WRITE_ERRNOS:
            return int(match.group(1))
        error = error.__cause__ or error.__context__
    return None


@contextmanager
def _reported_as(path: Path) -> Iterator[None]:
    """Re-raise a failure to write (`write_error`) as a WriteError naming `path`."""
    try:
        yield
    except Exception as error:  # any library's: only a failure to write is replaced
        reported = write_error(error, path)
        if reported is None:
            raise
        raise reported from error


@contextmanager
def _own_step(path: Path) -> Iterator[None]:
    """This module's own steps (a temporary made, renamed into place): any OSError is the
    destination's."""
    try:
        yield
    except WriteError:
        raise
    except OSError as error:
        raise WriteError(error.errno, error.strerror, str(path)) from error


def is_special(path: Path) -> bool:
    """True for a path written in place: a device, a pipe, or a process's stream (`/dev/stdout`,
    `/dev/fd/1`, `/proc/self/fd/1`) even when it leads to a regular file."""
    if _is_stream(Path(os.path.abspath(path))):
        return True
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _is_stream(path: Path) -> bool:
    """True for a path in a directory under /proc, or a link to one (`/dev/stdout`)."""
    places = [Path(os.path.realpath(path.parent)) / path.name]
    if path.is_symlink():
        places.append(path.parent / os.readlink(path))  # an absolute target replaces the parent
    return any(place.is_relative_to(PROC) for place in places)


def followed(path: str | os.PathLike) -> Path:
    """`path`, or where it leads when it is a symbolic link (through a chain of links; a link
    that leads nowhere yet gives the path it names). bertlab writes through a link: renaming a
    new file or directory over the link itself would replace the link, and the temporary beside
    it could lie on another file system than the link's target."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


@contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; it replaces `path` only if the block succeeds.

    A special file (`/dev/stdout`, a pipe) is yielded itself and written in place.

    Raises:
        WriteError: the file could not be written (a full disk, ...), naming `path`.
    """
    path = Path(path)
    with _reported_as(path):
        if is_special(path):
            yield path
            return
        target = followed(path)
        with _own_step(path):
            temporary = _temporary_file(target)
        try:
            yield temporary
            with _own_step(path):
                os.chmod(temporary, FILE_MODE)
                os.replace(temporary, target)
        finally:
            temporary.unlink(missing_ok=True)


def _temporary_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    # The destination's suffix last, for writers that choose the format by it (matplotlib).
    suffix = TEMPORARY_MARK + path.suffix
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    os.close(handle)
    return Path(name)


class _RecordingFile(io.RawIOBase):
    """A file that keeps what stopped a write (the OSError of a full disk, the KeyboardInterrupt
    of Ctrl-C or SIGTERM), for a writer that reports it in words of its own (torch.save:
    "unexpected pos 576 vs 534", without the errno or the interruption)."""

    def __init__(self, file: io.FileIO) -> None:
        super().__init__()
        self.file = file
        self.error: OSError | KeyboardInterrupt | None = None

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int | None:
        try:
            return self.file.write(data)
        except (OSError, KeyboardInterrupt) as error:
            self.error = error
            raise

    def close(self) -> None:
        self.file.close()
        super().close()


@contextmanager
def atomic_writer(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """`atomic_file` opened as a binary file object, for writers that take one (`torch.save`).

    A writer that fails after a write failed fails with the system's error (then a WriteError
    naming `path`), whatever it said itself; one interrupted in a write (Ctrl-C, SIGTERM) with
    the KeyboardInterrupt.
    """
    with atomic_file(path) as temporary:
        raw = _RecordingFile(io.FileIO(temporary, "a"))  # "a": see write_text
        try:
            with io.BufferedWriter(raw) as file:
                yield file
        except Exception as error:  # any writer's: replaced only by the error it hid
            if raw.error is None or raw.error is error:
                raise
            raise raw.error from error


@contextmanager
def atomic_files(paths: Sequence[str | os.PathLike]) -> Iterator[list[Path]]:
    """`atomic_file` for several files at once: none is replaced unless all were written."""
    with ExitStack() as stack:
        yield [stack.enter_context(atomic_file(path)) for path in paths]


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically; return `path`."""
    # Appending to the empty temporary is writing it; in place, /dev/stdout redirected with
    # `>>` keeps what the file held (opening it for writing would truncate it).
    with atomic_file(path) as temporary, open(temporary, "a", encoding="utf-8") as file:
        file.write(text)
    return Path(path)


def append_text(path: str | os.PathLike, text: str) -> None:
    """Append `text` to `path` (a log, whose reader skips a torn last line); a failure is a
    WriteError naming `path`."""
    path = Path(path)
    with _reported_as(path), open(path, "a", encoding="utf-8") as file:
        file.write(text)


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

    Between the two renames at the end `directory` is briefly absent, never half-written; a
    kill there leaves the complete new directory under its temporary name, which
    `remove_temporaries` renames into place.

    Raises:
        WriteError: the directory could not be written (a full disk, ...), naming `directory`.
    """
    directory = Path(directory)
    target = followed(directory)
    with _reported_as(directory):
        with _own_step(directory):
            temporary = _temporary_directory(target)
        try:
            yield temporary
            with _own_step(directory):
                _rename_into_place(temporary, target)
        finally:
            if temporary.exists():
                shutil.rmtree(temporary)


def _temporary_directory(directory: Path) -> Path:
    directory.parent.mkdir(parents=True, exist_ok=True)
    prefix, suffix = f".{directory.name}.", TEMPORARY_MARK
    temporary = Path(tempfile.mkdtemp(dir=directory.parent, prefix=prefix, suffix=suffix))
    os.chmod(temporary, DIRECTORY_MODE)
    return temporary


def _rename_into_place(temporary: Path, directory: Path) -> None:
    """Rename the complete `temporary` to `directory`, removing an earlier one."""
    old = None
    if directory.exists():
        old = temporary.with_name(temporary.name + OLD_MARK)
        os.rename(directory, old)
    os.rename(temporary, directory)
    if old is not None:
        shutil.rmtree(old)


def remove_directory(directory: str | os.PathLike) -> None:
    """Remove `directory` whole: it is renamed to a temporary name first, so a kill midway
    leaves a temporary (`remove_temporaries` removes it), never a half-removed directory."""
    directory = Path(directory)
    doomed = directory.with_name(f".{directory.name}.{uuid.uuid4().hex[:8]}{TEMPORARY_MARK}")
    os.rename(directory, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


def remove_temporaries(directory: str | os.PathLike) -> int:
    """Remove what interrupted writers left in `directory`: this module's temporary files and
    directories (hidden, with TEMPORARY_MARK in the name). A directory whose replacement was
    killed between its two renames is put in place first (`atomic_directory`). Call it while
    holding `run_lock`, so no live writer's temporary is taken. Returns how many were removed."""
    directory = Path(directory)
    if not directory.is_dir():
        return 0
    _finish_replacements(directory)
    removed = 0
    for path in directory.iterdir():
        if path.name.startswith(".") and TEMPORARY_MARK in path.name:
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
            removed += 1
    return removed


def _finish_replacements(directory: Path) -> None:
    """Rename into place each complete directory whose replacement stopped between the two
    renames: `.NAME.XXXX.tmp.old` (the earlier one) is there, `.NAME.XXXX.tmp` is complete
    (the earlier one is renamed only after the new one was written) and NAME is missing."""
    for old in directory.glob(f".*{TEMPORARY_MARK}{OLD_MARK}"):
        temporary = old.with_name(old.name.removesuffix(OLD_MARK))
        name = temporary.name[1:].removesuffix(TEMPORARY_MARK).rsplit(".", 1)[0]
        if temporary.is_dir() and not (directory / name).exists():
            os.rename(temporary, directory / name)


# The lock files of the run directories this process holds (`run_lock`). A POSIX record lock
# belongs to the process, and closing any descriptor of its file releases it: were the holder
# to open its own lock file again (to read the pid in it), the next close would leave the
# directory to any other writer. So the holder never opens it again: `lock_holder` answers from
# here, and a `run_lock` of a directory this process holds already is the one it holds. Each
# lock file with the pid of its holder: a forked process inherits this table, not the locks.
_held: dict[Path, int] = {}
HOLDER_WAIT_SECONDS = 2.0  # how long a refused writer waits for the holder's pid to be written


@contextmanager
def run_lock(directory: str | os.PathLike) -> Iterator[Path]:
    """Hold `directory` for this process: an advisory lock on DIRECTORY/.bertlab.lock, which
    holds the pid, is removed when the block ends, and is released by the system if the process
    dies (a process that holds it may take it again). A directory this call created is removed
    again if the block leaves nothing in it (a refused run leaves no empty --out behind). Inside
    the block of a process that holds it already, it holds it still (the outer block frees it).

    Raises:
        ValueError: another process holds the directory (naming its pid).
        WriteError: the directory or its lock file cannot be made (a folder this user cannot
            write to, a read-only file system), naming the directory.
    """
    directory = followed(directory)
    path = directory / LOCK_FILE
    if _holds(path):
        yield directory
        return
    created = not directory.exists()
    with _own_step(directory):
        directory.mkdir(parents=True, exist_ok=True)
        handle = _take_lock(path)
    key = _lock_key(path)
    _held[key] = os.getpid()
    try:
        with _reported_as(path):
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
        yield directory
    finally:
        del _held[key]
        path.unlink(missing_ok=True)  # while still locked: see _take_lock
        handle.close()
        if created and not [other for other in directory.iterdir() if other.name != OWNER_FILE]:
            (directory / OWNER_FILE).unlink(missing_ok=True)
            directory.rmdir()


def lock_holder(directory: str | os.PathLike) -> str:
    """The pid of the process that holds `directory` (`run_lock`), as its lock file says
    ("unknown" without one): this process's own, when it holds it, without opening the file."""
    path = followed(directory) / LOCK_FILE
    if _holds(path):
        return str(os.getpid())
    try:
        return path.read_text(encoding="utf-8").strip() or "unknown"
    except OSError:
        return "unknown"


def _holds(path: Path) -> bool:
    """Whether this process holds the lock file `path`."""
    return _held.get(_lock_key(path)) == os.getpid()


def _lock_key(path: Path) -> Path:
    """One name for a lock file however its directory is spelt (relative, through links)."""
    return Path(os.path.realpath(path))


def _take_lock(path: Path) -> TextIO:
    """`path` opened and locked. A lock file its holder removed (on leaving `run_lock`) between
    this process's open and its lock is no longer the lock: the new one is taken instead.

    Raises:
        ValueError: another process holds the lock (naming its pid).
    """
    while True:
        handle = open(path, "a+", encoding="utf-8")
        try:
            # A POSIX record lock: held by this process only (a forked data worker does not
            # inherit it, so a killed run's orphans cannot keep the directory locked).
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            holder = _written_pid(handle)
            handle.close()
            if error.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            raise ValueError(
                Worded(
                    "{where} is being written by another bertlab process (pid {pid}); wait for "
                    "it to finish or choose another {out}",
                    where=path.parent,
                    pid=holder,
                )
            ) from None
        if _is_open_as(handle, path):
            return handle
        handle.close()


def _written_pid(handle: TextIO) -> str:
    """The pid in a lock file that another process holds: it writes it just after taking the
    lock, so a writer refused at that moment waits a little for it."""
    deadline = time.monotonic() + HOLDER_WAIT_SECONDS
    while True:
        handle.seek(0)
        holder = handle.read().strip()
        if holder or time.monotonic() > deadline:
            return holder or "unknown"
        time.sleep(0.02)


def _is_open_as(handle: TextIO, path: Path) -> bool:
    """True when `path` still names the file `handle` has open."""
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    opened = os.fstat(handle.fileno())
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)
