"""Every public function and class in app/ says what it is for, and no code is hand-packed.

A public name is one not starting with `_`, at module level or inside a public class (methods,
properties, nested classes). `@overload` stubs and property setters share their docstring with
the definition they belong to.
"""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"
ROOT = APP.parent

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _shares_docstring(node: Definition) -> bool:
    """An `@overload` stub or a property's setter/deleter: documented where it is defined."""
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Name) and decorator.id == "overload":
            return True
        if isinstance(decorator, ast.Attribute) and decorator.attr in {"setter", "deleter"}:
            return True
    return False


def undocumented(source: str) -> list[str]:
    """Qualified names of the public functions and classes in `source` without a docstring."""
    missing: list[str] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if not isinstance(node, Definition) or node.name.startswith("_"):
                continue
            if _shares_docstring(node):
                continue
            if ast.get_docstring(node) is None:
                missing.append(f"{prefix}{node.name} (line {node.lineno})")
            if isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")

    visit(ast.parse(source).body, "")
    return missing


def _modules() -> dict[str, str]:
    return {
        path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(APP.rglob("*.py"))
    }


def test_the_checker_finds_undocumented_public_names_only() -> None:
    source = '''
def documented() -> None:
    """Says why."""

def bare() -> None:
    pass

def _private() -> None:
    pass

class Thing:
    """Says why."""

    def method(self) -> None:
        pass

    def _helper(self) -> None:
        pass

    @property
    def value(self) -> int:
        """Says why."""
        return 1

    @value.setter
    def value(self, new: int) -> None:
        pass

class _Hidden:
    def method(self) -> None:
        pass
'''
    assert undocumented(source) == ["bare (line 5)", "Thing.method (line 14)"]


def test_every_public_function_and_class_in_app_has_a_docstring() -> None:
    missing = {
        module: names for module, source in _modules().items() if (names := undocumented(source))
    }
    assert not missing, "public names without a docstring saying what they are for: " + "; ".join(
        f"{module}: {', '.join(names)}" for module, names in missing.items()
    )


def test_no_hand_packed_layout_anywhere() -> None:
    marker = "fmt: " + "skip"  # spelled apart, so this file does not match itself
    packed = sorted(
        path.relative_to(ROOT).as_posix()
        for folder in ("app", "bench", "tests", "migrations")
        for path in (ROOT / folder).rglob("*.py")
        if marker in path.read_text(encoding="utf-8")
    )
    assert not packed, f"'# {marker}' in {packed}: let ruff format lay it out"
