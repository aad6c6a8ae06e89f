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

A partitioned DataNode is lost (counted against m like a killed one); a slow one is not. The
steps are drawn within the loss budget as DataNode steps are (BEYOND TOLERANCE with the same
chance), so with racks of at most m DataNodes a rack fault fits the budget of a healthy cluster
even under today's placement, which does not yet know racks.
"""

from __future__ import annotations

import dataclasses
import random

import grpc

from hedgefs.chaos.common import short
from hedgefs.cluster.launcher import ClusterError
from hedgefs.cluster.network import NetworkError, layout
from hedgefs.proto import hedgefs_pb2 as pb

RACK_DELAYS_MS = (50, 100, 250, 500)


@dataclasses.dataclass(frozen=True)
class Topology:
    """Which DataNodes are on which host and in which rack, as the launcher deals them."""

    datanodes: int
    hosts: int
    racks: int

    def host_dns(self, host: str) -> list[str]:
        h = int(host[4:])
        return [f"dn{i}" for i in range(1, self.datanodes + 1) if (i - 1) % self.hosts + 1 == h]

    def rack_hosts(self, rack: str) -> list[str]:
        return [h for h, r in layout(self.hosts, self.racks) if f"rack{r}" == rack]

    def rack_dns(self, rack: str) -> list[str]:
        return [d for h in self.rack_hosts(rack) for d in self.host_dns(h)]

    @property
    def host_names(self) -> list[str]:
        return [h for h, _ in layout(self.hosts, self.racks)]

    @property
    def rack_names(self) -> list[str]:
        return [f"rack{r}" for r in range(1, self.racks + 1)]


def draw(rng: random.Random, n, topo: Topology, proc: dict, fault: dict, cut: set, m: int):
    """One host or rack step, given the DataNodes' states after the previous step."""
    from hedgefs.chaos.schedule import BEYOND_CHANCE, LOSS_FAULTS, Step

    lost = {d for d in proc if proc[d] != "running" or fault[d] in LOSS_FAULTS or d in cut}
    beyond = rng.random() < BEYOND_CHANCE   # once a step, as a DataNode step's

    def affordable(dns) -> bool:
        after = len(lost | set(dns))
        return after <= m or (after <= m + 2 and beyond)

    cut_racks = [r for r in topo.rack_names if set(topo.rack_dns(r)) <= cut and topo.rack_dns(r)]
    killable = [h for h in topo.host_names
                if any(proc[d] != "stopped" for d in topo.host_dns(h)) and not set(topo.host_dns(h)) & cut]
    startable = [h for h in topo.host_names
                 if any(proc[d] == "stopped" for d in topo.host_dns(h)) and not set(topo.host_dns(h)) & cut]
    whole = [r for r in topo.rack_names if r not in cut_racks and topo.rack_dns(r)]
    slowed = [r for r in topo.rack_names if any(fault[d] == "delay" for d in topo.rack_dns(r))]
    quiet = [r for r in whole if all(not fault[d] and proc[d] == "running" for d in topo.rack_dns(r))]
    kill_h = [h for h in killable if affordable(topo.host_dns(h))]
    part_r = [r for r in whole if affordable(topo.rack_dns(r))]
    weights = {"host-kill": 3.0 if kill_h else 0, "host-start": 3.0 if startable else 0,
               "rack-partition": 5.0 if part_r else 0, "rack-heal": 3.0 if cut_racks else 0,
               "rack-slow": 2.0 if quiet else 0, "rack-clear": 2.0 if slowed else 0}
    if not any(weights.values()):
        return Step(n, "pause")
    action = rng.choices(list(weights), weights=list(weights.values()))[0]
    if action == "host-kill":
        host = rng.choice(kill_h)
        return Step(n, action, host, dns=tuple(d for d in topo.host_dns(host) if proc[d] != "stopped"))
    if action == "host-start":
        host = rng.choice(startable)
        return Step(n, action, host, dns=tuple(d for d in topo.host_dns(host) if proc[d] == "stopped"))
    if action == "rack-partition":
        rack = rng.choice(part_r)
        return Step(n, action, rack, dns=tuple(topo.rack_dns(rack)))
    if action == "rack-heal":
        rack = rng.choice(cut_racks)
        return Step(n, action, rack, dns=tuple(topo.rack_dns(rack)))
    if action == "rack-slow":
        rack = rng.choice(quiet)
        return Step(n, action, rack, "delay", (("read_delay_ms", rng.choice(RACK_DELAYS_MS)), ("probability", 1.0)),
                    dns=tuple(topo.rack_dns(rack)))
    rack = rng.choice(slowed)
    return Step(n, action, rack, dns=tuple(d for d in topo.rack_dns(rack) if fault[d] == "delay"))


def advance(step, proc: dict, fault: dict, cut: set) -> None:
    """The DataNodes' states after a host or rack step (schedule.py keeps them)."""
    for d in step.dns:
        if step.action == "host-kill":
            proc[d], fault[d] = "stopped", ""
        elif step.action == "host-start":
            proc[d], fault[d] = "running", ""
        elif step.action == "rack-partition":
            cut.add(d)
        elif step.action == "rack-heal":
            cut.discard(d)
        elif step.action == "rack-slow":
            fault[d] = "delay"
        elif step.action == "rack-clear":
            fault[d] = ""


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
