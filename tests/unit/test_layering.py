"""The package's layers: imports point one way, no cycles, no hidden function-local imports.

Read from the source with `ast` (nothing is imported), so the check is fast and sees every
module. CONTRIBUTING.md explains the layers; `LAYERS` below is their one definition.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "bertlab"

# Lowest first. A module may import from its own layer and the layers below it, never above.
# An entry names a folder or a module (dotted, below bertlab); a module's layer is its longest
# entry. The package's root holds one folder per group of layers.
LAYERS = (
    ("core", "corpus", "tokenizer", "network"),  # the folders themselves: docstrings only
    # the run folder's names; files; where outputs may land; extras; words; the raw corpus:
    # corpus files in every format, read as documents (what tokenizer training reads)
    (
        "core.run_folder",
        "core.atomic",
        "core.replacing",
        "core.outputs",
        "core.optional",
        "core.wording",
        "corpus.text_files",
        "corpus.readers",
        "corpus.sources",
    ),
    ("core.precision",),  # the precisions a run may choose: names, no torch
    (
        "core.config",
        "core.lstm_config",  # the LSTM-era architectures (NNLM, ELMo, AWD-LSTM): no torch
        "core.finetune_config",
        "core.metrics",
        "core.runtime",
        "core.threads",
        "core.hub",
        "core.model_card",
    ),
    ("core.shipped",),  # the shipped models' table: what make models runs, the cards, the demo
    ("tokenizer.fast",),  # bulk encoding through a chunk cache (no BERT rules of its own)
    ("tokenizer.basic",),  # BERT's normalization and pre-tokenization as tokenizers steps
    ("tokenizer.wordpiece",),
    ("tokenizer.training",),
    # the tokenized corpus: built with a tokenizer, read by data/ (as network.checkpoint sits
    # below the model, the corpus's modules sit where what they import puts them)
    (
        "corpus.text_units",
        "corpus.format",
        "corpus.encode",
        "corpus.build",
        "corpus.preflight",
        "corpus.prepare",
    ),
    ("data",),  # pure data code, from a tokenized corpus to a batch: never the model
    ("network.checkpoint", "network.tf_checkpoint"),  # file formats and key names, no classes
    ("network.layer_groups",),  # what a model says it fine-tunes by: its groups of layers
    ("network.bert", "network.lm_base"),  # BERT; what the LSTM-era models share
    ("network.feature_head_config",),  # what a feature-based head reads: declarations, no torch
    (
        "network.heads",
        "network.feature_heads",
        "network.electra",
        "network.nnlm",
        "network.elmo",
        "network.awd_lstm",
    ),
    ("network.ulmfit", "network.lm_architectures"),  # on AWD-LSTM's body; the models by name
    # ELMo's task heads; every model as the uses read it (encoder, left-to-right LM)
    ("network.elmo_heads", "network.lm_views"),
    ("network.architectures",),  # every network, one entry each: loaded, read, fine-tuned
    ("task_families",),
    ("training",),
    ("use",),  # features, fill-mask and attention, bertlab.load, sentence scores, neighbours
    ("apps",),  # the demo and the experiments: compositions of library calls
    ("__init__",),  # the package's public API
    ("cli", "__main__"),  # the only code that reads argv; may import lazily (fast --help)
)
LAZY_IMPORTS_ALLOWED = ("cli",)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The bertlab module an imported name lives in (a submodule, else its package)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _imported(node: ast.Import | ast.ImportFrom, module: str, modules) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: from the module's own package
            package = module.split(".")
            if not modules[module].name == "__init__.py":
                package = package[:-1]
            package = package[: len(package) - node.level + 1]
            base = ".".join([*package, base] if base else package)
        names = [f"{base}.{alias.name}" for alias in node.names]
    found = [_resolve(name, modules) for name in names if name.split(".")[0] == "bertlab"]
    return [name for name in found if name is not None and name != module]


def _import_nodes(node: ast.AST, in_function: bool = False):
    """Every import statement under `node`, with whether it is inside a function. Type-only
    imports (`if TYPE_CHECKING:`) count as the others do: an annotation that names a module
    above, or one that imports this one, is a dependency all the same."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, in_function
            continue
        is_function = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
        yield from _import_nodes(child, in_function or is_function)


