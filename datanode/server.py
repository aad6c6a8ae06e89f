"""The DataNode process: a thin sync gRPC servicer over the block store and the fault knobs.

Each RPC unpacks its request, calls ``storage``/``faults`` (which never import gRPC), and turns
their exceptions into status codes. ``serve()`` is what ``hedgefs datanode`` runs.
"""

from __future__ import annotations

import hmac
import logging
import os
import signal
import socket
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc

from hedgefs.datanode import storage
from hedgefs.datanode.faults import FIELDS, Faults, fault_env_present, parse_fault_specs
from hedgefs.datanode.heartbeat import NameNodeLink
from hedgefs.datanode.repair import RepairRunner
from hedgefs.proto import CHUNK_BYTES, GRPC_OPTIONS, MAX_MESSAGE_BYTES
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc, wire

log = logging.getLogger("hedgefs.datanode")

_PROBABILITY_FIELDS = ("probability", "error_probability", "corrupt_probability")


class DataNodeServicer(hedgefs_pb2_grpc.DataNodeServicer):
    def __init__(self, datanode_id: str, store: storage.BlockStore, faults: Faults, *,
                 token: str | None = None, on_bad_unit=None):
        self.datanode_id = datanode_id
        self.store = store
        self.faults = faults
        self.token = token
        self.on_bad_unit = on_bad_unit or (lambda group_id, index, reason: None)

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
                    return pb.WriteResult(length=writer.commit(final))
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
        faults = self.faults
        corrupt = False
        if faults.enabled:
            if faults.hold_if_stalled(guard) or guard.wait(faults.read_delay_s()):
                return
            if faults.draw_error():
                _fail(context, grpc.StatusCode.UNAVAILABLE, f"injected error on {self.datanode_id}")
                return
            corrupt = faults.draw_corrupt()
        try:
            chunks = self.store.read(g, i, request.offset, request.length, piece=CHUNK_BYTES,
                                     tamper=faults.corrupter() if corrupt else None)
        except storage.UnitNotFound as e:
            return _fail(context, grpc.StatusCode.NOT_FOUND, f"{e} on {self.datanode_id}")
        except storage.RangeError as e:
            return _fail(context, grpc.StatusCode.OUT_OF_RANGE, str(e))
        except storage.ChecksumError as e:
            return self._checksum_failed(context, e, injected=False)
        except OSError as e:
            return _fail(context, grpc.StatusCode.INTERNAL, f"cannot read unit {g}/{i}: {e}")
        try:
            for data in chunks:
                if guard.cancelled.is_set() or not context.is_active():
                    guard.cancel()
                    return
                if faults.pace(guard, len(data)):
                    return
                yield wire.read_chunk(data)
        except storage.ChecksumError as e:
            self._checksum_failed(context, e, injected=corrupt)
        except OSError as e:
            _fail(context, grpc.StatusCode.INTERNAL, f"cannot read unit {g}/{i}: {e}")
        finally:
            chunks.close()

    def _checksum_failed(self, context, e: storage.ChecksumError, *, injected: bool) -> None:
        # Injected corruption is not on disk: counted (GetFaults calls["fault:corrupt"]) but not
        # reported, or the NameNode would repair a healthy unit.
        if not injected:
            log.warning("%s on %s", e, self.datanode_id)
            self.on_bad_unit(e.group_id, e.index, str(e))
        _fail(context, grpc.StatusCode.DATA_LOSS, str(e))

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


# -------------------------------------------------------------------- the process

def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


