"""Chaos, part 1: the seeded schedule of faults, and the files the writers store.

    seed ──> schedule (every step drawn up front: printable, diffable, a prefix of any longer run)

A DataNode is *lost* while it is killed, frozen, stalled, erroring or corrupting (its disk reads
fail their checksums: "corrupt"; or bytes flip on their way to the reader, after the DataNode's own
check: "wire", which only the reader's check catches) (a delay or a bandwidth cap only makes it slow), and from the moment a byte of some of its units is flipped on
disk ("rot": bit rot in units nobody is reading) until the step that clears it; the rotten units
themselves stay bad until the scrubber or a reader finds them and they are repaired. The schedule never loses more DataNodes than the policy's m,
except in steps it marks BEYOND TOLERANCE. Every other file is replicated (REPLICATED: four
replicas tolerate the same m = 3 lost DataNodes as RS-6-3, so that budget is every file's).

Everything random comes from the seed: the schedule, file sizes and contents, what readers read.
"""

from __future__ import annotations

import dataclasses
import random

import numpy as np

from hedgefs.cluster.network import layout
from hedgefs.ec.layout import block_size_for
from hedgefs.ec.policy import parse_policy
from hedgefs.proto import hedgefs_pb2 as pb

POLICY = parse_policy("RS-6-3-64k")
REPLICATED = parse_policy("REPLICATE-4")  # odd-numbered files; tolerates POLICY.m lost DataNodes too
BLOCK_SIZE = 256 * 1024                   # a block group is 1.5 MiB of data: boundaries come often
REPLICA_BLOCK = block_size_for(REPLICATED, BLOCK_SIZE)   # a replicated block: 1 MiB (whole cells)
LOSS_FAULTS = ("stall", "error", "corrupt", "wire", "rot")
SLOW_FAULTS = ("delay", "bandwidth")
BEYOND_CHANCE = 0.15                      # at the loss budget, chance that harm may go beyond it
HA_ACTIONS = ("nn-kill", "nn-freeze", "nn-start", "etcd-kill", "etcd-freeze", "etcd-start", "etcd-thaw")
HA_SHARE = 0.3                            # --ha: the share of steps that are NameNode or etcd faults
ETCD_MEMBERS = ("etcd-1", "etcd-2", "etcd-3")   # cluster/launcher.py's names
HOST_ACTIONS = ("host-kill", "host-start", "rack-partition", "rack-heal", "rack-slow", "rack-clear")
HOST_SHARE = 0.3                          # --hosts: the share of steps that are host or rack faults
RACK_DELAYS_MS = (50, 100, 250, 500)      # rack-slow: every DataNode of the rack this read delay


@dataclasses.dataclass(frozen=True)
class ChaosConfig:
    seed: int
    steps: int = 100
    datanodes: int = 12
    writers: int = 2
    readers: int = 2
    files_per_writer: int = 12            # a writer deletes its oldest file beyond this many
    max_file_bytes: int = 2 * POLICY.k * BLOCK_SIZE + POLICY.stripe_data_size
    secure: bool = False                  # TLS, credentials and block tokens on every channel
    ha: bool = False                      # 3 etcd members, 2 NameNodes; NameNode and etcd faults (ha.py)
    hosts: int = 0                        # >0: DataNodes on hosts in network namespaces; host and rack faults
    racks: int = 4

    def replay_command(self, steps: int) -> str:
        return (f"hedgefs chaos --seed {self.seed} --steps {steps} --datanodes {self.datanodes} "
                f"--writers {self.writers} --readers {self.readers}" + (" --secure" if self.secure else "")
                + (" --ha" if self.ha else "") + (f" --hosts {self.hosts} --racks {self.racks}" if self.hosts else ""))


# ---------------------------------------------------------------------------- the schedule

