"""How every NameNode RPC is served (the ``_rpc`` wrapper of servicer.py's methods): the call's
facts read once from its metadata (``Call``: the client's retry ids for a non-idempotent call, the
highest revision it saw), refusals turned into status codes with their one-line message (anything
else INTERNAL, logged), an HA reply's revision, a call to a NameNode that is not (or no longer)
the active sent on to the active; the crash tests' fault points; one metric per call."""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass

import grpc

from hedgefs.namenode import faults, metrics
from hedgefs.namenode.blocks.safe_mode import SafeModeRefusal
from hedgefs.namenode.errors import (
    AlreadyExists,
    FailedPrecondition,
    InvalidArgument,
    NameNodeError,
    NotFound,
    PermissionDenied,
)
from hedgefs.namenode.ha.roles import NotActive
from hedgefs.namenode.journal.journal import StoreFailed
from hedgefs.namenode.namespace import retry_cache

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
# client sends back the highest it saw, and a standby answers only once it has applied it.
REVISION_KEY = "hedgefs-rev"

# Non-idempotent calls: with the client's ids, a retry gets the first answer (retry_cache.py).
RETRIED = {"Mkdir", "Delete", "Rename", "SetPolicy", "SetPermission", "SetOwner", "Create", "AddBlockGroup",
           "Complete", "Concat", "Abandon"}

# The observer reads a standby answers: only they wait for the client's revision (the rest are
# redirected to the active at once, and a worker is not held for them).
OBSERVER_READS = {"GetFileInfo", "List", "GetPolicy", "GetXAttrs", "StatMany"}


@dataclass(frozen=True)
class Call:
    """What one call says besides its request: its method, the client's retry ids (a
    non-idempotent call with them: the same on every retry), the highest revision it saw."""

    method: str
    retry: tuple[str, str] | None
    seen: int
    client_id: str = ""

    def retries(self, call_ids) -> list | None:
        """A batched call's per-item retry ids (its call_ids, with the client id of its metadata);
        None when it sent none."""
        if not self.client_id or not call_ids:
            return None
        return [retry_cache.ids(self.client_id, c) if c else None for c in call_ids]


def _call(method: str, context) -> Call:
    client_id = call_id = ""
    seen = 0
    for key, value in context.invocation_metadata() or ():
        if key == "hedgefs-client-id":
            client_id = value
        elif key == "hedgefs-call-id":
            call_id = value
        elif key == REVISION_KEY:
            try:
                seen = int(value)
            except ValueError:
                seen = 0
    return Call(method, retry_cache.ids(client_id, call_id) if method in RETRIED else None, seen, client_id)


def _not_active(context, err: NotActive) -> None:
    context.set_trailing_metadata((("hedgefs-active", err.active),))
    context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(err))


def _rpc(method):
    name = method.__name__

    @functools.wraps(method)
    def wrapper(self, request, context):
        start, code = time.perf_counter(), "OK"
        try:
            call = _call(name, context)
            if faults.armed():
                faults.crash_point(f"before:{name}")
            reply = method(self, request, call)
            if faults.armed():
                faults.crash_point(f"after:{name}")
            revision = self.role.revision()
            if revision:
                context.set_trailing_metadata(((REVISION_KEY, str(revision)),))
            return reply
        except NotActive as err:   # HA: the client follows hedgefs-active to the active
            code = grpc.StatusCode.FAILED_PRECONDITION.name
            _not_active(context, err)
        except StoreFailed as err:   # fail-stop: this NameNode commits nothing more (a retry goes elsewhere)
            if self.role.switching():   # HA: demoted mid-call; the client tries the active
                code = grpc.StatusCode.FAILED_PRECONDITION.name
                _not_active(context, NotActive(self.role.active_address()))
            code = grpc.StatusCode.UNAVAILABLE.name
            context.abort(grpc.StatusCode.UNAVAILABLE, str(err))
        except NameNodeError as err:
            code = _status(err).name
            if isinstance(err, SafeModeRefusal):   # the client retries a start-up one for a while
                context.set_trailing_metadata(((SAFE_MODE_KEY, "retry" if err.retriable else "wait"),))
            context.abort(_status(err), str(err))
        except Exception as err:
            code = "INTERNAL"
            log.exception("%s failed", name)
            context.abort(grpc.StatusCode.INTERNAL, f"namenode: internal error in {name}: "
                          f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
        finally:
            metrics.rpc_done(name, code, time.perf_counter() - start)
    return wrapper
