"""The DataNode process: store, fault knobs, gRPC server, data server, NameNode link, repair worker, scrubber,
/metrics.

``DataNode.start()`` binds and serves and returns; ``stop()`` shuts everything down.
``serve()`` is what ``hedgefs datanode`` runs; tests may run several DataNodes in one process.

Given a credential (a secure cluster: a DataNode's, for this id, holding the cluster key) every
port speaks mutual TLS with it, fault RPCs need an admin, the data port checks block tokens and
repairs read their sources over TLS with the tokens their commands carry. A data dir that joined
another cluster, or a NameNode that refuses this DataNode, stops it (``Refused``: exit 4).
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import os
import shutil
import socket
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor

import grpc

from hedgefs import httpserver
from hedgefs.datanode import storage
from hedgefs.datanode.data_server import DataServer
from hedgefs.datanode.faults import FaultConfig, Faults, FaultyStore, fault_env_present, parse_fault_specs
from hedgefs.datanode.epochs import BadEpochFile, EpochGuard
from hedgefs.datanode.heartbeat import NameNodeLink
from hedgefs.datanode.metrics import DataNodeMetrics, MeasuredStore
from hedgefs.datanode.repair_worker import RepairRunner
from hedgefs.datanode.scrubber import DEFAULT_BANDWIDTH_BPS, DEFAULT_INTERVAL_S, Scrubber
from hedgefs.datanode.servicer import DataNodeServicer, add_to_server, authorizer
from hedgefs.plumbing import hostport, serve_until, stop_on_signal, warn_if_open, write_port_file
from hedgefs.proto import GRPC_OPTIONS
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.security import tls
from hedgefs.security.identity import DATANODE, Credential, Refused
from hedgefs.security.tokens import BlockTokens
from hedgefs.topology import DEFAULT_RACK, parse_host_id, parse_rack

log = logging.getLogger("hedgefs.datanode")


class DataNode:
    """One DataNode: store + faults + gRPC server (control) + data server + NameNode link + repair worker.

    ``start()`` binds and serves and returns; ``stop()`` shuts everything down. ``serve()`` wraps
    this for the CLI; tests may run several in one process.
    """

    def __init__(self, *, datanode_id: str, port: int, data_dir: str, namenode: "str | Sequence[str]",
                 host: str = "127.0.0.1", advertise_host: str | None = None,
                 enable_faults: bool = False, fault_specs: Sequence[str] = (),
                 credential: Credential | None = None, heartbeat_interval_s: float = 3.0,
                 block_report_interval_s: float = 60.0, fsync: bool = True, max_repairs: int = 2,
                 http_port: int | None = None, scrub_interval_s: float = DEFAULT_INTERVAL_S,
                 scrub_bandwidth_bps: int = DEFAULT_BANDWIDTH_BPS, data_port: int = 0, max_streams: int = 64,
                 write_idle_s: float = 30.0, rack: str = DEFAULT_RACK, host_id: str | None = None,
                 environ: Mapping[str, str] | None = None):
        environ = os.environ if environ is None else environ
        if not datanode_id:
            raise ValueError("a DataNode needs an id (--id)")
        if credential is not None:
            if credential.identity.role != DATANODE or credential.cluster_key is None:
                raise Refused(f"{credential.path} is not a DataNode's credential ({credential.identity})")
            if credential.identity.name != datanode_id:
                raise Refused(f"the credential {credential.path} is DataNode {credential.identity.name}'s, "
                              f"not {datanode_id}'s")
        else:
            warn_if_open(f"datanode {datanode_id}", host)
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
        # Where it runs, told to the NameNode at registration (placement: distinct hosts, at most m
        # units of a group per rack). Its host is the host it is reached at unless said otherwise.
        self.rack = parse_rack(rack)
        self.host_id = parse_host_id(host_id) if host_id else self.advertise_host
        # Every NameNode of the cluster (HA: several, "nn1:8020,nn2:8020"): each gets a link of its own.
        self.namenodes = [a.strip() for a in namenode.split(",")] if isinstance(namenode, str) else list(namenode)
        if not self.namenodes or not all(self.namenodes):
            raise ValueError(f"bad --namenode {namenode!r}: expected HOST:PORT[,HOST:PORT...]")
        self.namenode = ",".join(self.namenodes)
        # Opening the store takes the data dir's lock (DataDirInUse if another DataNode has it)
        # and recovers from a crash mid-commit. HEDGEFS_DEBUG_CRASH_AT is a test knob.
        self.store = storage.BlockStore(data_dir, fsync=fsync, crash_at=environ.get("HEDGEFS_DEBUG_CRASH_AT"))
        joined = self.store.cluster_id
        if credential is not None and joined and joined != credential.cluster_id:
            self.store.close()
            raise Refused(f"data dir {data_dir} belongs to cluster {joined}; the credential is of cluster "
                          f"{credential.cluster_id}")
        self.credential = credential
        self.on_fatal = lambda why: None   # serve() stops the process on a refusal
        self.faults = Faults(datanode_id, enable_faults, initial)
        self.metrics = DataNodeMetrics(datanode_id)
        try:   # whose commands it obeys: the active of the highest epoch seen (kept in the data dir)
            self.epochs = EpochGuard(self.store.root, on_refused=self.metrics.commands_refused_by)
        except (BadEpochFile, OSError) as err:
            self.store.close()
            raise ValueError(str(err)) from None
        self.metrics.add_state(self._state_gauges)
        # What the data server reads and writes through: timed and counted, faults applied (a read
        # is timed until the data server calls its plan's done(): sendfile happens in between).
        self.data_store = MeasuredStore(FaultyStore(self.store, self.faults), self.metrics)
        self.http_port = http_port
        self.http: httpserver.HttpServer | None = None
        self.heartbeat_interval_s = heartbeat_interval_s
        self.block_report_interval_s = block_report_interval_s
        self.max_repairs = max_repairs
        self.scrubber = Scrubber(self.store, interval_s=scrub_interval_s, bandwidth_bps=scrub_bandwidth_bps)
        self.data_port, self.max_streams, self.write_idle_s = data_port, max_streams, write_idle_s
        self.server: grpc.Server | None = None
        self.data_server: DataServer | None = None
        self.links: list[NameNodeLink] = []
        self.repairs: RepairRunner | None = None
        self.address = ""
        self.data_address = ""

    def start(self) -> int:
        cred = self.credential
        if self.http_port is not None:
            self.http = httpserver.open_server(self.host, self.http_port, self._http, self.datanode_id,
                                               tls=tls.server_context(cred, client_cert="optional") if cred else None)
            self.http_port = self.http.port
        # No SO_REUSEPORT (gRPC's default, as the NameNode's): a port another server holds is a
        # refusal to start, not a port shared with it behind the kernel's back (a chaos run's
        # restarted DataNode got some of its control connections answered by another cluster's).
        server = grpc.server(ThreadPoolExecutor(max_workers=64, thread_name_prefix="dn-rpc"),
                             options=[*GRPC_OPTIONS, ("grpc.so_reuseport", 0)],
                             interceptors=[authorizer(secure=cred is not None)])
        try:
            if cred is None:
                bound = server.add_insecure_port(hostport(self.host, self.port))
            else:
                bound = server.add_secure_port(hostport(self.host, self.port), tls.grpc_server_credentials(cred))
        except RuntimeError:
            bound = 0
        if not bound:
            raise OSError(f"cannot listen on {hostport(self.host, self.port)}")
        self.port = bound
        self.address = hostport(self.advertise_host, bound)
        data_server = DataServer(self.datanode_id, self.data_store, self.store, host=self.host, port=self.data_port,
                                 max_streams=self.max_streams, write_idle_s=self.write_idle_s,
                                 tls=tls.server_context(cred) if cred else None,
                                 tokens=BlockTokens(cred.cluster_key) if cred else None)
        try:
            self.data_port = data_server.start()
        except OSError:
            server.stop(None)
            raise
        self.data_server = data_server
        self.data_address = hostport(self.advertise_host, self.data_port)
        self.links = [NameNodeLink(namenode=nn, datanode_id=self.datanode_id,
                                   address=self.address, data_address=self.data_address, store=self.store,
                                   host_id=self.host_id, rack=self.rack,
                                   heartbeat_interval_s=self.heartbeat_interval_s,
                                   block_report_interval_s=self.block_report_interval_s,
                                   stats=self._stats, credential=cred, on_fatal=lambda why: self.on_fatal(why),
                                   epochs=self.epochs, on_deleted=self.unit_deleted)
                      for nn in self.namenodes]
        self.repairs = RepairRunner(self.datanode_id, self.store, max_repairs=self.max_repairs,
                                    on_stored=self.unit_stored, credential=cred)
        for link in self.links:
            link.repairs = self.repairs
        self.scrubber.on_bad = self.report_bad_unit
        # The data server sends each stored unit's receipt (unit_stored): the NameNodes count a
        # unit only once its DataNode says it is stored.
        data_server.on_bad_unit = self.report_bad_unit
        data_server.on_stored = self.unit_stored
        add_to_server(DataNodeServicer(self.datanode_id, self.faults, self.store), server)
        server.start()
        self.server = server
        for link in self.links:
            link.start()
        self.scrubber.start()
        if self.http:
            self.http.start()
        return bound

    @property
    def link(self) -> NameNodeLink | None:
        """The first NameNode's link (the only one without HA)."""
        return self.links[0] if self.links else None

    def unit_stored(self, group_id: int, index: int, generation: int, length: int) -> None:
        """A unit's receipt, to every NameNode (asynchronously)."""
        for link in self.links:
            link.unit_stored(group_id, index, generation, length)

    def unit_deleted(self, group_id: int, index: int, generation: int) -> None:
        """A unit deleted at one NameNode's command, to every NameNode (each link's next
        heartbeat): a standby that heard the unit's receipt drops its location then, not at its
        next full report."""
        for link in self.links:
            link.unit_deleted(group_id, index, generation)

    def report_bad_unit(self, group_id: int, index: int, generation: int, reason: str) -> None:
        """A damaged unit, to every NameNode (asynchronously)."""
        for link in self.links:
            link.report_bad_unit(group_id, index, generation, reason)

    # ---------------------------------------------------------------- what it says about itself

    def faults_in_effect(self) -> dict[str, str]:
        config, default = dataclasses.asdict(self.faults.config()), dataclasses.asdict(FaultConfig())
        if config["read_delay_ms"] == 0:   # probability and jitter only shape a delay
            config["probability"], config["jitter_ms"] = default["probability"], default["jitter_ms"]
        return {k: str(v).lower() for k, v in config.items() if v != default[k]}

    def _stats(self) -> pb.DataNodeStats:
        reads, p50, p99 = self.metrics.windows.recent()
        disk = shutil.disk_usage(self.store.root)
        return pb.DataNodeStats(
            capacity_bytes=disk.total, remaining_bytes=disk.free, filesystem=f"{os.stat(self.store.root).st_dev:x}",
            http_port=self.http_port or 0,
            recent_reads=pb.ReadLatency(reads=reads, p50_ms=p50 * 1000, p99_ms=p99 * 1000),
            read_minutes=[pb.ReadLatency(minute=m, reads=n, p50_ms=a * 1000, p99_ms=b * 1000)
                          for m, n, a, b in self.metrics.windows.minutes()],
            faults=self.faults_in_effect(),
            scrub=pb.ScrubStatus(**self.scrubber.status()))

    def _state_gauges(self) -> dict:
        # Every knob, 0 unless in effect: probability and jitter shape a delay only, so a healthy
        # DataNode shows none (an alert on hedgefs_datanode_fault > 0 fires for real faults only).
        config = dataclasses.asdict(self.faults.config())
        in_effect = set(self.faults_in_effect()) | ({"probability", "jitter_ms"} if config["read_delay_ms"] else set())
        config = {k: (v if k in in_effect else 0) for k, v in config.items()}
        repairs = self.repairs
        # Used bytes, units and capacity are the NameNode's to export (from heartbeats), once.
        return {
            "repairs_active": repairs.active() if repairs else 0,
            "repairs_done": repairs.done if repairs else 0,
            "repairs_failed": repairs.failed if repairs else 0,
            "namenode_reachable": int(any(link.reachable for link in self.links)),
            "namenode_epoch": self.epochs.highest,
            "fault": {k: float(v) for k, v in config.items()},
            **self._scrub_gauges(),
        }

    def _scrub_gauges(self) -> dict:
        s = self.scrubber.status()
        return {"scrub_enabled": float(s["enabled"]), "scrub_passes": s["passes"],
                "scrub_pass_units": s["pass_units"], "scrub_pass_units_done": s["pass_units_done"],
                "scrub_bytes_verified": s["bytes_verified"], "scrub_bad_units": s["bad_units"],
                "scrub_last_pass_seconds": s["last_pass_s"]}

    def _http(self, request: httpserver.Request) -> httpserver.Response:
        if request.path == "/metrics":
            return httpserver.metrics(self.metrics.registry)
        if request.path == "/health":
            lines = "".join(f"namenode {link.namenode} {'reachable' if link.reachable else 'unreachable'}\n"
                            for link in self.links)
            return httpserver.text(200, f"ok\nhost {self.host_id} rack {self.rack}\n{lines}")
        return httpserver.text(404, f"not found: {request.path} (try /metrics or /health)\n")

    def stop(self, grace: float = 2.0) -> None:
        self.scrubber.stop()
        for link in self.links:
            link.stop()
        if self.repairs:
            self.repairs.shutdown()
        if self.data_server:
            self.data_server.stop()
            self.data_server = None
        if self.server:
            self.server.stop(grace).wait()
            self.server = None
        if self.http:
            self.http.stop()
            self.http = None
        self.store.close()


