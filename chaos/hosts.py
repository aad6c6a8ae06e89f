"""Chaos with --hosts: faults of whole hosts and racks, the correlated failures placement is for.

The cluster runs its DataNodes on hosts in network namespaces (cluster/network.py), dealt
round-robin as the launcher deals them, the hosts in contiguous runs per rack. About one step in
HOST_SHARE (schedule.py) is one of:

    host-kill hostH        SIGKILL every DataNode of the host (a machine that died)
    host-start hostH       start them again
    rack-partition rackR   the rack cut off from the rest (iptables in its namespaces): its
                           DataNodes run on, unreachable, until rack-heal
    rack-heal rackR
    rack-slow rackR        every DataNode of the rack slowed alike (the same read delay): the
                           correlated slowness the breaker exists for
    rack-clear rackR       the rack's delay cleared

The steps are drawn in schedule.py (``draw_host_step``, its own seeded stream); this module applies
them. A partitioned DataNode is lost (counted against m like a killed one); a slow one is not. The
steps are drawn within the loss budget as DataNode steps are (BEYOND TOLERANCE with the same
chance), so with racks of at most m DataNodes a rack fault fits the budget of a healthy cluster
even under today's placement, which does not yet know racks.
"""

from __future__ import annotations

import grpc

from hedgefs.chaos.common import short
from hedgefs.cluster.launcher import ClusterError
from hedgefs.cluster.network import NetworkError
from hedgefs.proto import hedgefs_pb2 as pb

def apply(chaos, step) -> list[str]:
    c = chaos.cluster
    try:
        if step.action == "host-kill":
            for dn in step.dns:
                if c.is_running(dn):
                    c.kill(dn)
        elif step.action == "host-start":
            for dn in step.dns:
                c.start(dn)
            c.wait_live(list(step.dns), 30)
        elif step.action == "rack-partition":
            c.partition(step.target)
        elif step.action == "rack-heal":
            c.heal(step.target)
        elif step.action in ("rack-slow", "rack-clear"):
            for dn in step.dns:
                c.datanode_rpc(dn, "ClearFaults", pb.FaultClearRequest(), timeout=5)
                if step.action == "rack-slow":
                    c.datanode_rpc(dn, "SetFaults", step.fault_config(), timeout=5)
    except (ClusterError, NetworkError, grpc.RpcError) as err:
        return [f"step {step.number} ({step.action} {step.target}) could not be applied: {short(err)}"]
    return []
