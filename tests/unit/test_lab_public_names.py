"""The lab's scripts use bertlab's public names only: a private helper may change with no notice,
and a lab script that reaches it would break without a test noticing. Read with `ast`."""

from __future__ import annotations

import ast
from pathlib import Path

LAB = Path(__file__).resolve().parents[2] / "lab"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_uses(source: str) -> list[str]:
    """`from bertlab... import _x`, and `module._x` where `module` is an imported bertlab module."""
    tree = ast.parse(source)
    modules: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bertlab"):
            for alias in node.names:
                if _private(alias.name):
                    found.append(f"{node.module}.{alias.name}")
                modules.add(alias.asname or alias.name)  # a module or a name: checked below
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("bertlab"):
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and _private(node.attr)
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_the_check_sees_a_private_name_imported_or_reached() -> None:
    assert private_uses("from bertlab.apps.demo.runner import _step_tokenizer") == [
        "bertlab.apps.demo.runner._step_tokenizer"
    ]
    assert private_uses("from bertlab.apps.experiments import transfer as ex\nex._twin()") == [
        "ex._twin"
    ]
    assert private_uses("from bertlab.apps.experiments import transfer\ntransfer.run()") == []


def test_lab_scripts_use_public_names_only() -> None:
    scripts = sorted(LAB.glob("*.py"))
    assert scripts
    found = {path.name: private_uses(path.read_text(encoding="utf-8")) for path in scripts}
    assert {name: uses for name, uses in found.items() if uses} == {}
