"""HDFS's retry cache: a retried non-idempotent call gets the first call's answer.

A client sends ``hedgefs-client-id`` and ``hedgefs-call-id`` with each non-idempotent call (the
same ids on every retry of it). The record of the change the call made carries them
(journal/records.py: ``retry``), and applying it remembers the answer here, so a Create retried
after its reply was lost, after a restart or after a failover finds it and returns the same file
id: never two files, never "exists". Refusals are not kept (a retry runs again). Entries expire
``TTL_MS`` after they were made (10 minutes, HDFS's default); at most ``MAX_ENTRIES`` are kept
(the oldest go first), about 150 bytes each.

The answer kept is what the record says, small: a Create's (file id, policy, block size), an
AddBlockGroup's (group id, targets); the namesystem builds the reply from it (fresh tokens).
"""

from __future__ import annotations

from typing import Iterator

TTL_MS = 600_000
MAX_ENTRIES = 1_000_000
MAX_ID = 128        # characters of a client or call id

MISS = object()


class RetryCache:
    def __init__(self, ttl_ms: int = TTL_MS, max_entries: int = MAX_ENTRIES):
        self.ttl_ms, self.max_entries = ttl_ms, max_entries
        self._entries: dict[tuple[str, str], tuple[int, object, int]] = {}   # in the order made

    def lookup(self, retry: tuple[str, str], op: int, now_ms: int):
        """The kept answer of the call ``retry`` (an op of code ``op``), or MISS."""
        found = self._entries.get(retry)
        if found is None or found[0] != op or found[2] <= now_ms:
            return MISS
        return found[1]

    def remember(self, retry: tuple[str, str], op: int, answer, now_ms: int) -> None:
        entries = self._entries
        entries.pop(retry, None)
        entries[retry] = (op, answer, now_ms + self.ttl_ms)
        if len(entries) > self.max_entries:
            del entries[next(iter(entries))]

    def restore(self, retry: tuple[str, str], op: int, answer, expires_ms: int) -> None:
        """An entry from a checkpoint image."""
        self._entries[retry] = (op, answer, expires_ms)

    def expire(self, now_ms: int, limit: int = 100_000) -> int:
        """Drop up to ``limit`` expired entries, the oldest first; how many."""
        entries, gone = self._entries, 0
        while entries and gone < limit:
            key = next(iter(entries))
            if entries[key][2] > now_ms:
                break
            del entries[key]
            gone += 1
        return gone

    def items(self) -> Iterator[tuple[tuple[str, str], tuple[int, object, int]]]:
        return iter(list(self._entries.items()))

    def copy(self) -> dict:
        return dict(self._entries)

    def __len__(self) -> int:
        return len(self._entries)


def ids(client_id: str, call_id: str) -> tuple[str, str] | None:
    """The retry ids of a call (None: the client sent none)."""
    return (client_id[:MAX_ID], call_id[:MAX_ID]) if client_id and call_id else None


def step(retry: tuple[str, str] | None, name: str) -> tuple[str, str] | None:
    """The retry ids of a further record of one call (a fused create's group or completion, a
    sync's reopen and group): the call's, with ``/name`` after its call id."""
    return None if retry is None else (retry[0], f"{retry[1]}/{name}")
