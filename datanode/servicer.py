"""The DataNode's gRPC face: the fault knobs (set, clear, show), a thin sync servicer.

Unit reads and writes do not come here: they use the data port (``data_server.py``). Every
method here needs an admin's credential in a secure cluster (``AUTHORIZATION``, enforced by
security/rpc.py for every call), and fault injection enabled (``--enable-faults``).
"""

from __future__ import annotations

import logging

import grpc

from hedgefs.datanode.faults import FIELDS, Faults
from hedgefs.proto import hedgefs_pb2_grpc
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.security import rpc as authz

AUTHORIZATION: dict[str, authz.Rule] = {
    "SetFaults": authz.admin(),
    "ClearFaults": authz.admin(),
    "GetFaults": authz.admin(),
}

log = logging.getLogger("hedgefs.datanode")

_PROBABILITY_FIELDS = ("probability", "error_probability", "corrupt_probability", "wire_corrupt_probability")


class DataNodeServicer(hedgefs_pb2_grpc.DataNodeServicer):
    def __init__(self, datanode_id: str, faults: Faults):
        self.datanode_id = datanode_id
        self.faults = faults

    # ---------------------------------------------------------------- fault admin

    def _admit(self, request, context, method: str) -> None:
        self.faults.count(method)
        if not self.faults.enabled:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                          f"fault injection is disabled on {self.datanode_id} "
                          f"(start it with --enable-faults)")

    def SetFaults(self, request, context):
        self._admit(request, context, "SetFaults")
        fields = {f: getattr(request, f) for f in FIELDS if request.HasField(f)}
        for f in _PROBABILITY_FIELDS:
            if f in fields and not 0.0 <= fields[f] <= 1.0:
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{f} must be between 0 and 1")
        self.faults.set(**fields)
        log.info("faults on %s set: %s", self.datanode_id,
                 ", ".join(f"{k}={v}" for k, v in fields.items()) or "nothing")
        return self._state()

    def ClearFaults(self, request, context):
        self._admit(request, context, "ClearFaults")
        self.faults.clear()
        log.info("faults on %s cleared", self.datanode_id)
        return self._state()

    def GetFaults(self, request, context):
        self._admit(request, context, "GetFaults")
        return self._state()

    def _state(self) -> pb.FaultState:
        return pb.FaultState(**self.faults.state())


def add_to_server(servicer: "DataNodeServicer", server: grpc.Server) -> None:
    hedgefs_pb2_grpc.add_DataNodeServicer_to_server(servicer, server)


def authorizer(secure: bool) -> authz.Authorizer:
    """The interceptor that enforces ``AUTHORIZATION`` on this service."""
    return authz.Authorizer("DataNode", AUTHORIZATION, secure=secure)
