"""The DataNode's side of the DataNode protocol: register, block reports, heartbeats, commands.

One ``NameNodeLink`` per NameNode (an HA cluster has several: the DataNode reports to each, so
standbys keep warm block maps, as HDFS's BPOfferService), each with its own background thread::

    RegisterDataNode -> BlockReport -> Heartbeat every heartbeat_interval_s
                                       (full BlockReport every block_report_interval_s;
                                        reregister=true in a reply starts over)

Commands in heartbeat replies are executed here: deletes at once, repairs handed to the
RepairRunner, but only those the ``EpochGuard`` admits (epochs.py: the active of the highest
epoch seen; every reply's epoch goes to it, registrations' too). An unreachable NameNode is
logged once per outage (and again if the failure changes: a NameNode answering with an error is
not a NameNode down), and retried forever. A NameNode that does not know this DataNode
(FAILED_PRECONDITION: a restarted one knows nobody until they register) is registered with again.

The cluster: the DataNode sends the cluster id its data dir joined (none yet: it records the
NameNode's at its first registration); a NameNode of another cluster, or one that refuses this
DataNode (another cluster, a credential that is not this DataNode's, TLS that fails both ways)
is fatal: ``on_fatal(why)`` and the loop ends (the DataNode exits 4). Being refused is not an
outage: retrying would only be refused again.
Deletes done at a NameNode's command are told in the next heartbeat (``deleted``) to every
NameNode, not only to the one that ordered them (``on_deleted``: the DataNode hands each delete to
every link): the one that ordered it can place a unit of that group here again without waiting for
the next full report, and a standby drops a location that is gone (a receipt it had heard, in
flight while the active ordered the delete) instead of keeping it until the next full report.
The heartbeat tells them under its own link's ``sending`` (reports.py): a receipt in flight to
this NameNode is answered before it hears of the delete.
Receipts for units just stored and bad-unit reports (checksum mismatches seen by reads and the
scrubber) go out on their own thread, bounded and retried (``reports.Reports``), so neither a
write nor a read ever waits for the NameNode.
"""

from __future__ import annotations

import logging
import threading
import time

import grpc

from hedgefs.datanode.epochs import EpochGuard
from hedgefs.datanode.reports import Reports
from hedgefs.plumbing import describe
from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2_grpc
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.security import tls
from hedgefs.security.identity import NAMENODE_NAME, Credential, Refused

log = logging.getLogger("hedgefs.datanode")

BLOCK_REPORT_PART = 100_000   # units per BlockReport message (~23 bytes each; the limit is 4 MiB)


