"""The DataNode's gRPC face: a thin sync servicer over a store (the fault knobs wrap it).

Each RPC unpacks its request, asks the store (``storage``, wrapped by ``faults.FaultyStore``;
neither imports gRPC) and turns their exceptions into status codes. The data RPCs send bytes
framed by hand (``proto/wire.py``): one copy of the data instead of three.
"""

from __future__ import annotations

import hmac
import logging

import grpc

from hedgefs.datanode import storage
from hedgefs.datanode.faults import FIELDS, FaultyStore, InjectedCorruption, InjectedError, ReadCancelled
from hedgefs.proto import CHUNK_BYTES, MAX_MESSAGE_BYTES, hedgefs_pb2_grpc, wire
from hedgefs.proto import hedgefs_pb2 as pb

log = logging.getLogger("hedgefs.datanode")

_PROBABILITY_FIELDS = ("probability", "error_probability", "corrupt_probability")


class DataNodeServicer(hedgefs_pb2_grpc.DataNodeServicer):
    def __init__(self, datanode_id: str, store: FaultyStore, *, token: str | None = None, on_bad_unit=None,
                 on_stored=None):
        self.datanode_id = datanode_id
        self.store = store
        self.faults = store.faults
        self.token = token
        self.on_bad_unit = on_bad_unit or (lambda group_id, index, reason: None)
        # The receipt: the NameNode counts a unit only once its DataNode says it is stored.
        self.on_stored = on_stored or (lambda group_id, index, length: None)

    # ---------------------------------------------------------------- data

    def WriteUnit(self, request_iterator, context):
        self.faults.count("WriteUnit")
        first = next(request_iterator, None)
        if first is None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "empty WriteUnit stream")
        g, i = first.group_id, first.index
        # The proto puts expected_length on the first message; a client that only knows it at
        # the end may send it with finalize instead (0 on the first message = not given yet).
        declared = first.expected_length or None
        try:
            writer = self.store.open_writer(g, i, declared)
        except OSError as e:
            context.abort(_os_error_code(e), f"cannot store unit {g}/{i}: {e.strerror or e}")
        try:
            msg = first
            while True:
                if msg.data:
                    writer.write(msg.data)
                if msg.finalize:
                    final = msg.expected_length or declared or 0
                    length = writer.commit(final)
                    self.on_stored(g, i, length)
                    return pb.WriteResult(length=length)
                msg = next(request_iterator, None)
                if msg is None:
                    break
        except storage.LengthMismatch as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
        except OSError as e:
            context.abort(_os_error_code(e), f"cannot store unit {g}/{i}: {e.strerror or e}")
        finally:
            writer.abort()   # no-op after a commit
        context.abort(grpc.StatusCode.ABORTED, f"write of unit {g}/{i} ended without finalize")

    def ReadUnit(self, request, context):
        self.faults.count("ReadUnit")
        guard = self.faults.guard()
        if not context.add_callback(guard.cancel):
            guard.cancel()
        ended = False   # the read finished on its own: data sent or an error status set
        try:
            yield from self._read(request, context, guard)
            ended = not guard.cancelled.is_set()
        finally:
            if not ended and not context.is_active():
                guard.cancel()
            guard.finish()

    def _read(self, request, context, guard):
        g, i = request.group_id, request.index
        try:
            for data in self.store.read(g, i, request.offset, request.length, piece=CHUNK_BYTES, guard=guard):
                if guard.cancelled.is_set() or not context.is_active():
                    guard.cancel()
                    return
                yield wire.read_chunk(data)
        except ReadCancelled:
            return
        except InjectedError as e:
            _fail(context, grpc.StatusCode.UNAVAILABLE, str(e))
        except storage.UnitNotFound as e:
            _fail(context, grpc.StatusCode.NOT_FOUND, f"{e} on {self.datanode_id}")
        except storage.RangeError as e:
            _fail(context, grpc.StatusCode.OUT_OF_RANGE, str(e))
        except InjectedCorruption as e:
            _fail(context, grpc.StatusCode.DATA_LOSS, str(e))   # counted (calls["fault:corrupt"]), not reported
        except storage.ChecksumError as e:
            log.warning("%s on %s", e, self.datanode_id)
            self.on_bad_unit(e.group_id, e.index, str(e))
            _fail(context, grpc.StatusCode.DATA_LOSS, str(e))
        except OSError as e:
            _fail(context, grpc.StatusCode.INTERNAL, f"cannot read unit {g}/{i}: {e}")

    def GetChunkChecksums(self, request, context):
        self.faults.count("GetChunkChecksums")
        g, i = request.group_id, request.index
        try:
            length, chunk, crcs = self.store.chunk_checksums(g, i)
        except storage.UnitNotFound as e:
            context.abort(grpc.StatusCode.NOT_FOUND, f"{e} on {self.datanode_id}")
        except storage.ChecksumError as e:
            self.on_bad_unit(e.group_id, e.index, "damaged checksum sidecar")
            context.abort(grpc.StatusCode.DATA_LOSS, f"{e} on {self.datanode_id}")
        except OSError as e:
            context.abort(grpc.StatusCode.INTERNAL, f"cannot read the checksums of unit {g}/{i}: {e}")
        return pb.ChunkChecksums(length=length, chunk_size=chunk, crcs=crcs)

    # ---------------------------------------------------------------- transport probes

    def Sink(self, request_iterator, context):
        self.faults.count("Sink")
        total = 0
        for msg in request_iterator:
            total += len(msg.data)
        return pb.WriteResult(length=total)

    def Source(self, request, context):
        self.faults.count("Source")
        size = min(request.chunk_bytes or CHUNK_BYTES, MAX_MESSAGE_BYTES - 1024)
        left = request.total_bytes
        full = wire.read_chunk(bytes(size))   # one preallocated message, sent again and again
        while left > 0 and context.is_active():
            if left >= size:
                yield full
                left -= size
            else:
                yield wire.read_chunk(bytes(left))
                left = 0

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


