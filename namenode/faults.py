"""Fault points for the crash tests: ``HEDGEFS_NAMENODE_CRASH=POINT`` (or ``POINT:N``, the N-th time
it is reached) makes this process kill -9 itself there. Read at start; unset in production.

Points: ``before:METHOD`` / ``after:METHOD`` (an RPC, before it runs / once answered but before
the reply is sent: rpc/calls.py), ``journal:written`` (a batch written, not yet committed),
``journal:committed`` (committed, its callers not yet told), ``checkpoint:written`` (an image's
chunks stored, not yet the latest), ``checkpoint:published`` (the latest image, the journal not
yet truncated), ``checkpoint:truncated``.
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger("hedgefs.namenode")

_SPEC = os.environ.get("HEDGEFS_NAMENODE_CRASH", "")
_POINT, _NTH = _SPEC.rsplit(":", 1) if _SPEC.count(":") >= 2 else (_SPEC, "")
_count = 0


def armed() -> bool:
    return bool(_SPEC)


def crash_point(point: str) -> None:
    """kill -9 of this process if the fault spec names ``point`` (and this is its N-th time)."""
    global _count
    if not _SPEC or point != _POINT:
        return
    _count += 1
    if _NTH and _count < int(_NTH):
        return
    log.critical("HEDGEFS_NAMENODE_CRASH=%s: kill -9 of this NameNode", _SPEC)
    os.kill(os.getpid(), signal.SIGKILL)
