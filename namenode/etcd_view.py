"""The SQLite file as a view of the namespace on etcd: rows <-> keys, change capture, rebuild, apply.

With ``--meta etcd://...`` the truth is in etcd, one key per row of each replicated table
(``REPLICATED``); the NameNode's SQLite file is a materialised view of it, rebuildable at any
time (``build``: a snapshot at one revision, paginated).

Keys (under ``/<prefix>/``; ids fixed-width hex so ranges sort, text percent-quoted):
  t/<table>/<pk>[/<pk>...]  one row: its JSON object (column -> value)
  seq/<table>               SQLite's AUTOINCREMENT high-water mark (sqlite_sequence): an id once
                            issued is never issued again, by this active or the next
  leader                    the active's lease-bound key (election.py); its create revision is
                            the epoch
  commit                    ``<epoch>:<batch>`` of the last batch Txn (etcd_commit.py's chain);
                            not a row: the view ignores it

Change capture (the active): triggers on every replicated table record the primary key of each
row inserted, updated or deleted into ``_changes``, inside the writer's own transaction (a
savepoint rolled back rolls its captures back too). At each batch's COMMIT (db.py ``_seal``)
``collect`` turns them into the final row images (a put, or a delete when the row is gone) and
empties ``_changes``; the view COMMITs, and the committer sends them as one guarded etcd Txn off
the writers' lock (readers of the view wait for it: db.py ``reading``). ``_view.applied_rev`` of
the active's view is then a lower bound (the last Txn etcd had committed at the seal).

A standby applies each revision's events in one SQLite transaction (``apply``) and keeps the
revision its view reflects in ``_view.applied_rev`` (not replicated).
"""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.parse

REPLICATED = ("meta", "inodes", "groups", "units", "datanodes", "pending_deletes", "retry_cache")

# Tables of the view itself, never replicated.
VIEW_SCHEMA = """
CREATE TABLE IF NOT EXISTS _changes (tbl TEXT NOT NULL, pk TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS _view (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


class NotANamespace(RuntimeError):
    """The prefix holds keys, but not a hedgefs namespace."""


def _columns(conn: sqlite3.Connection, table: str) -> tuple[list[str], list[tuple[str, bool]]]:
    """(every column, [(primary-key column, is an integer)] in key order)."""
    info = conn.execute(f"PRAGMA table_info({table})").fetchall()
    cols = [r[1] for r in info]
    pk = sorted((r[5], r[1], "INT" in (r[2] or "").upper()) for r in info if r[5])
    return cols, [(name, is_int) for _, name, is_int in pk]


class Schema:
    """How each replicated table's rows become keys, read from the database's own schema."""

    def __init__(self, conn: sqlite3.Connection):
        self.cols: dict[str, list[str]] = {}
        self.pk: dict[str, list[tuple[str, bool]]] = {}
        for table in REPLICATED:
            self.cols[table], self.pk[table] = _columns(conn, table)

    def key(self, table: str, values) -> str:
        parts = [f"{v:016x}" if is_int else urllib.parse.quote(str(v), safe="")
                 for (_, is_int), v in zip(self.pk[table], values)]
        return f"t/{table}/" + "/".join(parts)

    def parse(self, rel: str) -> tuple[str, list]:
        _, table, rest = rel.split("/", 2)
        parts = rest.split("/")
        return table, [int(p, 16) if is_int else urllib.parse.unquote(p) for (_, is_int), p in zip(self.pk[table], parts)]

    def where(self, table: str) -> str:
        return " AND ".join(f"{name} = ?" for name, _ in self.pk[table])


def install(conn: sqlite3.Connection) -> Schema:
    """The view's own tables and the capture triggers (idempotent). Call outside a transaction."""
    conn.executescript(f"BEGIN IMMEDIATE; {VIEW_SCHEMA} COMMIT;")
    schema = Schema(conn)
    script = []
    for table in REPLICATED:
        def pk(row: str) -> str:
            return "json_array(" + ", ".join(f"{row}.{name}" for name, _ in schema.pk[table]) + ")"
        moved = " OR ".join(f"OLD.{name} IS NOT NEW.{name}" for name, _ in schema.pk[table])
        for name, event, row, when in (("insert", "INSERT", "NEW", ""), ("update", "UPDATE", "NEW", ""),
                                       ("moved", "UPDATE", "OLD", f"WHEN {moved}"), ("delete", "DELETE", "OLD", "")):
            # No key on _changes: a trigger's statement takes on the outer one's conflict clause
            # (an UPSERT's, an OR REPLACE's), so it must never conflict. collect() dedupes.
            script.append(f"CREATE TRIGGER IF NOT EXISTS _capture_{table}_{name} AFTER {event} ON {table} {when} "
                          f"BEGIN INSERT INTO _changes(tbl, pk) VALUES ('{table}', {pk(row)}); END;")
    conn.executescript("BEGIN IMMEDIATE; " + " ".join(script) + " COMMIT;")
    return schema