def _imports(modules: dict[str, Path]) -> tuple[dict[str, set[str]], list[str]]:
    """(module -> bertlab modules imported outside functions, type-only ones included;
    function-local bertlab imports)."""
    graph: dict[str, set[str]] = {}
    local: list[str] = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[module] = set()
        for node, in_function in _import_nodes(tree):
            targets = _imported(node, module, modules)
            if in_function and targets:
                local.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
            elif not in_function:
                graph[module].update(targets)
    return graph, local


def _layer(module: str) -> int:
    relative = ".".join(module.split(".")[1:]) or "__init__"
    found = [
        (len(name), index)
        for index, names in enumerate(LAYERS)
        for name in names
        if relative == name or relative.startswith(name + ".")
    ]
    if not found:
        raise AssertionError(f"bertlab.{relative} is in no layer of LAYERS")
    return max(found)[1]


def test_every_module_has_a_layer() -> None:
    for module in _modules():
        _layer(module)


def test_imports_point_down_the_layers() -> None:
    graph, _ = _imports(_modules())
    upward = [
        f"{module} (layer {_layer(module)}) imports {target} (layer {_layer(target)})"
        for module, targets in graph.items()
        for target in targets
        if _layer(target) > _layer(module)
    ]
    assert not upward, "\n".join(upward)


def test_there_are_no_import_cycles() -> None:
    graph, _ = _imports(_modules())
    cycles = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(module: str) -> None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                walk(target)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            walk(module)
    assert not cycles, "\n".join(cycles)


def test_only_the_cli_imports_bertlab_modules_inside_functions() -> None:
    _, local = _imports(_modules())
    hidden = [where for where in local if where.split("/")[1] not in LAZY_IMPORTS_ALLOWED]
    assert not hidden, "function-local imports of bertlab modules: " + ", ".join(hidden)


def test_the_checks_see_a_cycle_and_a_local_import(tmp_path, monkeypatch) -> None:
    """The checks above can fail: a made-up package with both faults, one of its cycles through a
    type-only import, is caught."""
    package = tmp_path / "bertlab"
    (package / "data").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "data" / "__init__.py").write_text("")
    (package / "data" / "a.py").write_text("from bertlab.data import b\n")
    (package / "data" / "b.py").write_text("def f():\n    from bertlab.data import a\n")
    (package / "data" / "c.py").write_text("import bertlab.data.d\n")
    (package / "data" / "d.py").write_text("from bertlab.data.c import x\nfrom .a import y\n")
    (package / "data" / "e.py").write_text("import bertlab.data.f\n")
    (package / "data" / "f.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bertlab.data.e import E\n"
    )
    (package / "core").mkdir()
    (package / "network").mkdir()
    (package / "network" / "bert.py").write_text("")
    (package / "core" / "config.py").write_text("from bertlab.network import bert\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    modules = _modules()
    graph, local = _imports(modules)
    assert graph["bertlab.data.c"] == {"bertlab.data.d"}
    assert graph["bertlab.data.d"] == {"bertlab.data.c", "bertlab.data.a"}
    assert graph["bertlab.data.f"] == {"bertlab.data.e"}  # type-only, counted
    assert local == ["bertlab/data/b.py:2"]
    with pytest.raises(AssertionError, match="bertlab.data.c -> bertlab.data.d") as found:
        test_there_are_no_import_cycles()
    assert "bertlab.data.e -> bertlab.data.f -> bertlab.data.e" in str(found.value)
    with pytest.raises(AssertionError, match="bertlab.core.config .* imports bertlab.network.bert"):
        test_imports_point_down_the_layers()
    with pytest.raises(AssertionError, match="bertlab/data/b.py:2"):
        test_only_the_cli_imports_bertlab_modules_inside_functions()
