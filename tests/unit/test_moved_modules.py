"""The modules that earlier versions kept at the package's root still import by their old names
(`bertlab.MOVED_MODULES`), as the very module at its new place; the repository itself uses the
new paths only."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import bertlab
from bertlab import MOVED_MODULES

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("old", sorted(MOVED_MODULES))
def test_an_old_path_imports_the_module_itself(old: str) -> None:
    new = MOVED_MODULES[old]
    module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert module.__name__ == new and module.__spec__.name == new  # its own name and spec
    assert sys.modules[old] is module


def test_old_imports_of_a_script_run_in_a_fresh_process() -> None:
    """`from bertlab.modeling import ...` before anything else imported the new paths."""
    script = (
        "from bertlab.modeling import BertModel\n"
        "from bertlab import tokenization, heads as h\n"
        "import bertlab.config\n"
        "import bertlab.network.bert, bertlab.network.heads, bertlab.tokenizer.wordpiece\n"
        "assert BertModel is bertlab.network.bert.BertModel\n"
        "assert h is bertlab.network.heads and tokenization is bertlab.tokenizer.wordpiece\n"
        "assert bertlab.config.BertConfig is bertlab.BertConfig\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_every_new_path_exists_and_no_old_file_is_left() -> None:
    package = Path(bertlab.__file__).parent
    for old, new in MOVED_MODULES.items():
        assert (package.parent / (new.replace(".", "/") + ".py")).is_file(), new
        assert not (package.parent / (old.replace(".", "/") + ".py")).exists(), old


def _old_path_uses(text: str) -> list[str]:
    names = "|".join(re.escape(old.removeprefix("bertlab.")) for old in MOVED_MODULES)
    dotted = re.findall(rf"(?<![\w./])bertlab\.(?:{names})\b(?!\.py)", text)
    from_package = [
        line
        for line in re.findall(r"^\s*from bertlab import ([\w, ]+)$", text, re.M)
        for name in line.split(",")
        if f"bertlab.{name.split(' as ')[0].strip()}" in MOVED_MODULES
    ]
    return dotted + from_package


def test_the_repository_uses_the_new_paths_only() -> None:
    files = subprocess.run(
        ["git", "ls-files", "*.py", "*.md", "*.sh", "Makefile"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    if not files:
        pytest.skip("not a git checkout")
    here = Path(__file__).resolve()
    # The table itself, this test, and the contributors' guide (it names an old path to explain).
    exempt = {here, REPO / "bertlab" / "__init__.py", REPO / "CONTRIBUTING.md"}
    found = {
        name: uses
        for name in files
        if (REPO / name).resolve() not in exempt and (REPO / name).is_file()
        for uses in [_old_path_uses((REPO / name).read_text(encoding="utf-8"))]
        if uses
    }
    assert not found, found


def test_the_check_sees_an_old_path() -> None:
    assert _old_path_uses("from bertlab.modeling import BertModel\n") == ["bertlab.modeling"]
    assert _old_path_uses("from bertlab import hub, load\n") == ["hub, load"]
    assert _old_path_uses("from bertlab.network.bert import BertModel\n") == []
    assert _old_path_uses("see bertlab/cli/wording.py and bertlab.cli.wording\n") == []
