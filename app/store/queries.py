"""Named queries: sql/*.sql parsed once at import, sqlc style (`-- name: x :kind`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.resources import resource_dir
from app.store.db import AsyncConn

_HEADER = re.compile(r"^--\s*name:\s*(?P<name>\w+)\s+:(?P<kind>one|many|execrows|exec)\s*$")


@dataclass(frozen=True)
class Query:
    name: str
    kind: str
    doc: str
    sql: str


def parse(path: Path) -> list[Query]:
    found: list[Query] = []
    name = kind = None
    doc: list[str] = []
    body: list[str] = []

    def flush() -> None:
        if name is not None and kind is not None:
            sql = "\n".join(body).strip().rstrip(";")
            if not sql:
                raise ValueError(f"{path.name}: query {name} is empty")
            found.append(Query(name, kind, " ".join(doc), sql))

    for line in path.read_text().splitlines():
        header = _HEADER.match(line)
        if header:
            flush()
            name, kind, doc, body = header["name"], header["kind"], [], []
        elif name is not None and not body and line.startswith("--"):
            doc.append(line.lstrip("- ").strip())
        elif name is not None:
            body.append(line)
    flush()
    return found


def load(folder: Path) -> dict[str, Query]:
    queries: dict[str, Query] = {}
    for path in sorted(folder.glob("*.sql")):
        table = path.stem
        for query in parse(path):
            if query.name in queries:
                raise ValueError(f"duplicate query name {query.name} in {path.name}")
            if not query.name.startswith(table + "_"):
                raise ValueError(f"{path.name}: query {query.name} must start with {table}_")
            queries[query.name] = query
    return queries


QUERIES = load(resource_dir("sql"))


def q(name: str) -> str:
    """The SQL of a named query; an unknown name fails loudly at first use."""
    try:
        return QUERIES[name].sql
    except KeyError:
        raise KeyError(f"no query named {name!r} in sql/") from None


async def many(
    conn: AsyncConn, name: str, /, binary: bool = False, **params: Any
) -> list[dict[str, Any]]:
    """All rows of a named query. `binary` asks for rows in binary format, cheaper to
    decode (timestamps above all) on the hot path; the query must then return enums as
    text, since psycopg has no binary loader for types it was not told about."""
    cur = await conn.execute(q(name), params, binary=binary)
    return await cur.fetchall()


async def one(conn: AsyncConn, name: str, /, **params: Any) -> dict[str, Any] | None:
    cur = await conn.execute(q(name), params)
    return await cur.fetchone()


async def exec_(conn: AsyncConn, name: str, /, **params: Any) -> None:
    await conn.execute(q(name), params)


async def execrows(conn: AsyncConn, name: str, /, **params: Any) -> int:
    """How many rows a named INSERT/UPDATE/DELETE wrote, without returning them."""
    cur = await conn.execute(q(name), params)
    return cur.rowcount
