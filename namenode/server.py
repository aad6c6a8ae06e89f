"""The NameNode's gRPC face: a thin servicer over ``core.NameNode``, and ``serve``.

Each method unpacks its request, calls the NameNode and packs the answer. Our refusals become
status codes with the refusal's one-line message; anything else is INTERNAL (and logged).
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc

from hedgefs.namenode import core, model
from hedgefs.namenode.blockmap import GroupCommit
from hedgefs.namenode.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NameNodeError, NotFound
from hedgefs.namenode.http import MetricsServer
from hedgefs.namenode.monitor import Monitor
from hedgefs.namenode.namespace import Entry
from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2 as pb, hedgefs_pb2_grpc

log = logging.getLogger("hedgefs.namenode")

_CODES = {
    NotFound: grpc.StatusCode.NOT_FOUND,
    AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
}


def _status(err: NameNodeError) -> grpc.StatusCode:
    for cls in type(err).__mro__:
        if cls in _CODES:
            return _CODES[cls]
    return grpc.StatusCode.FAILED_PRECONDITION


def _rpc(method):
    @functools.wraps(method)
    def wrapper(self, request, context):
        try:
            return method(self, request)
        except NameNodeError as err:
            context.abort(_status(err), str(err))
        except Exception as err:
            log.exception("%s failed", method.__name__)
            context.abort(grpc.StatusCode.INTERNAL, f"namenode: internal error in {method.__name__}: "
                          f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}")
    return wrapper


def _entry(e: Entry) -> pb.FileInfo:
    return pb.FileInfo(path=e.path, is_dir=e.is_dir, length=e.length, policy=e.policy,
                       block_size=e.block_size, mtime_ms=e.mtime_ms)


def _unit(u: model.UnitLocation) -> pb.Unit:
    return pb.Unit(index=u.index, datanode_id=u.datanode_id, address=u.address)


def _group(g: model.GroupInfo) -> pb.BlockGroup:
    return pb.BlockGroup(id=g.id, length=g.length, units=[_unit(u) for u in g.units])


def _command(c: model.DeleteUnit | model.RepairUnit) -> pb.Command:
    if isinstance(c, model.DeleteUnit):
        return pb.Command(delete_unit=pb.DeleteUnitCommand(group_id=c.group_id, index=c.index))
    return pb.Command(repair_unit=pb.RepairUnitCommand(
        group_id=c.group_id, index=c.index, policy=c.policy, group_length=c.group_length,
        sources=[_unit(u) for u in c.sources]))


class NameNodeServicer(hedgefs_pb2_grpc.NameNodeServicer):
    def __init__(self, namenode: core.NameNode):
        self.nn = namenode

    # namespace
    @_rpc
    def Mkdir(self, request):
        self.nn.mkdir(request.path, request.parents)
        return pb.Empty()

    @_rpc
    def GetFileInfo(self, request):
        info = self.nn.file_info(request.path)
        out = _entry(info.entry)
        out.groups.extend(_group(g) for g in info.groups)
        return out

    @_rpc
    def List(self, request):
        return pb.ListResponse(entries=[_entry(e) for e in self.nn.list(request.path, request.recursive)])

    @_rpc
    def Delete(self, request):
        self.nn.delete(request.path, request.recursive)
        return pb.Empty()

    @_rpc
    def Rename(self, request):
        self.nn.rename(request.src, request.dst)
        return pb.Empty()

    @_rpc
    def SetPolicy(self, request):
        self.nn.set_policy(request.path, request.policy)
        return pb.Empty()

    @_rpc
    def GetPolicy(self, request):
        policy, source = self.nn.get_policy(request.path)
        return pb.PolicyResponse(policy=policy, source_path=source)

    # write path
    @_rpc
    def Create(self, request):
        c = self.nn.create(request.path, request.overwrite, request.policy, request.block_size,
                           request.client_name)
        return pb.CreateResponse(file_id=c.file_id, policy=c.policy, block_size=c.block_size)

    @_rpc
    def AddBlockGroup(self, request):
        return _group(self.nn.add_block_group(request.file_id, list(request.exclude_datanodes)))

    @_rpc
    def Complete(self, request):
        self.nn.complete(request.file_id, request.length,
                         [GroupCommit(g.group_id, g.length, tuple(g.stored_units)) for g in request.groups])
        return pb.Empty()

    @_rpc
    def Abandon(self, request):
        self.nn.abandon(request.file_id)
        return pb.Empty()

    # health
    @_rpc
    def ReportBadUnits(self, request):
        self.nn.report_bad_units((u.group_id, u.index, u.datanode_id, u.reason) for u in request.units)
        return pb.Empty()

    @_rpc
    def Fsck(self, request):
        r = self.nn.fsck(request.path or "/")
        return pb.FsckResponse(
            files=r.files, groups=r.groups, healthy=r.healthy, degraded=r.degraded, missing=r.missing,
            status=r.status, corrupt_files=r.corrupt_files,
            problems=[pb.FsckProblem(path=p.path, group_id=p.group_id, live_units=p.live_units,
                                     needed_units=p.needed_units, status=p.status) for p in r.problems])

    @_rpc
    def Report(self, request):
        r = self.nn.report()
        return pb.ReportResponse(
            groups_waiting_repair=r.groups_waiting_repair, repairs_done=r.repairs_done,
            datanodes=[pb.DataNodeInfo(id=d.id, address=d.address, state=d.state,
                                       last_heartbeat_age_ms=d.last_heartbeat_age_ms, used_bytes=d.used_bytes,
                                       units=d.units, pending_repairs=d.pending_repairs,
                                       pending_deletes=d.pending_deletes) for d in r.datanodes])

    # DataNode protocol
    @_rpc
    def RegisterDataNode(self, request):
        self.nn.register(request.datanode_id, request.address)
        return pb.Empty()

    @_rpc
    def Heartbeat(self, request):
        reply = self.nn.heartbeat(request.datanode_id, request.address, request.used_bytes, request.units,
                                  request.active_repairs)
        return pb.HeartbeatResponse(commands=[_command(c) for c in reply.commands], reregister=reply.reregister)

    @_rpc
    def BlockReport(self, request):
        self.nn.block_report(request.datanode_id, [(u.group_id, u.index) for u in request.units])
        return pb.Empty()

    @_rpc
    def UnitStored(self, request):
        self.nn.unit_stored(request.datanode_id, request.unit.group_id, request.unit.index)
        return pb.Empty()


def _lock_data_dir(data_dir: str):
    """One NameNode per data dir: two writers of one SQLite namespace would not end well."""
    handle = open(os.path.join(data_dir, "namenode.lock"), "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise RuntimeError(f"another NameNode is using {data_dir}") from None
    return handle


def _write_port_file(port_file: str, port: int) -> None:
    tmp = f"{port_file}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f"{port}\n")
    os.replace(tmp, port_file)


def serve(*, port: int, data_dir: str, host: str = "127.0.0.1", port_file: str | None = None,
          dead_interval_s: float = 30.0, default_block_size: int = 128 * 1024 * 1024,
          default_policy: str = "RS-6-3-1024k", repair_interval_s: float = 1.0,
          lease_timeout_s: float = 600.0, http_port: int | None = None) -> None:
    """Run a NameNode until SIGTERM or SIGINT (signals are handled only from the main thread).

    Raises RuntimeError / ValueError with a one-line message if it cannot start (port taken,
    data dir in use by another NameNode, bad default policy).
    """
    os.makedirs(data_dir, exist_ok=True)
    dir_lock = _lock_data_dir(data_dir)
    namenode = server = monitor = metrics = None
    previous: dict = {}
    try:
        namenode = core.NameNode(data_dir, default_policy=default_policy, default_block_size=default_block_size,
                                 dead_interval_s=dead_interval_s, lease_timeout_s=lease_timeout_s)
        # SO_REUSEPORT (gRPC's default on Linux) would let a second NameNode share the port silently.
        server = grpc.server(ThreadPoolExecutor(max_workers=32, thread_name_prefix="namenode-rpc"),
                             options=[*GRPC_OPTIONS, ("grpc.so_reuseport", 0)])
        hedgefs_pb2_grpc.add_NameNodeServicer_to_server(NameNodeServicer(namenode), server)
        bind_host = f"[{host}]" if ":" in host else host
        try:
            bound = server.add_insecure_port(f"{bind_host}:{port}")
        except RuntimeError:
            bound = 0
        if bound == 0:
            raise RuntimeError(f"namenode: cannot listen on {bind_host}:{port} (address in use?)")

        stop = threading.Event()
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda signum, frame: stop.set())
        server.start()
        monitor = Monitor(namenode, repair_interval_s)
        monitor.start()
        if port_file:
            _write_port_file(port_file, bound)
        log.info("namenode listening on %s:%d", bind_host, bound)
        if http_port is not None:
            try:
                metrics = MetricsServer(namenode, host, http_port)
            except OSError as err:
                raise RuntimeError(f"namenode: cannot serve metrics on {bind_host}:{http_port} ({err.strerror})") from None
            log.info("namenode metrics on http://%s:%d/metrics", bind_host, metrics.start())
        while not stop.wait(1.0):
            pass
        log.info("namenode stopping")
    finally:
        if metrics is not None:
            metrics.stop()
        if server is not None:
            server.stop(grace=2.0).wait()
        if monitor is not None:
            monitor.stop()
        if namenode is not None:
            namenode.close()
        dir_lock.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
