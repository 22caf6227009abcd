"""The import contracts of `pyproject.toml` hold: imports run downhill, and nothing cycles.

The contracts are import-linter's, checked here against grimp's graph of `app/` so that
`make test` enforces them. A second test adds an upward import to that graph and expects the
contract to break: a contract that could not fail would prove nothing.
"""

from __future__ import annotations

import ast
import tomllib
from copy import deepcopy
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter.configuration import configure
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import Contract

ROOT = Path(__file__).resolve().parent.parent
CONTRACT_TYPES: dict[str, type[Contract]] = {
    "layers": LayersContract,
    "acyclic_siblings": AcyclicSiblingsContract,
}


def _contracts() -> list[Contract]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    session_options = {"root_packages": [config["root_package"]]}
    return [
        CONTRACT_TYPES[options["type"]](
            name=options["name"], session_options=session_options, contract_options=options
        )
        for options in config["contracts"]
    ]


@pytest.fixture(scope="module")
def import_graph() -> grimp.ImportGraph:
    configure()  # import-linter's own settings (its timer), as its command line sets them
    return grimp.build_graph("app", cache_dir=None)


def _broken(contract: Contract, graph: grimp.ImportGraph) -> str | None:
    check = contract.check(deepcopy(graph), verbose=False)
    if check.kept:
        return None
    return "\n  ".join([f"{contract.name}:", *_offending_imports(check.metadata or {})])


def _offending_imports(metadata: dict[str, Any]) -> list[str]:
    """The imports to remove, one per line, from a broken contract's report."""
    lines = []
    for dependency in metadata.get("invalid_dependencies", []):
        for route in dependency["routes"]:
            chain = route["chain"]
            lines.append(" -> ".join([chain[0]["importer"], *(link["imported"] for link in chain)]))
    for package, breakers in metadata.get("cycle_breakers_by_package", {}).items():
        lines += [f"{a} -> {b} (closes a cycle in {package})" for a, b in sorted(breakers)]
    return lines


def test_every_import_contract_is_kept(import_graph: grimp.ImportGraph) -> None:
    contracts = _contracts()
    assert {type(c) for c in contracts} == set(CONTRACT_TYPES.values())
    broken = [b for c in contracts if (b := _broken(c, import_graph)) is not None]
    assert not broken, "\n\n".join(broken)


UPWARD_IMPORTS = [
    ("app.core.db", "app.conversation.pipeline.runner"),  # the shared kit reaching into a feature
    ("app.llm.responder", "app.conversation.turn.types"),  # a library reaching into its user
    ("app.conversation.pipeline.build", "app.resources"),  # below the composition root using it
    # inside the conversation: the turn store reaching up to the graph, the graph to a service
    ("app.conversation.repository", "app.conversation.pipeline.state"),
    ("app.conversation.pipeline.runner", "app.conversation.service.chat"),
]


@pytest.mark.parametrize(("importer", "imported"), UPWARD_IMPORTS)
def test_an_upward_import_breaks_the_layers(
    import_graph: grimp.ImportGraph, importer: str, imported: str
) -> None:
    graph: Any = deepcopy(import_graph)
    graph.add_import(importer=importer, imported=imported, line_number=1, line_contents="x")
    reports = [_broken(c, graph) or "" for c in _contracts() if isinstance(c, LayersContract)]
    assert any(f"{importer} -> {imported}" in report for report in reports)


MAX_LINES = 300


def test_a_module_over_300_lines_says_why_at_its_top() -> None:
    silent = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if source.count("\n") <= MAX_LINES:
            continue
        docstring = ast.get_docstring(ast.parse(source)) or ""
        if f"{MAX_LINES} lines" not in docstring:
            silent.append(path.relative_to(ROOT).as_posix())
    assert not silent, f"over {MAX_LINES} lines with no reason in the module docstring: {silent}"