class DataNode:
    """One DataNode: store + faults + gRPC server + NameNode link + repair worker.

    ``start()`` binds and serves and returns; ``stop()`` shuts everything down. ``serve()`` wraps
    this for the CLI; tests may run several in one process.
    """

    def __init__(self, *, datanode_id: str, port: int, data_dir: str, namenode: str,
                 host: str = "127.0.0.1", advertise_host: str | None = None,
                 enable_faults: bool = False, fault_specs: Sequence[str] = (),
                 token: str | None = None, heartbeat_interval_s: float = 3.0,
                 block_report_interval_s: float = 60.0, fsync: bool = True, max_repairs: int = 2,
                 environ: Mapping[str, str] | None = None):
        environ = os.environ if environ is None else environ
        if not datanode_id:
            raise ValueError("a DataNode needs an id (--id)")
        if fault_specs and not enable_faults:
            raise ValueError(f"--fault given but fault injection is disabled on {datanode_id} "
                             f"(add --enable-faults)")
        if enable_faults:
            initial = parse_fault_specs(fault_specs, environ)
        else:
            initial = {}
            ignored = fault_env_present(environ)
            if ignored:
                log.warning("ignoring %s: fault injection is disabled on %s", ", ".join(ignored),
                            datanode_id)
        if initial:
            log.info("faults on %s at start: %s", datanode_id,
                     ", ".join(f"{k}={v}" for k, v in initial.items()))
        if not advertise_host and host in ("0.0.0.0", "::", ""):
            # A wildcard address means nothing to a client: advertise the host name instead.
            advertise_host = socket.gethostname()
            log.warning("%s listens on %r; advertising %s (set --advertise-host to change)",
                        datanode_id, host, advertise_host)
        self.datanode_id = datanode_id
        self.host, self.port = host, port
        self.advertise_host = advertise_host or host
        self.namenode = namenode
        self.store = storage.BlockStore(data_dir, fsync=fsync)
        self.faults = Faults(datanode_id, enable_faults, initial)
        self.token = token
        self.heartbeat_interval_s = heartbeat_interval_s
        self.block_report_interval_s = block_report_interval_s
        self.max_repairs = max_repairs
        self.server: grpc.Server | None = None
        self.link: NameNodeLink | None = None
        self.repairs: RepairRunner | None = None
        self.address = ""

    def start(self) -> int:
        server = grpc.server(ThreadPoolExecutor(max_workers=64, thread_name_prefix="dn-rpc"),
                             options=GRPC_OPTIONS)
        try:
            bound = server.add_insecure_port(_hostport(self.host, self.port))
        except RuntimeError:
            bound = 0
        if not bound:
            raise OSError(f"cannot listen on {_hostport(self.host, self.port)}")
        self.port = bound
        self.address = _hostport(self.advertise_host, bound)
        self.link = NameNodeLink(namenode=self.namenode, datanode_id=self.datanode_id,
                                 address=self.address, store=self.store,
                                 heartbeat_interval_s=self.heartbeat_interval_s,
                                 block_report_interval_s=self.block_report_interval_s)
        self.repairs = RepairRunner(self.datanode_id, self.store, max_repairs=self.max_repairs,
                                    on_stored=self.link.unit_stored)
        self.link.repairs = self.repairs
        servicer = DataNodeServicer(self.datanode_id, self.store, self.faults, token=self.token,
                                    on_bad_unit=self.link.report_bad_unit)
        _add_servicer(servicer, server)
        server.start()
        self.server = server
        self.link.start()
        return bound

    def stop(self, grace: float = 2.0) -> None:
        if self.link:
            self.link.stop()
        if self.repairs:
            self.repairs.shutdown()
        if self.server:
            self.server.stop(grace).wait()
            self.server = None


def _add_servicer(servicer: "DataNodeServicer", server: grpc.Server) -> None:
    """The generated registration, except that ReadUnit and Source send bytes already framed by
    hedgefs.proto.wire (one copy of the data instead of three)."""
    unary, u_stream, stream_u = (grpc.unary_unary_rpc_method_handler, grpc.unary_stream_rpc_method_handler,
                                 grpc.stream_unary_rpc_method_handler)
    handlers = {
        "WriteUnit": stream_u(servicer.WriteUnit, pb.WriteChunk.FromString, pb.WriteResult.SerializeToString),
        "ReadUnit": u_stream(servicer.ReadUnit, pb.ReadRequest.FromString, None),
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


def serve(*, datanode_id: str, port: int, data_dir: str, namenode: str, host: str = "127.0.0.1",
          advertise_host: str | None = None, port_file: str | None = None,
          enable_faults: bool = False, fault_specs: Sequence[str] = (), token: str | None = None,
          heartbeat_interval_s: float = 3.0, block_report_interval_s: float = 60.0,
          fsync: bool = True, max_repairs: int = 2) -> None:
    """Run a DataNode until SIGTERM/SIGINT.

    Raises ValueError for a bad configuration (bad --fault spec, --fault without --enable-faults)
    and OSError when the port cannot be bound or the data directory cannot be used; both carry a
    one-line message for the CLI.
    """
    stop = threading.Event()
    node = DataNode(datanode_id=datanode_id, port=port, data_dir=data_dir, namenode=namenode,
                    host=host, advertise_host=advertise_host, enable_faults=enable_faults,
                    fault_specs=fault_specs, token=token,
                    heartbeat_interval_s=heartbeat_interval_s,
                    block_report_interval_s=block_report_interval_s, fsync=fsync,
                    max_repairs=max_repairs)
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        bound = node.start()
        if port_file:
            tmp = f"{port_file}.tmp"
            with open(tmp, "w") as f:
                f.write(f"{bound}\n")
            os.replace(tmp, port_file)
        log.info("datanode %s listening on %s (data %s, namenode %s%s)", datanode_id,
                 _hostport(host, bound), data_dir, namenode,
                 ", faults enabled" if enable_faults else "")
        while not stop.wait(1.0):
            pass
        log.info("datanode %s stopping", datanode_id)
    finally:
        node.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
