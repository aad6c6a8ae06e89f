"""The authorization of every RPC: one table per service, enforced by one interceptor.

Each service lists every one of its methods with the caller it requires (``Rule``):

    USER       any user or admin credential (namespace calls: file permissions decide the rest)
    DATANODE   a DataNode's credential, speaking for itself: ``speaks_for(request)`` names the
               DataNode ids a request acts for, and each must be the caller's own
    ADMIN      an admin credential

A method the table does not list is refused in either mode (fails closed): a new RPC must be
classified before it can be called, and a test checks that every method of the proto services
is. In a secure cluster the caller is who its TLS certificate says (gRPC verified it against the
cluster CA); in an insecure one everyone is the superuser, as before, and only the table's
completeness is enforced. The servicer asks ``caller()`` who is calling.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import logging
from collections import OrderedDict
from typing import Callable, Iterable

import grpc
from cryptography import x509

from hedgefs.security.material import ADMIN, DATANODE, SUPERUSER, USER, Identity, identity_of

log = logging.getLogger("hedgefs.security")


@dataclasses.dataclass(frozen=True)
class Rule:
    role: str                                                    # USER, DATANODE or ADMIN
    speaks_for: Callable[[object], Iterable[str]] | None = None  # DATANODE: ids the request acts for


def user() -> Rule:
    return Rule(USER)


def admin() -> Rule:
    return Rule(ADMIN)


def datanode(speaks_for: Callable[[object], Iterable[str]]) -> Rule:
    return Rule(DATANODE, speaks_for)


INSECURE_CALLER = Identity(SUPERUSER, ADMIN)
_caller: contextvars.ContextVar[Identity] = contextvars.ContextVar("hedgefs_caller", default=INSECURE_CALLER)


def caller() -> Identity:
    """Who is calling the RPC being served (the superuser in an insecure cluster)."""
    return _caller.get()


class _Certificates:
    """Identities of certificates seen, parsed once (a client's certificate comes with every call)."""

    def __init__(self, size: int = 1024):
        self._cache: OrderedDict[bytes, Identity] = OrderedDict()
        self._size = size

    def identity(self, pem: bytes) -> Identity:
        found = self._cache.get(pem)
        if found is None:
            found = identity_of(x509.load_pem_x509_certificate(pem))
            self._cache[pem] = found
            if len(self._cache) > self._size:
                self._cache.popitem(last=False)
        return found


class Authorizer(grpc.ServerInterceptor):
    """Checks every call of ``service`` against ``table`` before its handler runs."""

    def __init__(self, service: str, table: dict[str, Rule], *, secure: bool):
        self.prefix = f"/hedgefs.{service}/"
        self.table = table
        self.secure = secure
        self._certs = _Certificates()
        self._guarded: dict[str, grpc.RpcMethodHandler] = {}   # method -> its guarded handler

    def intercept_service(self, continuation, handler_call_details):
        # Built once per method (it is the only interceptor: the handler behind a method never
        # changes), not per call: building it cost more than a guarded call.
        method = handler_call_details.method
        guarded = self._guarded.get(method)
        if guarded is not None:
            return guarded
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        name = method[len(self.prefix):] if method.startswith(self.prefix) else method
        if handler.unary_unary is None:     # every hedgefs RPC is unary; anything else is not served
            return None
        guarded = handler._replace(unary_unary=self._guard(handler.unary_unary, name, self.table.get(name)))
        self._guarded[method] = guarded
        return guarded

    def _guard(self, behaviour, name: str, rule: Rule | None):
        @functools.wraps(behaviour)
        def guarded(request, context):
            if rule is None:
                context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{name} is not an RPC anyone may call "
                                                                 f"(it has no authorization rule)")
            identity = self._identity(context) if self.secure else INSECURE_CALLER
            if identity is None:
                context.abort(grpc.StatusCode.UNAUTHENTICATED, f"{name} needs a credential of this cluster")
            refusal = self._refusal(name, rule, identity, request)
            if refusal:
                log.warning("refused %s to %s: %s", name, identity, refusal)
                context.abort(grpc.StatusCode.PERMISSION_DENIED, refusal)
            token = _caller.set(identity)
            try:
                return behaviour(request, context)
            finally:
                _caller.reset(token)
        return guarded

    def _identity(self, context) -> Identity | None:
        pems = context.auth_context().get("x509_pem_cert")
        if not pems:
            return None
        return self._certs.identity(pems[0])

    def _refusal(self, name: str, rule: Rule, identity: Identity, request) -> str | None:
        if not self.secure:
            return None
        if rule.role == ADMIN and identity.role != ADMIN:
            return f"{name} needs an admin credential; {identity} is not an admin"
        if rule.role == USER and identity.role not in (USER, ADMIN):
            return f"{name} needs a user credential, not a {identity.role}'s"
        if rule.role == DATANODE:
            if identity.role != DATANODE:
                return f"{name} is for DataNodes; {identity} is not one"
            others = sorted({d for d in rule.speaks_for(request) if d != identity.name})
            if others:
                return f"DataNode {identity.name} may not speak for {', '.join(repr(d) for d in others)} ({name})"
        return None


def unclassified(service_descriptor, table: dict[str, Rule]) -> list[str]:
    """Methods of a proto service that ``table`` does not classify (a test asserts none)."""
    return sorted(m.name for m in service_descriptor.methods if m.name not in table)
