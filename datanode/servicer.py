"""The DataNode's gRPC face: the fault knobs (set, clear, show), a thin sync servicer.

Unit reads and writes do not come here: they use the data port (``data_server.py``).
"""

from __future__ import annotations

import hmac
import logging

import grpc

from hedgefs.datanode.faults import FIELDS, Faults
from hedgefs.proto import hedgefs_pb2_grpc
from hedgefs.proto import hedgefs_pb2 as pb

log = logging.getLogger("hedgefs.datanode")

_PROBABILITY_FIELDS = ("probability", "error_probability", "corrupt_probability", "wire_corrupt_probability")


class DataNodeServicer(hedgefs_pb2_grpc.DataNodeServicer):
    def __init__(self, datanode_id: str, faults: Faults, *, token: str | None = None):
        self.datanode_id = datanode_id
        self.faults = faults
        self.token = token

    # ---------------------------------------------------------------- fault admin

    def _admit(self, request, context, method: str) -> None:
        self.faults.count(method)
        if not self.faults.enabled:
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          f"fault injection is disabled on {self.datanode_id} "
                          f"(start it with --enable-faults)")
        if self.token and not hmac.compare_digest(request.token.encode(), self.token.encode()):
            context.abort(grpc.StatusCode.PERMISSION_DENIED,
                          f"bad or missing cluster token for fault injection on {self.datanode_id}")

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
