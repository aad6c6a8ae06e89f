"""The DataNode's gRPC face: the fault knobs (set, clear, show) and bit rot on demand, a thin sync
servicer.

Unit reads and writes do not come here: they use the data port (``data_server.py``). Every
method here needs an admin's credential in a secure cluster (``AUTHORIZATION``, enforced by
security/rpc.py for every call), and fault injection enabled (``--enable-faults``).
"""

from __future__ import annotations

import logging

import grpc

from hedgefs.datanode import rot
from hedgefs.datanode.faults import FIELDS, Faults
from hedgefs.datanode.storage import BlockStore
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc
from hedgefs.security import rpc as authz

AUTHORIZATION: dict[str, authz.Rule] = {
    "SetFaults": authz.admin(),
    "ClearFaults": authz.admin(),
    "GetFaults": authz.admin(),
    "Rot": authz.admin(),
}

log = logging.getLogger("hedgefs.datanode")

_PROBABILITY_FIELDS = ("probability", "error_probability", "corrupt_probability", "wire_corrupt_probability")


class DataNodeServicer(hedgefs_pb2_grpc.DataNodeServicer):
    def __init__(self, datanode_id: str, faults: Faults, store: BlockStore):
        self.datanode_id = datanode_id
        self.faults = faults
        self.store = store

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

    def Rot(self, request, context):
        self._admit(request, context, "Rot")
        rotted = rot.rot(self.store, request.units, request.seed) if request.units else []
        if rotted:
            log.warning("faults on %s: rotted %s", self.datanode_id,
                        ", ".join(f"{r.group_id}/{r.index}@{r.offset}" for r in rotted))
        check = [rot.Rotted(c.group_id, c.index, c.generation, c.offset, c.copy) for c in request.check]
        return pb.RotResponse(rotted=[_unit(r) for r in rotted],
                              still_rotten=[_unit(r) for r in rot.still_stored(self.store, check)])

    def _state(self) -> pb.FaultState:
        return pb.FaultState(**self.faults.state())


def _unit(r: rot.Rotted) -> pb.RottedUnit:
    return pb.RottedUnit(group_id=r.group_id, index=r.index, generation=r.generation, offset=r.offset, copy=r.copy)


def add_to_server(servicer: "DataNodeServicer", server: grpc.Server) -> None:
    hedgefs_pb2_grpc.add_DataNodeServicer_to_server(servicer, server)


def authorizer(secure: bool) -> authz.Authorizer:
    """The interceptor that enforces ``AUTHORIZATION`` on this service."""
    return authz.Authorizer("DataNode", AUTHORIZATION, secure=secure)
