"""SQL lives only in repositories: no module under app/ builds or runs a statement elsewhere.

A module "executes SQL" when it imports a statement builder from SQLAlchemy (`text`,
`select`, `insert`, `update`, `delete`, the PostgreSQL `insert`), reaches one through a module
alias (`sa.select`), or calls `.execute(...)`, `.exec_driver_sql(...)`, `.scalar(...)` or
`.scalars(...)` on anything. A `.execute()` with no argument is a Redis pipeline (SQLAlchemy's
`execute` always takes a statement), so it is not counted. A string that reads as a statement
(`SELECT … FROM`, `WITH … AS (`, `INSERT INTO`, `UPDATE … SET`, `DELETE FROM`, in capitals)
counts too, so SQL handed to a driver as plain text cannot hide from the rule.

Allowed: files named `repository.py`, modules inside a `repository/` package, migrations/ (not
under app/), and the modules in ALLOWED below, each with the reason it is infrastructure.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "app"

STATEMENT_BUILDERS = frozenset({"text", "select", "insert", "update", "delete"})
STATEMENT_MODULES = frozenset(
    {
        "sqlalchemy",
        "sqlalchemy.sql",
        "sqlalchemy.sql.expression",
        "sqlalchemy.dialects.postgresql",
        "sqlalchemy.future",
    }
)
EXECUTING_METHODS = frozenset({"execute", "exec_driver_sql", "scalar", "scalars"})
SQL_TEXT = re.compile(
    r"^\s*(?:SELECT\b[\s\S]*\bFROM\b|WITH\s+\w+\s+AS\s*\(|INSERT\s+INTO\b|UPDATE\s+\w+\s+SET\b"
    r"|DELETE\s+FROM\b|SELECT\s+set_config\b)"
)

ALLOWED: dict[str, str] = {
    "app/core/db.py": "sets the tenant/user GUCs on every transaction (row-level security)",
    "app/core/embedded.py": "creates the embedded database through psql on its first start",
    "app/core/migrate.py": "reads alembic_version to tell whether the schema is current",
    "app/conversation/checkpoints/checkpointer.py": (
        "LangGraph's saver runs the tenant setting and the pruning (their SQL is in "
        "app/conversation/checkpoints/repository.py) in its own psycopg pipeline"
    ),
    "app/models/attachment.py": "server defaults in the table definition (DDL, not a query)",
    "app/models/kb_document.py": "server defaults in the table definition (DDL, not a query)",
    "app/models/query_history.py": "server defaults in the table definition (DDL, not a query)",
}


def is_repository(relative: str) -> bool:
    """Whether a module (path relative to the project root) is a repository."""
    parts = relative.split("/")
    return parts[-1] == "repository.py" or "repository" in parts[:-1]


def sql_uses(source: str) -> list[str]:
    """Each place in `source` that builds or runs a SQL statement, as `line: what`."""
    tree = ast.parse(source)
    found: list[str] = []
    module_aliases: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in STATEMENT_MODULES:
            found.extend(
                f"{node.lineno}: imports {node.module}.{alias.name}"
                for alias in node.names
                if alias.name in STATEMENT_BUILDERS
            )
        elif isinstance(node, ast.Import):
            module_aliases.update(
                alias.asname or alias.name
                for alias in node.names
                if alias.name in STATEMENT_MODULES
            )
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        if (
            node.attr in STATEMENT_BUILDERS
            and isinstance(owner, ast.Name)
            and owner.id in module_aliases
        ):
            found.append(f"{node.lineno}: uses {owner.id}.{node.attr}")
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method = node.func.attr
        if method not in EXECUTING_METHODS:
            continue
        if method == "execute" and not node.args and not node.keywords:
            continue  # a Redis pipeline's execute(); SQLAlchemy's always takes a statement
        found.append(f"{node.lineno}: calls .{method}(...)")
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and SQL_TEXT.match(node.value)
        ):
            found.append(f"{node.lineno}: holds a SQL statement in a string")
    return sorted(found, key=lambda line: int(line.split(":")[0]))


def offenders() -> dict[str, list[str]]:
    """Every module under app/ that runs SQL outside a repository and the allowlist."""
    result: dict[str, list[str]] = {}
    for path in sorted(APP.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if is_repository(relative) or relative in ALLOWED:
            continue
        uses = sql_uses(path.read_text(encoding="utf-8"))
        if uses:
            result[relative] = uses
    return result


def test_sql_runs_only_in_repositories() -> None:
    assert offenders() == {}, "move this SQL into the domain's repository.py"


def test_the_allowlist_names_modules_that_exist_and_still_run_sql() -> None:
    """A stale entry would let a future module of that name skip the rule."""
    for relative in ALLOWED:
        path = ROOT / relative
        assert path.exists(), f"{relative} is listed but does not exist"
        assert sql_uses(path.read_text(encoding="utf-8")), f"{relative} no longer runs SQL"


def test_the_rule_sees_each_kind_of_sql() -> None:
    samples = {
        "from sqlalchemy import select": "imports sqlalchemy.select",
        "from sqlalchemy import text as t": "imports sqlalchemy.text",
        "from sqlalchemy.dialects.postgresql import insert": "imports",
        "import sqlalchemy as sa\nsa.delete(X)": "uses sa.delete",
        "async def f(db):\n    await db.execute(q)": "calls .execute",
        "async def f(db):\n    await db.scalar(q)": "calls .scalar",
        "async def f(db):\n    await db.scalars(q)": "calls .scalars",
        "def f(c):\n    c.exec_driver_sql('SELECT 1')": "calls .exec_driver_sql",
        'Q = """\nWITH doomed AS (\n    DELETE FROM t RETURNING 1\n)\nSELECT 1"""': "holds a SQL",
        "Q = 'DELETE FROM checkpoints WHERE thread_id = %s'": "holds a SQL",
        "Q = 'SELECT max(v) AS v FROM checkpoint_migrations'": "holds a SQL",
    }
    for source, expected in samples.items():
        uses = sql_uses(source)
        assert uses and expected in uses[0], source
    assert sql_uses("async def f(pipe):\n    await pipe.execute()") == []
    assert sql_uses("from sqlalchemy import func, Select") == []
    assert sql_uses('"""Select the newest rows from the buffer, then update it."""') == []
