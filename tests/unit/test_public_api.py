"""What `import bertlab` offers is whole: every type that a public function, method or class
names in its signature (an argument, a result, a result's fields) is importable from `bertlab`
itself, so that `fit(config=FinetuneConfig(...))` needs no module path (module paths move)."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Iterator
from typing import Any

import bertlab

# Signatures a user never calls, with why: their types are bertlab's own business.
NOT_CALLED_BY_USERS = {
    "PretrainedBert.__init__": "a PretrainedBert is made by bertlab.load",
    "PretrainedLanguageModel.__init__": "a PretrainedLanguageModel is made by bertlab.load",
}


def _signatures(name: str, value: Any) -> Iterator[tuple[str, Any]]:
    """(where, what has annotations) for a public name: a function, or a class with its
    constructor, public methods and properties (a dataclass's fields are its constructor's)."""
    yield name, value
    if not inspect.isclass(value):
        return
    for member_name, member in vars(value).items():
        if member_name.startswith("_") and member_name != "__init__":
            continue
        if isinstance(member, property):
            member = member.fget
        if isinstance(member, classmethod | staticmethod):
            member = member.__func__
        if callable(member):
            yield f"{name}.{member_name}", member


def _bertlab_types(hint: Any) -> Iterator[type]:
    """The classes of bertlab in a type hint (`FinetuneConfig | None` -> FinetuneConfig)."""
    if isinstance(hint, type):
        if hint.__module__.startswith("bertlab."):
            yield hint
        return
    for argument in typing.get_args(hint):
        yield from _bertlab_types(argument)


def _named_types() -> dict[type, list[str]]:
    """Every bertlab class named in a signature of a public name, with where."""
    named: dict[type, list[str]] = {}
    for name in bertlab.__all__:
        for where, annotated in _signatures(name, getattr(bertlab, name)):
            if where in NOT_CALLED_BY_USERS:
                continue
            for hint in typing.get_type_hints(annotated).values():
                for found in _bertlab_types(hint):
                    named.setdefault(found, []).append(where)
    return named


def test_every_type_the_public_signatures_name_is_importable_from_bertlab() -> None:
    missing = {
        f"{kind.__module__}.{kind.__name__}": places
        for kind, places in _named_types().items()
        if getattr(bertlab, kind.__name__, None) is not kind
    }
    assert not missing, missing


def test_the_check_sees_a_result_field_and_an_argument() -> None:
    named = _named_types()
    assert "PretrainedBert.fit" in named[bertlab.FinetuneConfig]  # an argument
    assert "PretrainedBert.fit" in named[bertlab.FinetuneResult]  # a result
    assert "PretrainResult.__init__" in named[bertlab.Progress]  # a result's field
    assert dataclasses.is_dataclass(bertlab.FinetuneConfig)


def test_all_lists_the_public_names_and_dir_shows_them() -> None:
    assert len(set(bertlab.__all__)) == len(bertlab.__all__)
    assert set(bertlab.__all__) <= set(dir(bertlab))
    for name in bertlab.__all__:
        assert getattr(bertlab, name).__name__ == name