class NameNodeLink:
    def __init__(self, *, namenode: str, datanode_id: str, address: str, store, data_address: str = "",
                 heartbeat_interval_s: float = 3.0, block_report_interval_s: float = 60.0,
                 rpc_timeout_s: float = 10.0, repairs=None, stats=None, credential: Credential | None = None,
                 on_fatal=None, epochs: EpochGuard | None = None, host_id: str = "", rack: str = "",
                 on_deleted=None):
        self.namenode = namenode
        self.datanode_id = datanode_id
        self.address = address
        self.data_address = data_address
        self.host_id, self.rack = host_id, rack   # where it runs: sent at registration
        self.store = store
        self.repairs = repairs            # a RepairRunner (set before start)
        self.stats = stats                # () -> pb.DataNodeStats: what the DataNode measured
        self.heartbeat_interval_s = heartbeat_interval_s
        self.block_report_interval_s = block_report_interval_s
        self.rpc_timeout_s = rpc_timeout_s
        self.credential = credential
        self.on_fatal = on_fatal or (lambda why: None)   # (why): refused for good; the DataNode exits
        # (group, index, generation) deleted at this NameNode's command: to tell every link (the
        # DataNode's); by default this link only
        self.on_deleted = on_deleted or self.unit_deleted
        self.fatal: str | None = None
        self.epochs = epochs or EpochGuard(store.root)   # shared by the links of one DataNode
        self._channel = tls.channel(namenode, credential, NAMENODE_NAME, GRPC_OPTIONS)
        self._stub = hedgefs_pb2_grpc.NameNodeStub(self._channel)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.reports = Reports(send_stored=self._send_stored, send_bad=self._send_bad,
                               has_unit=lambda g, i, gen: store.has(g, i, generation=gen),
                               want_block_report=self.request_block_report)
        self._registered = False
        self._outage: str | None = None   # how the outage under way failed, as logged (a status code)
        self.reachable = False            # did the last heartbeat get through?
        self._next_block_report = 0.0

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"dn-heartbeat-{self.namenode}", daemon=True)
        self._thread.start()
        self.reports.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=self.rpc_timeout_s + 1)
        self.reports.stop()
        self._channel.close()

    # ---------------------------------------------------------------- the loop

    def _run(self) -> None:
        hurry = False
        while not self._stop.is_set():
            again = False
            try:
                again = self.beat()
            except Refused as e:
                self._refused(str(e))
                return
            except grpc.RpcError as e:
                refusal = self._refusal(e)
                if refusal:
                    self._refused(refusal)
                    return
                if self._unknown_here(e):
                    again = True
                else:
                    self._unreachable(e)
            except Exception:   # a bug must not silence the DataNode for good
                log.exception("heartbeat to namenode %s failed", self.namenode)
            # Asked to register again: do it at once, but never twice in a row without a pause.
            hurry = again and not hurry
            if not hurry:
                self._stop.wait(self.heartbeat_interval_s)

    def beat(self) -> bool:
        """One round: (re)register and report if needed, heartbeat, run the commands.

        Returns True when the NameNode asked this DataNode to register again.
        """
        if not self._registered:
            joined = self.store.cluster_id
            reply = self._stub.RegisterDataNode(
                pb.RegisterRequest(datanode_id=self.datanode_id, address=self.address,
                                   data_address=self.data_address, cluster_id=joined,
                                   storage_id=getattr(self.store, "storage_id", ""),
                                   host_id=self.host_id, rack=self.rack),
                timeout=self.rpc_timeout_s)
            if joined and reply.cluster_id != joined:
                raise Refused(f"namenode {self.namenode} is of cluster {reply.cluster_id}; this DataNode's data "
                              f"dir belongs to cluster {joined}")
            if not joined and reply.cluster_id:
                self.store.record_cluster_id(reply.cluster_id)
                log.info("datanode %s joined cluster %s", self.datanode_id, reply.cluster_id)
            self.epochs.saw(self.namenode, reply.epoch, reply.active)
            self._registered = True
            log.info("datanode %s registered with namenode %s as %s", self.datanode_id,
                     self.namenode, self.address)
            self.block_report()
        elif time.monotonic() >= self._next_block_report:
            self.block_report()
        stats = self.stats() if self.stats else None
        with self.reports.telling() as deleted:   # after every receipt in flight to this NameNode
            reply = self._stub.Heartbeat(
                pb.HeartbeatRequest(datanode_id=self.datanode_id, address=self.address,
                                    data_address=self.data_address, used_bytes=self.store.used_bytes(),
                                    units=self.store.unit_count(),
                                    active_repairs=self.repairs.active() if self.repairs else 0, stats=stats,
                                    deleted=[pb.StoredUnit(group_id=g, index=i, generation=gen)
                                             for g, i, gen in deleted]),
                timeout=self.rpc_timeout_s)
        self._reachable()
        if reply.reregister:
            log.info("namenode %s asked %s to register again", self.namenode, self.datanode_id)
            self._registered = False
            return True
        for command in self.epochs.admit(self.namenode, reply.epoch, reply.active, reply.commands):
            self.execute(command)
        return False

    def block_report(self) -> None:
        stored = self.store.units()
        units = [pb.StoredUnit(group_id=g, index=i, generation=gen, length=n) for g, i, gen, n in stored]
        # In parts of BLOCK_REPORT_PART units (~2.3 MB): one message of every unit would pass the
        # NameNode's 4 MiB limit at ~180,000 units, and a DataNode that cannot report is soon dead.
        parts = [units[i:i + BLOCK_REPORT_PART] for i in range(0, len(units), BLOCK_REPORT_PART)] or [[]]
        for n, part in enumerate(parts):
            self._stub.BlockReport(pb.BlockReportRequest(datanode_id=self.datanode_id, units=part, part=n,
                                                         more=n < len(parts) - 1), timeout=self.rpc_timeout_s)
        self._next_block_report = time.monotonic() + self.block_report_interval_s
        self.reports.covered((g, i, gen) for g, i, gen, _n in stored)
        log.debug("block report: %d units in %d parts", len(units), len(parts))

    def request_block_report(self) -> None:
        """Send a full block report with the next heartbeat (receipts were dropped)."""
        self._next_block_report = 0.0

    def execute(self, command: pb.Command) -> None:
        kind = command.WhichOneof("command")
        if kind == "delete_unit":
            c = command.delete_unit
            if self.store.delete(c.group_id, c.index, generation=c.generation):
                log.info("deleted unit %d/%d", c.group_id, c.index)
            # Gone either way (deleted now, or never here): every NameNode's next heartbeat says so.
            self.on_deleted(c.group_id, c.index, c.generation)
        elif kind == "repair_unit":
            if self.repairs is None:
                log.warning("no repair worker; ignoring repair of %d/%d",
                            command.repair_unit.group_id, command.repair_unit.index)
            else:
                self.repairs.submit(command.repair_unit)
        else:
            log.warning("unknown command from namenode: %s", command)

    def _refusal(self, e: grpc.RpcError) -> str | None:
        """Why the NameNode refuses this DataNode for good, if it does."""
        code = e.code() if hasattr(e, "code") else None
        if code in (grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED) or \
                (code == grpc.StatusCode.ALREADY_EXISTS and not self._registered):   # its id is another's
            return f"namenode {self.namenode} refused {self.datanode_id}: {e.details()}"
        if code == grpc.StatusCode.UNAVAILABLE and self.credential is not None and not self._registered:
            why = tls.diagnose(self.namenode, self.credential, NAMENODE_NAME, "namenode")
            if why:
                return why
        return None

    def _unknown_here(self, e: grpc.RpcError) -> bool:
        """Does the NameNode not know this DataNode? A restarted one knows nobody (registrations
        are memory only) and refuses a block report or a receipt from a DataNode that has not
        registered with it (FAILED_PRECONDITION). Then register again: the report, retried as
        it was, would be refused forever, and the heartbeat that asks for a registration never
        sent after it."""
        code = e.code() if hasattr(e, "code") else None
        if code != grpc.StatusCode.FAILED_PRECONDITION or not self._registered:
            return False
        self._registered = False
        log.info("namenode %s does not know %s (%s): registering again", self.namenode, self.datanode_id,
                 e.details())
        return True

    def _refused(self, why: str) -> None:
        self.reachable = False
        self.fatal = why
        log.error("%s: giving up", why)
        self.on_fatal(why)

    def _unreachable(self, e: grpc.RpcError) -> None:
        self.reachable = False
        code = e.code().name if hasattr(e, "code") and e.code() else "?"
        if self._outage != code:   # once per outage, and again if it fails another way
            self._outage = code
            log.warning("namenode %s unreachable from %s: %s (will keep trying)", self.namenode,
                        self.datanode_id, describe(e))

    def _reachable(self) -> None:
        self.reachable = True
        if self._outage:
            self._outage = None
            log.info("namenode %s reachable again", self.namenode)

    # ---------------------------------------------------------------- reports from other threads

    def report_bad_unit(self, group_id: int, index: int, generation: int, reason: str) -> None:
        """Tell the NameNode a stored unit failed its checksum (asynchronously): its sidecar is
        damaged, or a reader's failed check made this DataNode check the unit and it is damaged."""
        self.reports.bad(group_id, index, generation, reason)

    def unit_stored(self, group_id: int, index: int, generation: int, length: int) -> None:
        """Tell the NameNode a unit is stored here: its receipt (asynchronously)."""
        self.reports.stored(group_id, index, generation, length)

    def unit_deleted(self, group_id: int, index: int, generation: int) -> None:
        """Tell the NameNode a unit is gone from here (with the next heartbeat), whichever
        NameNode ordered the delete."""
        self.reports.deleted(group_id, index, generation)

    def _send_stored(self, units: list[tuple[int, int, int, int]]) -> None:
        self._stub.UnitStored(pb.UnitStoredRequest(
            datanode_id=self.datanode_id,
            units=[pb.StoredUnit(group_id=g, index=i, generation=gen, length=n) for g, i, gen, n in units]),
            timeout=self.rpc_timeout_s)

    def _send_bad(self, units: list[tuple[int, int, int, str]]) -> None:
        self._stub.ReportBadUnits(pb.BadUnitsRequest(units=[
            pb.BadUnit(group_id=g, index=i, generation=gen, datanode_id=self.datanode_id, reason=reason)
            for g, i, gen, reason in units]), timeout=self.rpc_timeout_s)