@dataclasses.dataclass(frozen=True)
class Step:
    number: int
    action: str                           # kill freeze thaw restart fault clear nn-restart pause; HA_ACTIONS
    target: str = ""
    fault: str = ""                       # for action "fault": one of LOSS_FAULTS + SLOW_FAULTS
    knobs: tuple = ()                     # FaultConfig fields, as (name, value) pairs; rot: units, salt
    dwell_s: float = 0.5                  # load runs this long between the step and its check
    frozen: tuple = ()                    # state after the step
    stopped: tuple = ()
    faults: tuple = ()                    # (DataNode, fault kind) of running DataNodes with a fault
    lost: tuple = ()
    beyond: bool = False
    nn_down: bool = False                 # --ha: a NameNode is down after the step (killed as the active)
    etcd_down: str = ""                   # --ha: the etcd member down (killed or frozen) after the step
    dns: tuple = ()                       # --hosts: the DataNodes a host or rack step acts on
    cut: tuple = ()                       # --hosts: DataNodes in a partitioned rack after the step

    def line(self, m: int = POLICY.m) -> str:
        what = f"{self.action} {self.target}".strip()
        if self.action == "fault":
            what += " " + " ".join([self.fault] + [_knob(k, v) for k, v in self.knobs if k not in ("stall", "salt")])
        if self.action in ("rack-slow",):
            what += " " + " ".join(_knob(k, v) for k, v in self.knobs)
        how = dict(self.faults) | dict.fromkeys(self.frozen, "frozen") | dict.fromkeys(self.cut, "cut") \
            | dict.fromkeys(self.stopped, "killed")
        lost = " ".join(f"{d}={how[d]}" for d in self.lost) or "-"
        slow = " ".join(f"{d}={f}" for d, f in self.faults if f in SLOW_FAULTS)
        flag = f"  BEYOND TOLERANCE ({len(self.lost)} > {m})" if self.beyond else ""
        ha = "".join([" namenode down" if self.nn_down else "", f" {self.etcd_down} down" if self.etcd_down else ""])
        return (f"step {self.number:3d}  {what:<44} then {self.dwell_s:.1f} s  lost {len(self.lost)}/{m}: {lost}"
                + (f"  slow: {slow}" if slow else "") + (f"  ha:{ha}" if ha else "") + flag)

    def fault_config(self) -> pb.FaultConfig:
        """The knobs to set on the DataNode (rot has none: it flips bytes on disk)."""
        return pb.FaultConfig(**{k: v for k, v in self.knobs if k in pb.FaultConfig.DESCRIPTOR.fields_by_name})


def _knob(name: str, value) -> str:
    if name == "read_delay_ms":
        return f"{value}ms"
    if name == "jitter_ms":
        return f"jitter={value}ms"
    if name == "bandwidth_bps":
        return f"{value // 1024}KiB/s"
    if name == "units":
        return f"{value} unit{'s' if value > 1 else ''}"
    return f"p={value:g}"