def applied_revision(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT value FROM _view WHERE key = 'applied_rev'").fetchone()
    return int(row[0]) if row else 0


def set_applied(conn: sqlite3.Connection, revision: int) -> None:
    conn.execute("INSERT OR REPLACE INTO _view(key, value) VALUES ('applied_rev', ?)", (str(revision),))


class Capture:
    """The active's side: the rows changed in the open transaction, as etcd puts and deletes."""

    def __init__(self, conn: sqlite3.Connection):
        self.schema = install(conn)
        self._seq = dict(conn.execute("SELECT name, seq FROM sqlite_sequence").fetchall())

    def collect(self, conn: sqlite3.Connection) -> tuple[dict[str, bytes], list[str]]:
        """(puts, deletes) for every row changed since the last call; empties the capture table.
        Call inside the transaction, before its COMMIT."""
        puts: dict[str, bytes] = {}
        deletes: list[str] = []
        for table, pk in conn.execute("SELECT DISTINCT tbl, pk FROM _changes").fetchall():
            values = json.loads(pk)
            key = self.schema.key(table, values)
            row = conn.execute(f"SELECT * FROM {table} WHERE {self.schema.where(table)}", values).fetchone()
            if row is None:
                deletes.append(key)
            else:
                puts[key] = json.dumps(dict(zip(self.schema.cols[table], tuple(row))),
                                       separators=(",", ":")).encode()
        if puts or deletes:
            conn.execute("DELETE FROM _changes")
        for name, seq in conn.execute("SELECT name, seq FROM sqlite_sequence").fetchall():
            if self._seq.get(name) != seq:
                puts[f"seq/{name}"] = str(seq).encode()
        return puts, deletes

    def sent(self, puts: dict[str, bytes]) -> None:
        """The Txn carrying ``puts`` committed: its high-water marks are etcd's now."""
        for key, value in puts.items():
            if key.startswith("seq/"):
                self._seq[key[4:]] = int(value)


def _apply_one(conn: sqlite3.Connection, schema: Schema, rel: str, value: bytes | None) -> None:
    if rel.startswith("t/"):
        table, pk = schema.parse(rel)
        if table not in schema.cols:
            return
        if value is None:
            conn.execute(f"DELETE FROM {table} WHERE {schema.where(table)}", pk)
        else:
            row = json.loads(value)
            cols = [c for c in schema.cols[table] if c in row]
            conn.execute(f"INSERT OR REPLACE INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                         [row[c] for c in cols])
    elif rel.startswith("seq/"):
        conn.execute("DELETE FROM sqlite_sequence WHERE name = ?", (rel[4:],))
        if value is not None:
            conn.execute("INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)", (rel[4:], int(value)))


def apply(conn: sqlite3.Connection, schema: Schema, revision: int, events) -> None:
    """One etcd revision's events (objects with ``rel`` and ``value``) as one SQLite transaction.
    The capture triggers are off for it (``_changes`` is emptied): these changes are etcd's."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for ev in events:
            _apply_one(conn, schema, ev.rel, ev.value)
        conn.execute("DELETE FROM _changes")
        set_applied(conn, revision)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def open_view(path: str) -> sqlite3.Connection:
    """A connection for building or following the view (no fsync: the view is rebuildable)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    return conn


def check(items: list[tuple[str, bytes]], expect_version: int) -> None:
    """NotANamespace when etcd's keys under the prefix are not a hedgefs namespace of this schema
    version (an empty prefix is fine: the first active formats it)."""
    rels = [rel for rel, _ in items if rel not in ("leader", "commit") and not rel.startswith("nn/")]
    if not rels:
        return
    version = dict(items).get("t/meta/schema_version")
    if version is None:
        raise NotANamespace(f"{len(rels)} keys under the prefix, but not a hedgefs namespace")
    found = json.loads(version).get("value")
    if str(found) != str(expect_version):
        raise NotANamespace(f"the namespace under the prefix has schema version {found}, this NameNode "
                            f"understands {expect_version}")


def reload(conn: sqlite3.Connection, schema: Schema, revision: int, items: list[tuple[str, bytes]]) -> None:
    """Replace the whole view with etcd's keys ``items`` (a snapshot at ``revision``), in one
    transaction: readers see the old view or the new one."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for table in REPLICATED:
            conn.execute(f"DELETE FROM {table}")
        conn.execute("DELETE FROM sqlite_sequence")
        for rel, value in items:
            _apply_one(conn, schema, rel, value)
        conn.execute("DELETE FROM _changes")
        set_applied(conn, revision)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def build(path: str, base_schema: str, revision: int, items: list[tuple[str, bytes]],
          expect_version: int) -> tuple[sqlite3.Connection, Schema]:
    """A fresh view file at ``path`` holding etcd's keys ``items`` (a snapshot at ``revision``).
    ``base_schema``: the NameNode's tables (db.py). NotANamespace: see ``check``."""
    check(items, expect_version)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    conn = open_view(path)
    conn.executescript(f"BEGIN IMMEDIATE; {base_schema} COMMIT;")
    schema = install(conn)
    reload(conn, schema, revision, items)
    return conn, schema