def serve(*, datanode_id: str, port: int, data_dir: str, namenode: "str | Sequence[str]", host: str = "127.0.0.1",
          advertise_host: str | None = None, port_file: str | None = None,
          enable_faults: bool = False, fault_specs: Sequence[str] = (), credential: Credential | None = None,
          heartbeat_interval_s: float = 3.0, block_report_interval_s: float = 60.0,
          fsync: bool = True, max_repairs: int = 2, http_port: int | None = None,
          scrub_interval_s: float = DEFAULT_INTERVAL_S, scrub_bandwidth_bps: int = DEFAULT_BANDWIDTH_BPS,
          data_port: int = 0, max_streams: int = 64, write_idle_s: float = 30.0, rack: str = DEFAULT_RACK,
          host_id: str | None = None) -> None:
    """Run a DataNode until SIGTERM/SIGINT.

    Raises ValueError for a bad configuration (bad --fault spec, --fault without --enable-faults),
    storage.DataDirInUse when another DataNode has the data dir, OSError when the port cannot
    be bound or the data directory cannot be used, and Refused when it may not serve (another
    cluster's data dir or NameNode, someone else's credential, refused by the NameNode); all
    carry a one-line message for the CLI.
    """
    node = DataNode(datanode_id=datanode_id, port=port, data_dir=data_dir, namenode=namenode,
                    host=host, advertise_host=advertise_host, enable_faults=enable_faults,
                    fault_specs=fault_specs, credential=credential,
                    heartbeat_interval_s=heartbeat_interval_s,
                    block_report_interval_s=block_report_interval_s, fsync=fsync,
                    max_repairs=max_repairs, http_port=http_port, scrub_interval_s=scrub_interval_s,
                    scrub_bandwidth_bps=scrub_bandwidth_bps, data_port=data_port, max_streams=max_streams,
                    write_idle_s=write_idle_s, rack=rack, host_id=host_id)
    with stop_on_signal() as stop:
        refused: list[str] = []

        def on_fatal(why: str) -> None:
            refused.append(why)
            stop.set()

        node.on_fatal = on_fatal
        try:
            bound = node.start()
            # The start-up heap (gRPC, protobuf, the unit index: ~10^5 objects) into the permanent
            # generation: CPython's full collections otherwise walk it all with the GIL held; every
            # DataNode of a cluster just written ran one of 50-130 ms within the same 5 s, each
            # stalling every read it served (bench/results/2026-12-02-datanode-gc.md). This one
            # collection runs before the port file is written, but after start() has registered
            # with the NameNode, so a client may already be sent here during it (49-186 ms, once).
            gc.collect()
            gc.freeze()
            if port_file:
                write_port_file(port_file, bound, data=node.data_port,
                                **({"http": node.http_port} if node.http else {}))
            log.info("datanode %s listening on %s, data port %d (data %s, namenode %s%s%s)", datanode_id,
                     hostport(host, bound), node.data_port, data_dir, namenode,
                     ", faults enabled" if enable_faults else "", ", secure" if credential else "")
            if node.http:
                log.info("datanode %s metrics on %smetrics", datanode_id, node.http.url)
            serve_until(stop)
            log.info("datanode %s stopping", datanode_id)
        finally:
            node.stop()
        if refused:
            raise Refused(refused[0])
