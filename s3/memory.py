"""The gateway's memory between transfers: hand freed buffers back to the system.

A PUT or GET moves MiB-sized stripes, cells and socket buffers through many threads (the
gateway's workers, each writer's source thread, the client library's I/O thread), and glibc
gives each thread's allocations an arena of their own, which it trims only above the CLI's
trim threshold (hedgefs/malloc.py: 32 MiB, per arena). After a 1 GiB PUT of 8 parts a gateway
kept 220 MB resident, idle, which the next transfer then added to. So once TRIM_AFTER bytes
went through and no request is being answered, the gateway returns what is free
(``malloc_trim``: milliseconds, on a worker thread; elsewhere than glibc a no-op); never
while transfers run, which would hand back the buffers they are about to take again. Capping
the arenas (M_ARENA_MAX 2 or 4) was measured too: the peak of the 8-part PUT rose by 70 MB
(the writers' buffers fragment fewer, shared heaps).
"""

from __future__ import annotations

import ctypes
import threading

TRIM_AFTER = 32 << 20      # bytes moved (by one request or many) before the next idle moment trims

_lock = threading.Lock()
_libc = None


def _c():
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None)
            _libc.malloc_trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _libc = False
    return _libc


def trim() -> bool:
    """Give free heap memory back to the system (one trim at a time: one running covers the rest)."""
    libc = _c()
    if not libc or not _lock.acquire(blocking=False):
        return False
    try:
        return bool(libc.malloc_trim(0))
    finally:
        _lock.release()
