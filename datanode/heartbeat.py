"""The DataNode's side of the DataNode protocol: register, block reports, heartbeats, commands.

One background thread::

    RegisterDataNode -> BlockReport -> Heartbeat every heartbeat_interval_s
                                       (full BlockReport every block_report_interval_s;
                                        reregister=true in a reply starts over)

Commands in heartbeat replies are executed here: deletes at once, repairs handed to the
RepairRunner. An unreachable NameNode is logged once per outage, and retried forever.
Bad-unit reports (checksum mismatches seen by reads) go out on their own small thread so a read
never waits for the NameNode.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

from hedgefs.plumbing import describe
from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2_grpc
from hedgefs.proto import hedgefs_pb2 as pb

log = logging.getLogger("hedgefs.datanode")


class NameNodeLink:
    def __init__(self, *, namenode: str, datanode_id: str, address: str, store,
                 heartbeat_interval_s: float = 3.0, block_report_interval_s: float = 60.0,
                 rpc_timeout_s: float = 10.0, repairs=None, stats=None):
        self.namenode = namenode
        self.datanode_id = datanode_id
        self.address = address
        self.store = store
        self.repairs = repairs            # a RepairRunner (set before start)
        self.stats = stats                # () -> pb.DataNodeStats: what the DataNode measured
        self.heartbeat_interval_s = heartbeat_interval_s
        self.block_report_interval_s = block_report_interval_s
        self.rpc_timeout_s = rpc_timeout_s
        self._channel = grpc.insecure_channel(namenode, options=GRPC_OPTIONS)
        self._stub = hedgefs_pb2_grpc.NameNodeStub(self._channel)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._reports = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dn-report")
        self._registered = False
        self._outage = False
        self.reachable = False            # did the last heartbeat get through?
        self._next_block_report = 0.0

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dn-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=self.rpc_timeout_s + 1)
        self._reports.shutdown(wait=False, cancel_futures=True)
        self._channel.close()

    # ---------------------------------------------------------------- the loop

    def _run(self) -> None:
        hurry = False
        while not self._stop.is_set():
            again = False
            try:
                again = self.beat()
            except grpc.RpcError as e:
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
            self._stub.RegisterDataNode(
                pb.RegisterRequest(datanode_id=self.datanode_id, address=self.address),
                timeout=self.rpc_timeout_s)
            self._registered = True
            log.info("datanode %s registered with namenode %s as %s", self.datanode_id,
                     self.namenode, self.address)
            self.block_report()
        elif time.monotonic() >= self._next_block_report:
            self.block_report()
        reply = self._stub.Heartbeat(
            pb.HeartbeatRequest(datanode_id=self.datanode_id, address=self.address,
                                used_bytes=self.store.used_bytes(), units=self.store.unit_count(),
                                active_repairs=self.repairs.active() if self.repairs else 0,
                                stats=self.stats() if self.stats else None),
            timeout=self.rpc_timeout_s)
        self._reachable()
        if reply.reregister:
            log.info("namenode %s asked %s to register again", self.namenode, self.datanode_id)
            self._registered = False
            return True
        for command in reply.commands:
            self.execute(command)
        return False

    def block_report(self) -> None:
        units = [pb.StoredUnit(group_id=g, index=i, length=n) for g, i, n in self.store.units()]
        self._stub.BlockReport(pb.BlockReportRequest(datanode_id=self.datanode_id, units=units),
                               timeout=self.rpc_timeout_s)
        self._next_block_report = time.monotonic() + self.block_report_interval_s
        log.debug("block report: %d units", len(units))

    def execute(self, command: pb.Command) -> None:
        kind = command.WhichOneof("command")
        if kind == "delete_unit":
            c = command.delete_unit
            if self.store.delete(c.group_id, c.index):
                log.info("deleted unit %d/%d", c.group_id, c.index)
        elif kind == "repair_unit":
            if self.repairs is None:
                log.warning("no repair worker; ignoring repair of %d/%d",
                            command.repair_unit.group_id, command.repair_unit.index)
            else:
                self.repairs.submit(command.repair_unit)
        else:
            log.warning("unknown command from namenode: %s", command)

    def _unreachable(self, e: grpc.RpcError) -> None:
        self.reachable = False
        if not self._outage:
            self._outage = True
            log.warning("namenode %s unreachable from %s: %s (will keep trying)", self.namenode,
                        self.datanode_id, describe(e))

    def _reachable(self) -> None:
        self.reachable = True
        if self._outage:
            self._outage = False
            log.info("namenode %s reachable again", self.namenode)

    # ---------------------------------------------------------------- reports from other threads

    def report_bad_unit(self, group_id: int, index: int, reason: str) -> None:
        """Tell the NameNode a stored unit failed its checksum (asynchronously)."""
        request = pb.BadUnitsRequest(units=[pb.BadUnit(group_id=group_id, index=index,
                                                       datanode_id=self.datanode_id,
                                                       reason=reason)])

        def send():
            try:
                self._stub.ReportBadUnits(request, timeout=self.rpc_timeout_s)
            except grpc.RpcError as e:
                log.warning("cannot report bad unit %d/%d to namenode: %s", group_id, index,
                            describe(e))
        try:
            self._reports.submit(send)
        except RuntimeError:
            pass    # shutting down

    def unit_stored(self, group_id: int, index: int, length: int) -> None:
        """Tell the NameNode a repaired unit is stored here; retried, then left to block reports."""
        request = pb.UnitStoredRequest(datanode_id=self.datanode_id,
                                       unit=pb.StoredUnit(group_id=group_id, index=index,
                                                          length=length))
        for attempt in range(3):
            try:
                self._stub.UnitStored(request, timeout=self.rpc_timeout_s)
                return
            except grpc.RpcError as e:
                if attempt == 2 or self._stop.wait(0.5 * (attempt + 1)):
                    log.warning("cannot tell namenode about unit %d/%d (the next block report "
                                "will): %s", group_id, index, describe(e))
                    return