def generate_schedule(seed: int, steps: int, datanodes: int, m: int = POLICY.m, ha: bool = False,
                      hosts: int = 0, racks: int = 4) -> list[Step]:
    """The whole schedule, from the seed alone; step n does not depend on how many steps follow.

    With ``ha`` about one step in HA_SHARE is a NameNode or etcd fault (its own random stream:
    HA_ACTIONS), drawn so that one NameNode and two etcd members always stay up; the DataNode
    steps are drawn as without it, except that the single NameNode's restart is not one of them.
    With ``hosts`` about one step in HOST_SHARE is a host or rack fault (draw_host_step, its own
    stream: HOST_ACTIONS; hosts.py applies them): a host killed, a rack partitioned, a rack slowed as a whole; DataNode steps
    leave the DataNodes of a partitioned rack alone."""
    topology = Topology(datanodes, hosts, racks) if hosts else None
    host_rng = random.Random(f"hedgefs-chaos/{seed}/hosts")
    cut: set[str] = set()
    rng = random.Random(f"hedgefs-chaos/{seed}/schedule")
    ha_rng = random.Random(f"hedgefs-chaos/{seed}/ha")
    freeze_rng = random.Random(f"hedgefs-chaos/{seed}/etcd-freeze")   # its own: ha_rng's draws stay as they were
    nn_down, etcd_down, etcd_frozen = False, "", False
    names = [f"dn{i}" for i in range(1, datanodes + 1)]
    proc = dict.fromkeys(names, "running")
    fault = dict.fromkeys(names, "")
    schedule = []
    for n in range(1, steps + 1):
        if ha and ha_rng.random() < HA_SHARE:
            step = _draw_ha_step(ha_rng, n, nn_down, etcd_down)
            if step.action == "etcd-kill" and freeze_rng.random() < 0.5:
                step, etcd_frozen = dataclasses.replace(step, action="etcd-freeze"), True
            elif step.action == "etcd-start" and etcd_frozen:
                step, etcd_frozen = dataclasses.replace(step, action="etcd-thaw"), False
            nn_down = {"nn-kill": True, "nn-start": False}.get(step.action, nn_down)
            etcd_down = {"etcd-kill": step.target, "etcd-freeze": step.target,
                         "etcd-start": "", "etcd-thaw": ""}.get(step.action, etcd_down)
        elif topology and host_rng.random() < HOST_SHARE:
            step = draw_host_step(host_rng, n, topology, proc, fault, cut, m)
            advance_host_step(step, proc, fault, cut)
        else:
            reachable = [d for d in names if d not in cut]
            step = _draw_step(rng, n, {d: proc[d] for d in reachable}, {d: fault[d] for d in reachable}, m, ha,
                              lost_elsewhere=len(cut))
        if step.action in ("kill", "freeze", "thaw", "restart"):
            proc[step.target] = {"kill": "stopped", "freeze": "frozen"}.get(step.action, "running")
            if step.action in ("kill", "restart"):
                fault[step.target] = ""          # a new process starts without faults
        elif step.action == "fault":
            fault[step.target] = step.fault
        elif step.action == "clear":
            fault[step.target] = ""
        lost = tuple(d for d in names if proc[d] != "running" or fault[d] in LOSS_FAULTS or d in cut)
        schedule.append(dataclasses.replace(
            step, dwell_s=round(rng.uniform(0.2, 1.0), 1), lost=lost, beyond=len(lost) > m, cut=tuple(sorted(cut)),
            nn_down=nn_down, etcd_down=etcd_down,
            frozen=tuple(d for d in names if proc[d] == "frozen"),
            stopped=tuple(d for d in names if proc[d] == "stopped"),
            faults=tuple((d, fault[d]) for d in names if fault[d] and proc[d] != "stopped")))
    return schedule


def _draw_ha_step(rng: random.Random, n: int, nn_down: bool, etcd_down: str) -> Step:
    """A NameNode or etcd fault: kill -9 the active (a later step starts it again: a standby),
    freeze the active past its lease and thaw it, kill an etcd member, start it again (about half
    of the kills become freezes, and their starts thaws: generate_schedule)."""
    weights = {"nn-kill": 0 if nn_down else 2.0, "nn-freeze": 0 if nn_down else 1.5, "nn-start": 3.0 if nn_down else 0,
               "etcd-kill": 0 if etcd_down else 1.5, "etcd-start": 2.0 if etcd_down else 0}
    action = rng.choices(list(weights), weights=list(weights.values()))[0]
    if action == "etcd-kill":
        return Step(n, action, rng.choice(ETCD_MEMBERS))
    if action == "etcd-start":
        return Step(n, action, etcd_down)
    return Step(n, action, "" if action == "nn-start" else "active")


