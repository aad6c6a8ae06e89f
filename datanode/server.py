"""The DataNode process: store, fault knobs, gRPC server, NameNode link and repair worker.

``DataNode.start()`` binds and serves and returns; ``stop()`` shuts everything down.
``serve()`` is what ``hedgefs datanode`` runs; tests may run several DataNodes in one process.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc

from hedgefs.datanode import storage
from hedgefs.datanode.faults import Faults, FaultyStore, fault_env_present, parse_fault_specs
from hedgefs.datanode.heartbeat import NameNodeLink
from hedgefs.datanode.repair_worker import RepairRunner
from hedgefs.datanode.servicer import DataNodeServicer, add_to_server
from hedgefs.plumbing import hostport, serve_until, stop_on_signal, write_port_file
from hedgefs.proto import GRPC_OPTIONS

log = logging.getLogger("hedgefs.datanode")


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
        # Opening the store takes the data dir's lock (DataDirInUse if another DataNode has it)
        # and recovers from a crash mid-commit. HEDGEFS_DEBUG_CRASH_AT is a test knob.
        self.store = storage.BlockStore(data_dir, fsync=fsync, crash_at=environ.get("HEDGEFS_DEBUG_CRASH_AT"))
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
            bound = server.add_insecure_port(hostport(self.host, self.port))
        except RuntimeError:
            bound = 0
        if not bound:
            raise OSError(f"cannot listen on {hostport(self.host, self.port)}")
        self.port = bound
        self.address = hostport(self.advertise_host, bound)
        self.link = NameNodeLink(namenode=self.namenode, datanode_id=self.datanode_id,
                                 address=self.address, store=self.store,
                                 heartbeat_interval_s=self.heartbeat_interval_s,
                                 block_report_interval_s=self.block_report_interval_s)
        self.repairs = RepairRunner(self.datanode_id, self.store, max_repairs=self.max_repairs,
                                    on_stored=self.link.unit_stored)
        self.link.repairs = self.repairs
        servicer = DataNodeServicer(self.datanode_id, FaultyStore(self.store, self.faults), token=self.token,
                                    on_bad_unit=self.link.report_bad_unit)
        add_to_server(servicer, server)
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
        self.store.close()


def serve(*, datanode_id: str, port: int, data_dir: str, namenode: str, host: str = "127.0.0.1",
          advertise_host: str | None = None, port_file: str | None = None,
          enable_faults: bool = False, fault_specs: Sequence[str] = (), token: str | None = None,
          heartbeat_interval_s: float = 3.0, block_report_interval_s: float = 60.0,
          fsync: bool = True, max_repairs: int = 2) -> None:
    """Run a DataNode until SIGTERM/SIGINT.

    Raises ValueError for a bad configuration (bad --fault spec, --fault without --enable-faults),
    storage.DataDirInUse when another DataNode has the data dir, and OSError when the port cannot
    be bound or the data directory cannot be used; all carry a one-line message for the CLI.
    """
    node = DataNode(datanode_id=datanode_id, port=port, data_dir=data_dir, namenode=namenode,
                    host=host, advertise_host=advertise_host, enable_faults=enable_faults,
                    fault_specs=fault_specs, token=token,
                    heartbeat_interval_s=heartbeat_interval_s,
                    block_report_interval_s=block_report_interval_s, fsync=fsync,
                    max_repairs=max_repairs)
    with stop_on_signal() as stop:
        try:
            bound = node.start()
            if port_file:
                write_port_file(port_file, bound)
            log.info("datanode %s listening on %s (data %s, namenode %s%s)", datanode_id,
                     hostport(host, bound), data_dir, namenode,
                     ", faults enabled" if enable_faults else "")
            serve_until(stop)
            log.info("datanode %s stopping", datanode_id)
        finally:
            node.stop()
