"""HDFS's retry cache: a retried non-idempotent call gets the first call's answer.

A client sends ``hedgefs-client-id`` and ``hedgefs-call-id`` with each non-idempotent call
(the same ids on every retry of it). The servicer hands them to the namesystem method it calls
(``calling``); the locked wrapper (locking.py) looks them up under the writers' lock and, after a
first call that succeeded, keeps its answer in ``retry_cache`` in the same batch as the change
itself (the lock is held from the change to the entry, so one COMMIT, and on etcd one Txn, holds
both). So a Create retried after its reply was lost, or after a failover, finds its entry and
returns the same file id: never two files, never "exists". Refusals are not kept (a retry runs
again). Entries expire after ``TTL_MS`` (10 minutes, HDFS's default); the monitor drops them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading

from hedgefs.namenode.model import Created, GroupInfo, UnitLocation

TTL_MS = 600_000
MAX_ID = 128        # characters of a client or call id

_local = threading.local()
MISS = object()


@contextlib.contextmanager
def calling(client_id: str, call_id: str, method: str):
    """The next locked namesystem method this thread calls is the RPC ``method`` with these ids."""
    ids = (client_id[:MAX_ID], call_id[:MAX_ID], method) if client_id and call_id else None
    _local.ids = ids
    try:
        yield
    finally:
        _local.ids = None


def take():
    """The ids handed over by ``calling`` (once: nested methods see none)."""
    ids = getattr(_local, "ids", None)
    _local.ids = None
    return ids


def _encode(result) -> str:
    if result is None:
        return json.dumps({"type": "none"})
    if isinstance(result, Created):
        return json.dumps({"type": "created", **dataclasses.asdict(result)})
    if isinstance(result, GroupInfo):
        return json.dumps({"type": "group", "id": result.id, "length": result.length, "generation": result.generation,
                           "units": [{**dataclasses.asdict(u), "token": u.token.hex()} for u in result.units]})
    raise TypeError(f"no retry-cache encoding for {type(result).__name__}")


def _decode(text: str):
    value = json.loads(text)
    kind = value.pop("type")
    if kind == "none":
        return None
    if kind == "created":
        return Created(**value)
    return GroupInfo(value["id"], value["length"],
                     [UnitLocation(**{**u, "token": bytes.fromhex(u["token"])}) for u in value["units"]],
                     value["generation"])


def lookup(db, ids, now_ms: int):
    """The kept answer of the call ``ids``, or MISS. Under the writers' lock: sees a first call
    applied but not yet committed (its caller then waits for that commit, as the first does)."""
    row = db.conn.execute("SELECT method, result FROM retry_cache WHERE client_id = ? AND call_id = ? "
                          "AND expires_ms > ?", (ids[0], ids[1], now_ms)).fetchone()
    if row is None or row[0] != ids[2]:
        return MISS
    return _decode(row[1])


def remember(db, ids, result, now_ms: int) -> None:
    with db.tx() as c:
        c.execute("INSERT OR REPLACE INTO retry_cache(client_id, call_id, method, result, expires_ms) "
                  "VALUES (?, ?, ?, ?, ?)", (ids[0], ids[1], ids[2], _encode(result), now_ms + TTL_MS))


def expire(db, now_ms: int, limit: int) -> int:
    """Drop expired entries, the oldest ``limit`` of them; returns how many (the caller holds the
    lock, inside a change)."""
    return db.conn.execute("DELETE FROM retry_cache WHERE (client_id, call_id) IN (SELECT client_id, call_id FROM "
                           "retry_cache WHERE expires_ms <= ? ORDER BY expires_ms LIMIT ?)",
                           (now_ms, limit)).rowcount
