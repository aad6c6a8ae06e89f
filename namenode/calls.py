"""How every NameNode RPC is served (the ``_rpc`` wrapper of servicer.py's methods): refusals
become status codes with their one-line message, and anything else INTERNAL (logged); a
non-idempotent call runs under the retry cache with the client's ids; an HA reply carries the
revision it reflects, and a call to a NameNode that is not (or no longer) the active is sent on
to the active; the failover tests' crash hooks; one metric per call."""

from __future__ import annotations

import functools
import logging
import os
import signal
import sqlite3
import threading
import time

import grpc

from hedgefs.namenode import metrics, retry_cache
from hedgefs.namenode.db import StoreFailed
from hedgefs.namenode.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NameNodeError,
    NotFound,
    PermissionDenied,
)
from hedgefs.namenode.ha import NotActive, Single
from hedgefs.namenode.safe_mode import SafeModeRefusal

log = logging.getLogger("hedgefs.namenode")

SAFE_MODE_KEY = "hedgefs-safe-mode"   # trailing metadata of a safe-mode refusal: "retry" (start-up) or "wait"

_CODES = {
    NotFound: grpc.StatusCode.NOT_FOUND,
    AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    PermissionDenied: grpc.StatusCode.PERMISSION_DENIED,
}


def _status(err: NameNodeError) -> grpc.StatusCode:
    for cls in type(err).__mro__:
        if cls in _CODES:
            return _CODES[cls]
    return grpc.StatusCode.FAILED_PRECONDITION


# Read your writes across NameNodes: replies carry the etcd revision they reflect at least; a
# client sends back the highest it saw, and a standby answers only once its view has it.
REVISION_KEY = "hedgefs-rev"

# Non-idempotent calls: with the client's ids, a retry gets the first answer (retry_cache.py).
RETRIED = {"Mkdir", "Delete", "Rename", "SetPolicy", "SetPermission", "SetOwner", "Create", "AddBlockGroup",
           "Complete", "Concat", "Abandon"}

# The observer reads a standby answers from its view: only they wait for the client's revision
# (the rest are redirected to the active at once, and a worker is not held for them).
OBSERVER_READS = {"GetFileInfo", "List", "GetPolicy"}

# The call this worker thread serves: its method, the client's revision, the namesystems it took.
_call = threading.local()


# Fault injection for the failover tests: HEDGEFS_NAMENODE_CRASH=before:Create (or after:Create)
# makes this process kill -9 itself on its first such call, before running it or after it is
# committed but before the reply is sent. Read at start; unset in production.
_CRASH = os.environ.get("HEDGEFS_NAMENODE_CRASH", "")


def _crash_at(when: str, method: str) -> None:
    if _CRASH == f"{when}:{method}":
        log.critical("HEDGEFS_NAMENODE_CRASH=%s: kill -9 of this NameNode", _CRASH)
        os.kill(os.getpid(), signal.SIGKILL)


def _ids(context) -> tuple[str, str]:
    md = dict(context.invocation_metadata() or ())
    return md.get("hedgefs-client-id", ""), md.get("hedgefs-call-id", "")


def _seen(context) -> int:
    """The highest etcd revision the client saw (``hedgefs-rev``; 0 when none or not a number)."""
    for key, value in context.invocation_metadata() or ():
        if key == REVISION_KEY:
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def _not_active(context, err: NotActive) -> None:
    context.set_trailing_metadata((("hedgefs-active", err.active),))
    context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(err))


def _switched_under(role, used: list, err: Exception) -> bool:
    """A call that took an HA role's namesystem just before the role switched (a demotion when
    etcd failed, a promotion) finds its database closed: not an internal error, a NotActive. Only
    then: the role is switching, or a namesystem the call took is no longer the role's. Any other
    ProgrammingError is a bug, answered INTERNAL with its traceback logged."""
    if not isinstance(err, sqlite3.ProgrammingError) or isinstance(role, Single):
        return False
    return role.role not in ("active", "standby") or any(nn is not role.namesystem for nn in used)


def _rpc(method):
    @functools.wraps(method)
    def wrapper(self, request, context):
        start, code = time.perf_counter(), "OK"
        try:
            _call.method, _call.seen, _call.used = method.__name__, _seen(context), []
            if _CRASH:
                _crash_at("before", method.__name__)
            if method.__name__ in RETRIED:
                with retry_cache.calling(*_ids(context), method.__name__):
                    reply = method(self, request)
            else:
                reply = method(self, request)
            if _CRASH:
                _crash_at("after", method.__name__)
            revision = self.role.revision()
            if revision:
                context.set_trailing_metadata(((REVISION_KEY, str(revision)),))
            return reply
        except NotActive as err:   # HA: the client follows hedgefs-active to the active
            code = grpc.StatusCode.FAILED_PRECONDITION.name
            _not_active(context, err)
        except StoreFailed as err:   # fail-stop: this NameNode commits nothing more (a retry goes elsewhere)
            code = grpc.StatusCode.UNAVAILABLE.name
            context.abort(grpc.StatusCode.UNAVAILABLE, str(err))
        except NameNodeError as err:
            code = _status(err).name
            if isinstance(err, SafeModeRefusal):   # the client retries a start-up one for a while
                context.set_trailing_metadata(((SAFE_MODE_KEY, "retry" if err.retriable else "wait"),))
            context.abort(_status(err), str(err))
        except Exception as err:
            if _switched_under(self.role, getattr(_call, "used", []), err):   # HA: demoted or promoted mid-call
                code = grpc.StatusCode.FAILED_PRECONDITION.name
                log.info("%s: the role switched under the call (%s); the caller tries the active", method.__name__, err)
                _not_active(context, NotActive(self.role.active_address()))
            code = "INTERNAL"
            log.exception("%s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"namenode: internal error in {method.__name__}: "
                          f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
        finally:
            metrics.rpc_done(method.__name__, code, time.perf_counter() - start)
    return wrapper