def _fail(context, code: grpc.StatusCode, details: str) -> None:
    # In a streaming handler a status set here is sent when the generator returns.
    context.set_code(code)
    context.set_details(details)


def _os_error_code(e: OSError) -> grpc.StatusCode:
    import errno
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return grpc.StatusCode.RESOURCE_EXHAUSTED
    return grpc.StatusCode.INTERNAL


def add_to_server(servicer: "DataNodeServicer", server: grpc.Server) -> None:
    """The generated registration, except that ReadUnit and Source send bytes already framed by
    hedgefs.proto.wire (one copy of the data instead of three)."""
    unary, u_stream, stream_u = (grpc.unary_unary_rpc_method_handler, grpc.unary_stream_rpc_method_handler,
                                 grpc.stream_unary_rpc_method_handler)
    handlers = {
        "WriteUnit": stream_u(servicer.WriteUnit, pb.WriteChunk.FromString, pb.WriteResult.SerializeToString),
        "ReadUnit": u_stream(servicer.ReadUnit, pb.ReadRequest.FromString, None),
        "GetChunkChecksums": unary(servicer.GetChunkChecksums, pb.ChunkChecksumsRequest.FromString,
                                   pb.ChunkChecksums.SerializeToString),
        "SetFaults": unary(servicer.SetFaults, pb.FaultConfig.FromString, pb.FaultState.SerializeToString),
        "ClearFaults": unary(servicer.ClearFaults, pb.FaultClearRequest.FromString, pb.FaultState.SerializeToString),
        "GetFaults": unary(servicer.GetFaults, pb.FaultClearRequest.FromString, pb.FaultState.SerializeToString),
        "Sink": stream_u(servicer.Sink, pb.ReadChunk.FromString, pb.WriteResult.SerializeToString),
        "Source": u_stream(servicer.Source, pb.SourceRequest.FromString, None),
    }
    service = pb.DESCRIPTOR.services_by_name["DataNode"]
    missing = {m.name for m in service.methods} - set(handlers)
    assert not missing, f"DataNode methods without a handler: {missing}"
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service.full_name, handlers),))
