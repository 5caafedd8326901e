"""Checks on an existing SQLite file before a store writes anything to it.

Opening a store sets its journal mode and creates its tables, which writes to the file.
A path that already holds something else (a text file, another program's database, the
other kind of dynbo store) must be refused before that, with the file left byte for
byte as it was: nothing a user stored is ever lost or changed by a wrong path.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

__all__ = ["check_store_file", "schema_tables", "store_path"]

_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS (\w+)")


def store_path(path: str | Path, kind: str) -> Path:
    """``path`` as a ``Path``, refusing an empty one (``kind`` names the store).

    ``Path("")`` is the working directory and SQLite's ``""`` a throwaway database: a
    store there would hold nothing a user could find again.
    """
    if isinstance(path, str) and not path.strip():
        raise ValueError(f"the {kind}'s path is empty")
    return Path(path)


def schema_tables(schema: str) -> frozenset[str]:
    """The table names a store's ``CREATE TABLE IF NOT EXISTS`` statements create."""
    return frozenset(_TABLE.findall(schema))


def check_store_file(
    path: Path, *, kind: str, tables: frozenset[str], version_key: str, version: int
) -> None:
    """Refuse, without writing to it, an existing ``path`` that is not a store of ``kind``.

    A missing or empty file passes (the store creates it). Otherwise the file must be an
    SQLite database whose tables are among ``tables`` and whose ``meta`` row
    ``version_key`` (if any) is ``version``; it is read through a read-only connection.

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
        found = {
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        foreign = sorted(found - tables)
        if foreign:
            raise ValueError(
                f"{path} is not a dynbo {kind}: it holds other tables "
                f"({', '.join(foreign[:5])}{', ...' if len(foreign) > 5 else ''}); "
                "choose another file"
            )
        if "meta" in found:
            try:
                row = conn.execute(
                    "SELECT value FROM meta WHERE key = ?", (version_key,)
                ).fetchone()
            except sqlite3.Error:
                row = ("unreadable",)
            if row is not None and row[0] != str(version):
                raise ValueError(
                    f"{path} is not a dynbo {kind} this version reads "
                    f"(its {version_key} is {row[0]!r}, expected {version})"
                )
    except sqlite3.DatabaseError as err:
        raise ValueError(f"cannot open {kind} {path}: {err}") from None
    finally:
        conn.close()
