"""Chaos: applying a step of the schedule to the cluster, and healing it at the end.

Every function takes the run's ``Chaos`` object (runner.py): its cluster, its report, and the
units it rotted, which the invariant (invariant.py) excuses until they are repaired.
"""

from __future__ import annotations

import os
import random
import re
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
    """Flip one bit in each of ``units`` block files on the DataNode's disk (units nobody may be
    reading: bit rot is found by the scrubber, or by a reader, or not at all)."""
    knobs = dict(step.knobs)
    rng = random.Random(f"hedgefs-chaos/{chaos.config.seed}/rot/{step.number}/{knobs['salt']}")
    blocks = sorted((chaos.cluster.root / step.target / "blocks").glob("*/*.blk"))
    flipped = []
    for path in rng.sample(blocks, min(knobs["units"], len(blocks))):
        # <group>_<index>_<generation>_<version>.blk (datanode/storage.py)
        name = re.fullmatch(r"(\d+)_(\d+)(?:_\d+){0,2}\.blk", path.name)
        if name is None:
            continue
        group_id, index = int(name[1]), int(name[2])
        try:
            with open(path, "r+b") as f:
                size = f.seek(0, 2)
                if size == 0:
                    continue
                offset = rng.randrange(size)
                f.seek(offset)
                byte = f.read(1)[0]
                f.seek(offset)
                f.write(bytes([byte ^ (1 << rng.randrange(8))]))
                inode = os.fstat(f.fileno()).st_ino
        except FileNotFoundError:
            continue    # deleted meanwhile
        chaos.rotted[(group_id, index, step.target)] = (path, inode)
        flipped.append(f"{group_id}/{index}@{offset}")
    chaos.report.units_rotted += len(flipped)
    chaos.out(f"          rot {step.target}: flipped a bit in {', '.join(flipped) or 'nothing (no units yet)'}")


def datanode_rpc(chaos, dn: str, method: str, request):
    return chaos.cluster.datanode_rpc(dn, method, request, timeout=5)


def repairs_done(chaos) -> int:
    try:
        return chaos.vfs.rpc("Report", pb.Empty()).repairs_done
    except HedgefsError:
        return 0


def _wait_namenode(chaos, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            chaos.vfs.rpc("Report", pb.Empty())
            return
        except Unavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def heal(chaos) -> list[str]:
    """Start the NameNode if it is down, thaw or start every DataNode, clear every fault."""
    c = chaos.cluster
    try:
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
