"""Checks on an existing SQLite file before a store writes anything to it.

Opening a store sets its journal mode and creates its tables, which writes to the file.
A path that already holds something else (a text file, another program's database, the
other kind of dynbo store) must be refused before that, with the file left byte for
byte as it was: nothing a user stored is ever lost or changed by a wrong path.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from pathlib import Path

__all__ = ["check_store_file", "schema_columns", "store_path"]


def store_path(path: str | Path, kind: str) -> Path:
    """``path`` as a ``Path``, refusing an empty one (``kind`` names the store).

    ``Path("")`` is the working directory and SQLite's ``""`` a throwaway database: a
    store there would hold nothing a user could find again.
    """
    if isinstance(path, str) and not path.strip():
        raise ValueError(f"the {kind}'s path is empty")
    path = Path(path)
    try:
        elsewhere = path.exists() and not path.is_file()
    except OSError:  # an unreadable parent: opening the store says why
        elsewhere = False
    if elsewhere:
        # a directory, a device (/dev/null), a pipe: SQLite would write its journal and
        # WAL files beside it, and nothing stored would be kept
        raise ValueError(f"the {kind}'s path {str(path)!r} is not a regular file")
    return path


def schema_columns(schema: str) -> dict[str, tuple[str, ...]]:
    """Table name -> its column names, in order, as a store's ``schema`` (SQL) creates them."""
    conn = sqlite3.connect(":memory:")
    try:
        for statement in schema.split(";"):
            if statement.strip():
                conn.execute(statement)
        return _columns(conn)
    finally:
        conn.close()


def _columns(conn: sqlite3.Connection) -> dict[str, tuple[str, ...]]:
    names = [
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
    ]
    out = {}
    for name in names:
        # the name comes from sqlite_master itself; quoted for names that need it
        quoted = '"' + name.replace('"', '""') + '"'
        out[name] = tuple(row[1] for row in conn.execute(f"PRAGMA table_info({quoted})"))
    return out


def check_store_file(
    path: Path,
    *,
    kind: str,
    schema: str,
    version_key: str,
    version: int,
    older: Mapping[int, str] | None = None,
) -> None:
    """Refuse, without writing to it, an existing ``path`` that is not a store of ``kind``.

    A missing or empty file, or an SQLite database without tables, passes (the store
    creates them). Otherwise every table must be one of ``schema``'s with its columns,
    and the ``meta`` table must hold ``version_key`` = ``version`` (a store writes its
    tables and that row in one transaction, so every store it made has both); the file
    is read through a read-only connection. ``older`` maps earlier versions the store
    migrates to their schemas: such a file is checked against its own version's tables.

    Raises:
        ValueError: naming the path and what it holds instead.
    """
    if path.is_dir():
        raise ValueError(f"cannot open {kind} {path}: it is a directory")
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as err:
        raise ValueError(f"cannot open {kind} {path}: {err}") from None
    try:
        found = _columns(conn)
        if not found:
            return
        try:  # read once: any table named meta, whatever its columns
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (version_key,)).fetchone()
        except sqlite3.Error:
            row = None
        # a store of another version first: its columns may differ from this one's
        migratable = {str(v): s for v, s in (older or {}).items()}
        if row is not None and row[0] != str(version) and row[0] not in migratable:
            raise ValueError(
                f"{path} is not a dynbo {kind} this version reads "
                f"(its {version_key} is {row[0]!r}, expected {version})"
            )
        expected = schema_columns(migratable.get(row[0], schema) if row else schema)
        foreign = sorted(name for name, columns in found.items() if expected.get(name) != columns)
        if foreign:
            raise ValueError(
                f"{path} is not a dynbo {kind}: it holds other tables "
                f"({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}); "
                "choose another file"
            )
        if row is None:
            raise ValueError(
                f"{path} is not a dynbo {kind}: it has no {version_key} entry; choose another file"
            )
    except sqlite3.DatabaseError as err:
        raise ValueError(f"cannot open {kind} {path}: {err}") from None
    finally:
        conn.close()
