"""Fault points for the crash tests, and an older NameNode for the compatibility tests.

``HEDGEFS_NAMENODE_CRASH=POINT`` (or ``POINT:N``, the N-th time
it is reached) makes this process kill -9 itself there. Read at the first fault point; unset in production.

Points: ``before:METHOD`` / ``after:METHOD`` (an RPC, before it runs / once answered but before
the reply is sent: rpc/calls.py), ``journal:written`` (a batch written, not yet committed),
``journal:committed`` (committed, its callers not yet told), ``checkpoint:written`` (an image's
chunks stored, not yet the latest), ``checkpoint:published`` (the latest image, the journal not
yet truncated), ``checkpoint:truncated``.

``HEDGEFS_NAMENODE_AS_BEFORE=commit_attributes``: this NameNode answers as one from before
CommitAttributes did (a newer client's fallback, tested against a real NameNode: an older
release cannot be run here): CreateResponse.commit_attributes false, and a Complete's
``attributes`` dropped unread, as an older NameNode's parser drops a field it does not know.
"""

from __future__ import annotations

import functools
import logging
import os
import signal

log = logging.getLogger("hedgefs.namenode")

_count = 0


@functools.cache
def _spec() -> tuple[str, str, str]:
    """(spec, point, nth), read from the environment once, at the first fault point reached rather
    than at import: a process forked from one with this module imported (the tests' fork server,
    tests/cli_support.py) reads its own environment."""
    spec = os.environ.get("HEDGEFS_NAMENODE_CRASH", "")
    point, nth = spec.rsplit(":", 1) if spec.count(":") >= 2 else (spec, "")
    return spec, point, nth


def armed() -> bool:
    return bool(_spec()[0])


def crash_point(point: str) -> None:
    """kill -9 of this process if the fault spec names ``point`` (and this is its N-th time)."""
    global _count
    spec, armed_point, nth = _spec()
    if not spec or point != armed_point:
        return
    _count += 1
    if nth and _count < int(nth):
        return
    log.critical("HEDGEFS_NAMENODE_CRASH=%s: kill -9 of this NameNode", spec)
    os.kill(os.getpid(), signal.SIGKILL)


@functools.cache
def as_before(feature: str) -> bool:
    """Does this NameNode answer as one from before ``feature`` (``HEDGEFS_NAMENODE_AS_BEFORE``)?"""
    return feature in os.environ.get("HEDGEFS_NAMENODE_AS_BEFORE", "").split(",")
