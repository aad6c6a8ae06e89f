"""The default journal engine (``--meta sqlite:///PATH``, ``namenode.db`` in the data dir): the
journal's batches and the checkpoint images in one SQLite file.

    journal_meta   format (``FORMAT``); image: the txid of the latest complete image; cluster_id:
                   the namespace's (the Format record is the truth: a copy for tools that read
                   the file, as the local-cluster launcher does)
    edits          one row per batch: (first txid, last txid, its frames: records.py)
    images         an image's CRC32C-checked chunks, by (txid, chunk number)

A batch is one INSERT and one COMMIT with ``synchronous=FULL`` (SQLite's fsync of its WAL): it is
durable when ``append`` returns, and a kill -9 at any point leaves it whole or absent (a torn WAL
tail fails SQLite's own frame checksums and is cut at the next open). An image's chunks go in a
few transactions of their own, published afterwards in one small transaction (an image a crash
interrupted is never the latest, and is cleared at the next open); the batches it covers are
deleted in another. The batches go on one connection (one caller writes at a time), the checkpointer's
images on a connection of its own; SQLite serialises their transactions.

A file of the schema-5 format (the NameNode's tables of before the journal) is converted at open
(upgrade.py), in one transaction, after a backup copy of it is made beside it.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import threading
from typing import Iterator

from hedgefs.namenode import faults

log = logging.getLogger("hedgefs.namenode")

FORMAT = "hedgefs-journal-1"
IMAGE_CHUNKS_PER_TX = 16

SCHEMA = """
CREATE TABLE IF NOT EXISTS journal_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS edits (first INTEGER PRIMARY KEY, last INTEGER NOT NULL, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS images (txid INTEGER NOT NULL, chunk INTEGER NOT NULL, data BLOB NOT NULL,
                                   PRIMARY KEY (txid, chunk)) WITHOUT ROWID;
"""


class NotAJournal(RuntimeError):
    """The file is not a NameNode's (or of a format this one does not read): one line."""


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=600)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


class SqliteEngine:
    max_record_bytes = 1 << 29   # SQLite's blobs go to 1 GB: far past any record
    def __init__(self, path: str, superuser: str = "hedgefs"):
        self.path = self.location = path
        existed = os.path.exists(path) and os.path.getsize(path) > 0
        try:
            self._conn = _connect(path)
            tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as err:
            raise NotAJournal(f"{path}: not a NameNode's database ({err})") from None
        self.upgraded = False
        if "inodes" in tables and "journal_meta" not in tables:
            self._upgrade(superuser)
            tables.add("journal_meta")
        elif existed and tables and "journal_meta" not in tables:
            raise NotAJournal(f"{path}: not a NameNode's database (tables {', '.join(sorted(tables))})")
        self._conn.executescript(f"BEGIN IMMEDIATE; {SCHEMA} COMMIT;")
        self._conn.execute("INSERT OR IGNORE INTO journal_meta(key, value) VALUES ('format', ?)", (FORMAT,))
        found = self._conn.execute("SELECT value FROM journal_meta WHERE key = 'format'").fetchone()[0]
        if found != FORMAT:
            raise NotAJournal(f"{path}: a journal of format {found!r}; this NameNode reads {FORMAT!r}")
        latest = self._published()
        self._conn.execute("DELETE FROM images WHERE txid != ?", (latest,))   # an image a crash cut short
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []

    def _upgrade(self, superuser: str) -> None:
        from hedgefs.namenode.journal import upgrade

        backup = self.path + ".schema5"
        if not os.path.exists(backup):
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            shutil.copyfile(self.path, backup + ".tmp")
            os.replace(backup + ".tmp", backup)
        chunks = upgrade.from_sqlite(self._conn, superuser)
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    c.execute(statement)
            c.execute("INSERT OR REPLACE INTO journal_meta(key, value) VALUES ('format', ?)", (FORMAT,))
            c.executemany("INSERT INTO images(txid, chunk, data) VALUES (1, ?, ?)", list(enumerate(chunks)))
            c.execute("INSERT OR REPLACE INTO journal_meta(key, value) VALUES ('image', '1')")
            for table in ("retry_cache", "pending_deletes", "units", "groups", "datanodes", "inodes", "meta"):
                c.execute(f"DROP TABLE IF EXISTS {table}")
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        self.upgraded = True
        log.warning("%s: converted from the schema-5 format (a copy of it is in %s)", self.path, backup)

    def _published(self) -> int:
        row = self._conn.execute("SELECT value FROM journal_meta WHERE key = 'image'").fetchone()
        return int(row[0]) if row else 0

    def _thread_conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = _connect(self.path)
            self._conns.append(conn)
        return conn

    # ------------------------------------------------------------------ Engine

    def image(self) -> tuple[int, Iterator[bytes]] | None:
        txid = self._published()
        if not txid:
            return None

        def chunks() -> Iterator[bytes]:
            expected = 0
            for chunk, data in self._conn.execute("SELECT chunk, data FROM images WHERE txid = ? ORDER BY chunk",
                                                  (txid,)):
                if chunk != expected:
                    raise ValueError(f"chunk {expected} is missing")
                expected += 1
                yield data
        return txid, chunks()

    def batches(self, after: int) -> Iterator[tuple[int, int, bytes]]:
        return iter(self._conn.execute("SELECT first, last, data FROM edits WHERE last > ? ORDER BY first",
                                       (after,)).fetchall())

    def append(self, first: int, last: int, data: bytes) -> None:
        c = self._conn
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("INSERT INTO edits(first, last, data) VALUES (?, ?, ?)", (first, last, data))
            faults.crash_point("journal:written")
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            raise

    def write_image(self, txid: int, chunks: Iterator[bytes]) -> None:
        c = self._thread_conn()
        c.execute("DELETE FROM images WHERE txid = ?", (txid,))
        n = 0
        batch: list[tuple[int, int, bytes]] = []
        for data in chunks:
            batch.append((txid, n, data))
            n += 1
            if len(batch) >= IMAGE_CHUNKS_PER_TX:
                self._insert_chunks(c, batch)
                batch = []
        self._insert_chunks(c, batch)

    @staticmethod
    def _insert_chunks(c: sqlite3.Connection, batch) -> None:
        if not batch:
            return
        c.execute("BEGIN IMMEDIATE")
        try:
            c.executemany("INSERT INTO images(txid, chunk, data) VALUES (?, ?, ?)", batch)
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def publish_image(self, txid: int) -> None:
        c = self._thread_conn()
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("INSERT OR REPLACE INTO journal_meta(key, value) VALUES ('image', ?)", (str(txid),))
            c.execute("DELETE FROM images WHERE txid != ?", (txid,))
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def truncate(self, txid: int) -> None:
        c = self._thread_conn()
        c.execute("DELETE FROM edits WHERE last <= ?", (txid,))

    def record_cluster(self, cluster_id: str) -> None:
        row = self._conn.execute("SELECT value FROM journal_meta WHERE key = 'cluster_id'").fetchone()
        if row is None or row[0] != cluster_id:
            self._conn.execute("INSERT OR REPLACE INTO journal_meta(key, value) VALUES ('cluster_id', ?)", (cluster_id,))

    def close(self) -> None:
        for conn in self._conns:
            conn.close()
        self._conn.close()
