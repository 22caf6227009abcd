"""`session` means a chat session: a database session in app/ is called `db`.

Checked on function parameters, where the annotation says which one is meant: a parameter
typed `AsyncSession`, `Session` or `DbSession` (also inside `X | None`, `Optional[X]` or
`Annotated[X, ...]`) must not be named `session`, `sess` or `s`.
"""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"
ROOT = APP.parent

DB_SESSION_TYPES = frozenset({"AsyncSession", "Session", "DbSession"})
WRONG_NAMES = frozenset({"session", "sess", "s"})


def _type_names(annotation: ast.expr) -> set[str]:
    """The type names an annotation stands for, through unions, Optional and Annotated."""
    if isinstance(annotation, ast.Name):
        return {annotation.id}
    if isinstance(annotation, ast.Attribute):
        return {annotation.attr}
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return _type_names(ast.parse(annotation.value, mode="eval").body)
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        return _type_names(annotation.left) | _type_names(annotation.right)
    if isinstance(annotation, ast.Subscript):
        wrapper = _type_names(annotation.value)
        if wrapper & {"Optional", "Union", "Annotated"}:
            inner = annotation.slice
            items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            if wrapper & {"Annotated"}:
                items = items[:1]
            return set().union(*(_type_names(item) for item in items))
    return set()


def db_sessions_named_session(source: str) -> list[str]:
    """`function(parameter) (line n)` for each database-session parameter with a chat name."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
            annotation = arg.annotation
            if arg.arg in WRONG_NAMES and annotation and _type_names(annotation) & DB_SESSION_TYPES:
                found.append(f"{node.name}({arg.arg}) (line {arg.lineno})")
    return found


def test_the_checker_finds_database_sessions_named_session() -> None:
    source = """
async def ok(db: AsyncSession, session: ChatSession, session_id: uuid.UUID) -> None: ...
async def plain(session: AsyncSession) -> None: ...
def sync(self, s: orm.Session | None = None) -> None: ...
async def endpoint(*, sess: Annotated[AsyncSession, Depends(get_db)]) -> None: ...
async def alias(session: DbSession) -> None: ...
async def quoted(session: "Optional[AsyncSession]") -> None: ...
"""
    assert db_sessions_named_session(source) == [
        "plain(session) (line 3)",
        "sync(s) (line 4)",
        "endpoint(sess) (line 5)",
        "alias(session) (line 6)",
        "quoted(session) (line 7)",
    ]


def test_no_database_session_in_app_is_named_session() -> None:
    wrong = {
        path.relative_to(ROOT).as_posix(): names
        for path in sorted(APP.rglob("*.py"))
        if (names := db_sessions_named_session(path.read_text(encoding="utf-8")))
    }
    assert not wrong, "name the database session `db` (`session` is a chat session): " + "; ".join(
        f"{module}: {', '.join(names)}" for module, names in wrong.items()
    )
