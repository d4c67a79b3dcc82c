"""Where a command may write: never over what it reads.

An output that is one of the command's inputs (`predict --data dev.tsv --output dev.tsv`), that
lies inside an input folder (a model, a tokenizer), or inside a folder the command replaces whole
(the corpus cache, which a run with other settings rebuilds; an earlier run that `--overwrite`
replaces), would destroy what the user has, and an input inside a folder replaced whole would go
with it. `check_outputs` refuses each in one line naming both paths and their settings, before
any work:

    check_outputs(inputs={"--data": data, "--model": model}, outputs={"--output": output})
    check_outputs({"corpus": files}, {"out": out}, replaced={"corpus_cache": cache})

Paths are compared where they lead: links followed, `.` and `..` resolved, and a file with two
names (a hard link) is one file. An input that does not exist (a Hub id, standard input `-`) and
an output written in place (`-`, `/dev/stdout`, a pipe) are not compared.

A setting is named as the caller gives it: a flag (`--output`), or the name of an API keyword that
`bertlab.core.wording` knows (`corpus_cache`), which the command line says as its flag.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from bertlab.core.atomic import is_special
from bertlab.core.wording import API_WORDS, Worded

PathLike = str | os.PathLike
Paths = PathLike | Sequence[PathLike] | None  # a setting's value: a path, several, or none
STREAM = "-"  # standard input or output


def check_outputs(
    inputs: Mapping[str, Paths],
    outputs: Mapping[str, Paths],
    replaced: Mapping[str, Paths] | None = None,
) -> None:
    """Refuse outputs that would write over inputs, before any work.

    Args:
        inputs: what the command reads, by setting.
        outputs: what it writes (files, or folders it writes files into), by setting.
        replaced: the folders it writes by replacing them whole (the corpus cache; an earlier
            run that it replaces), by setting: nothing else may lie inside these.

    Raises:
        ValueError: an output is an input or lies inside one or inside a folder replaced whole,
            or an input lies inside a folder replaced whole; naming both.
    """
    replaced = replaced or {}
    read = [(name, path) for name, path in _each(inputs) if path.exists()]
    for whole_name, whole in _each(replaced):
        for source_name, source in read:
            if _same(source, whole) or _inside(source, whole):
                raise _refusal(INPUT_IN_REPLACED, source_name, source, whole_name, whole)
        for name, output in _each(outputs):
            if _same(output, whole) or _inside(output, whole):
                raise _refusal(OUTPUT_IN_REPLACED, name, output, whole_name, whole)
    for name, output in [*_each(outputs), *_each(replaced)]:
        if is_special(output):
            continue
        for source_name, source in read:
            if _same(output, source) or (source.is_dir() and _inside(output, source)):
                raise _refusal(OUTPUT_IN_INPUT, name, output, source_name, source)


# {first} {first_path} {is} {second} {second_path}: the settings (as `_said`), their paths, and
# "is" or "is inside".
OUTPUT_IN_INPUT = (
    "{first} {first_path} {is} {second} {second_path}, which the command reads; choose another "
    "{first}"
)
OUTPUT_IN_REPLACED = (
    "{first} {first_path} {is} {second} {second_path}, which is replaced whole when it is "
    "written again (a run with other settings rebuilds it); choose another {first}, outside it"
)
INPUT_IN_REPLACED = (
    "{first} {first_path} {is} {second_path}, which the command replaces whole ({second}); move "
    "it out, or choose another {second}"
)


def _refusal(
    template: str, first: str, first_path: Path, second: str, second_path: Path
) -> ValueError:
    """The refusal `template` says, with "is" or "is inside" as the paths are."""
    relation = "is" if _same(first_path, second_path) else "is inside"
    said = template.format(
        first=_said(first),
        second=_said(second),
        first_path="{first_path}",
        second_path="{second_path}",
        **{"is": relation},
    )
    return ValueError(Worded(said, first_path=first_path, second_path=second_path))


def _said(name: str) -> str:
    """`name` in a message's template: a placeholder for an API keyword (the command line says
    its flag), else the name itself."""
    return "{" + name + "}" if name in API_WORDS else name.replace("{", "{{").replace("}", "}}")


def _each(settings: Mapping[str, Paths]) -> Iterator[tuple[str, Path]]:
    """(setting, path) for every path of every setting; `-` (a standard stream) left out."""
    for name, value in settings.items():
        if value is None:
            continue
        values = [value] if isinstance(value, str | os.PathLike) else value
        yield from ((name, Path(path)) for path in values if os.fspath(path) != STREAM)


def _where(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _same(first: Path, second: Path) -> bool:
    """Whether the two paths name one file or folder (through links, or as hard links)."""
    if _where(first) == _where(second):
        return True
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet)
        return False


def _inside(path: Path, folder: Path) -> bool:
    """Whether `path` lies inside `folder` (not `folder` itself), where each leads."""
    return _where(path) != _where(folder) and _where(path).is_relative_to(_where(folder))