def _draw_step(rng: random.Random, n: int, proc: dict, fault: dict, m: int, ha: bool = False,
               lost_elsewhere: int = 0) -> Step:
    """A DataNode step among ``proc``'s DataNodes (``lost_elsewhere``: lost ones not among them,
    in a partitioned rack)."""
    names = list(proc)
    lost = [d for d in names if proc[d] != "running" or fault[d] in LOSS_FAULTS] + [""] * lost_elsewhere
    healthy = [d for d in names if d not in lost]
    ailing = [d for d in names if proc[d] != "running" or fault[d]]
    may_harm = len(lost) < m or (len(lost) < m + 2 and rng.random() < BEYOND_CHANCE)
    weights = {"harm": 4.0 if healthy and may_harm else 0, "heal": (2.0 if len(lost) <= m else 8.0) if ailing else 0,
               "slow": 1.5 if any(not fault[d] for d in healthy) else 0, "nn-restart": 0 if ha else 0.4,
               # restarting a healthy DataNode loses it for a moment: only while there is room
               "bounce": 0.5 if healthy and len(lost) < m else 0, "pause": 0.3}
    kind = rng.choices(list(weights), weights=list(weights.values()))[0]
    if kind == "harm":
        target = rng.choice(healthy)
        action = rng.choices(["kill", "freeze", "stall", "error", "corrupt", "wire", "rot"],
                             [3, 2, 1.5, 1.5, 1.5, 1.5, 1.5])[0]
        return _fault_step(rng, n, target, action) if action in LOSS_FAULTS else Step(n, action, target)
    if kind == "slow":
        target = rng.choice([d for d in healthy if not fault[d]])
        return _fault_step(rng, n, target, rng.choices(SLOW_FAULTS, [3, 1])[0])
    if kind == "heal":
        target = rng.choice(ailing)
        if proc[target] == "stopped":
            return Step(n, "restart", target)
        if proc[target] == "frozen":
            return Step(n, rng.choices(["thaw", "restart", "kill"], [3, 1, 1])[0], target)
        # restarting a DataNode that is only slow would lose it for a moment: only while there is room
        restart = 1 if target in lost or len(lost) < m else 0
        return Step(n, rng.choices(["clear", "restart"], [4, restart])[0], target)
    if kind == "bounce":
        return Step(n, "restart", rng.choice(healthy))
    return Step(n, kind)


# ---------------------------------------------------------------------------- hosts and racks

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


def draw_host_step(rng: random.Random, n, topo: Topology, proc: dict, fault: dict, cut: set, m: int):
    """One host or rack step, given the DataNodes' states after the previous step."""
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


def advance_host_step(step, proc: dict, fault: dict, cut: set) -> None:
    """The DataNodes' states after a host or rack step."""
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


def _fault_step(rng: random.Random, n: int, target: str, kind: str) -> Step:
    knobs = {
        "delay": lambda: (("read_delay_ms", rng.choice([100, 300, 600, 1000, 1500])),
                          ("probability", rng.choice([0.3, 0.6, 1.0])), ("jitter_ms", rng.choice([0, 50, 200]))),
        "bandwidth": lambda: (("bandwidth_bps", rng.choice([512 << 10, 1 << 20, 4 << 20])),),
        "stall": lambda: (("stall", True),),
        "error": lambda: (("error_probability", rng.choice([0.3, 0.7, 1.0])),),
        "corrupt": lambda: (("corrupt_probability", rng.choice([0.3, 0.7, 1.0])),),
        "wire": lambda: (("wire_corrupt_probability", rng.choice([0.3, 0.7, 1.0])),),
        "rot": lambda: (("units", rng.choice([1, 2, 3])), ("salt", rng.randrange(2**32))),
    }[kind]()
    return Step(n, "fault", target, kind, knobs)


# ---------------------------------------------------------------------------- data

def file_size(rng: random.Random, max_bytes: int) -> int:
    """Sizes at every layout boundary (cell, stripe, group, replicated block; +-1) and some
    anywhere in between."""
    cell, stripe, group = POLICY.cell_size, POLICY.stripe_data_size, POLICY.k * BLOCK_SIZE
    edges = [0, 1, cell - 1, cell, cell + 1, stripe - 1, stripe, stripe + 1, group - 1, group, group + 1,
             REPLICA_BLOCK - 1, REPLICA_BLOCK, REPLICA_BLOCK + 1]
    if rng.random() < 0.4:
        return min(rng.choice(edges), max_bytes)
    return rng.randrange(1, max_bytes + 1)


def file_content(seed: int, writer: int, index: int, size: int) -> bytes:
    return np.random.default_rng([seed, writer, index]).integers(0, 256, size, dtype=np.uint8).tobytes()


def differing_bytes(got: bytes, want: bytes) -> int:
    n = min(len(got), len(want))
    a, b = np.frombuffer(got, np.uint8, n), np.frombuffer(want, np.uint8, n)
    return int(np.count_nonzero(a != b)) + abs(len(got) - len(want))
