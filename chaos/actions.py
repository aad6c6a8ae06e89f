"""Chaos: applying a step of the schedule to the cluster, and healing it at the end.

Every function takes the run's ``Chaos`` object (runner.py): its cluster, its report, and the
units it rotted, which the invariant (invariant.py) excuses until they are repaired.
"""

from __future__ import annotations

import random
import time

import grpc

from hedgefs.chaos.common import short
from hedgefs.chaos.schedule import Step
from hedgefs.client.errors import HedgefsError, Unavailable
from hedgefs.cluster.launcher import ClusterError
from hedgefs.proto import hedgefs_pb2 as pb


def apply(chaos, step: Step) -> list[str]:
    c, dn = chaos.cluster, step.target
    try:
        if step.action == "kill":
            c.kill(dn)
        elif step.action == "freeze":
            c.freeze(dn)
        elif step.action == "thaw":
            c.thaw(dn)
        elif step.action == "restart":
            c.restart(dn)
        elif step.action == "fault" and step.fault == "rot":
            _rot(chaos, step)
        elif step.action == "fault":
            datanode_rpc(chaos, dn, "ClearFaults", pb.FaultClearRequest())
            datanode_rpc(chaos, dn, "SetFaults", step.fault_config())
        elif step.action == "clear":
            datanode_rpc(chaos, dn, "ClearFaults", pb.FaultClearRequest())
        elif step.action == "nn-restart":
            chaos.repairs_before += repairs_done(chaos)
            c.kill("namenode")
            c.start("namenode")
            _wait_namenode(chaos)
    except (ClusterError, grpc.RpcError, HedgefsError) as err:
        return [f"step {step.number} ({step.action} {dn}) could not be applied: {short(err)}"]
    return []


def _rot(chaos, step: Step) -> None:
    """Flip one bit in each of ``units`` units on the DataNode's disk (its ``Rot`` RPC): bit rot,
    found by the scrubber, or by a reader, or not at all."""
    knobs = dict(step.knobs)
    seed = random.Random(f"hedgefs-chaos/{chaos.config.seed}/rot/{step.number}/{knobs['salt']}").getrandbits(63)
    reply = datanode_rpc(chaos, step.target, "Rot", pb.RotRequest(units=knobs["units"], seed=seed))
    for unit in reply.rotted:
        chaos.rotted[(unit.group_id, unit.index, step.target)] = unit
    chaos.report.units_rotted += len(reply.rotted)
    flipped = [f"{u.group_id}/{u.index}@{u.offset}" for u in reply.rotted]
    chaos.out(f"          rot {step.target}: flipped a bit in {', '.join(flipped) or 'nothing (no units yet)'}")


def datanode_rpc(chaos, dn: str, method: str, request):
    return chaos.cluster.datanode_rpc(dn, method, request, timeout=5)


def repairs_done(chaos) -> int:
    try:
        return chaos.vfs.admin.report().repairs_done
    except HedgefsError:
        return 0


def _wait_namenode(chaos, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            chaos.vfs.admin.report()
            return
        except Unavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def heal(chaos) -> list[str]:
    """Start the NameNode if it is down, heal every partition, thaw or start every DataNode, clear
    every fault."""
    c = chaos.cluster
    try:
        if c.network:
            c.heal()
        if not c.is_running("namenode"):
            c.start("namenode")
        for dn in c.datanode_ids:
            state = c.process_state(dn)
            if state == "frozen":
                c.thaw(dn)
            elif state == "stopped":
                c.start(dn)
        c.wait_live(c.datanode_ids, 60)
        for dn in c.datanode_ids:
            datanode_rpc(chaos, dn, "ClearFaults", pb.FaultClearRequest())
    except (ClusterError, grpc.RpcError) as err:
        return [f"healing the cluster failed: {short(err)}"]
    return []
