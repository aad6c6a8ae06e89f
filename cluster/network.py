"""Hosts and racks on one machine: a network namespace per host, all on one bridge.

    root namespace: NameNode(s), etcd, clients, the bridge hfs<id> at 198.18.N.1/24
        │ veth pairs
        ├── netns hfs-<id>-host1   eth0 198.18.N.33   rack1 = 198.18.N.32/27
        ├── netns hfs-<id>-host2   eth0 198.18.N.34
        ├── netns hfs-<id>-host3   eth0 198.18.N.65   rack2 = 198.18.N.64/27
        ...

Each host's DataNodes run inside its namespace (``ip netns exec``) and bind its address, so a
host is cut off, or a rack partitioned from the rest, by iptables rules inside the namespaces
concerned (the root namespace's tables are never touched, unless a FORWARD policy other than
ACCEPT would drop bridged traffic between hosts: then one ACCEPT rule for this bridge, removed
with it). Killing a host is the launcher's: SIGKILL its DataNodes.

Addresses come from 198.18.0.0/15, the block RFC 2544 sets aside for benchmarking networks: one
/24 per cluster, the first that no interface of the machine uses; rack r is the /27 at 32 r
(so at most 7 racks of at most 30 hosts). Everything made is named with the cluster's id, kept in
cluster.json, and removed by ``destroy`` (``leftovers`` finds what a crash left).

Needs root and iproute2's ``ip`` (``iptables`` for partitions): ``HostsUnavailable`` otherwise.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import shutil
import subprocess

BLOCK = ipaddress.ip_network("198.18.0.0/15")
MAX_RACKS = 7
MAX_HOSTS_PER_RACK = 30
PREFIX = "hfs"


class HostsUnavailable(Exception):
    """This machine cannot make hosts: ``missing`` is "root" or the tool that is not there."""

    def __init__(self, missing: str, message: str):
        super().__init__(message)
        self.missing = missing


class NetworkError(Exception):
    """A command that makes or changes the network failed (its stderr in the message)."""


def check_available(tools: tuple[str, ...] = ("ip",)) -> None:
    if os.geteuid() != 0:
        raise HostsUnavailable("root", "hosts in network namespaces need root (run as root, or without --hosts)")
    for tool in tools:
        if shutil.which(tool) is None:
            raise HostsUnavailable(tool, f"hosts in network namespaces need `{tool}` on PATH "
                                         f"(Debian: apt-get install {'iproute2' if tool == 'ip' else tool})")


def layout(hosts: int, racks: int) -> list[tuple[str, int]]:
    """(host name, rack number) for host1..hostN: racks in contiguous runs, as even as they go
    (12 hosts in 3 racks: host1-4 rack1, host5-8 rack2, host9-12 rack3)."""
    if not 1 <= racks <= min(hosts, MAX_RACKS):
        raise ValueError(f"--racks must be 1..{min(hosts, MAX_RACKS)} for {hosts} hosts")
    placed = [(f"host{h}", (h - 1) * racks // hosts + 1) for h in range(1, hosts + 1)]
    fullest = max(sum(1 for _, r in placed if r == rack) for rack in range(1, racks + 1))
    if fullest > MAX_HOSTS_PER_RACK:
        raise ValueError(f"at most {MAX_HOSTS_PER_RACK} hosts a rack: use more racks")
    return placed


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetworkError(f"{' '.join(args)}: {(proc.stderr or proc.stdout).strip() or f'exit {proc.returncode}'}")
    return proc


def _subnets_in_use() -> set[ipaddress.IPv4Network]:
    out = _run("ip", "-j", "-4", "addr").stdout
    return {ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network
            for link in json.loads(out or "[]") for a in link.get("addr_info", [])}


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of BLOCK that no interface uses, chosen at random: two clusters planned at once (test
    workers) rarely pick the same one, and the second one's bridge address would then fail loudly."""
    used = _subnets_in_use()
    free = [s for s in BLOCK.subnets(new_prefix=24) if not any(s.overlaps(u) for u in used)]
    if not free:
        raise NetworkError(f"no free /24 left in {BLOCK}")
    return secrets.choice(free)


class HostNetwork:
    """The namespaces, veths and bridge of one cluster; ``state`` is what cluster.json keeps of it."""

    def __init__(self, state: dict):
        self.state = state

    # ------------------------------------------------------------------ making and removing

    @classmethod
    def plan(cls, hosts: int, racks: int) -> "HostNetwork":
        """Choose the names and addresses (nothing is made yet)."""
        check_available()
        placed = layout(hosts, racks)
        cid = secrets.token_hex(2)
        subnet = _free_subnet()
        base = int(subnet.network_address)
        seen: dict[int, int] = {}
        table = {}
        for name, rack in placed:
            seen[rack] = seen.get(rack, 0) + 1
            number = name[4:]
            table[name] = {"netns": f"{PREFIX}-{cid}-{name}", "veth": f"{PREFIX}{cid}-h{number}",
                           "address": str(ipaddress.ip_address(base + 32 * rack + seen[rack])),
                           "rack": f"rack{rack}"}
        return cls({"id": cid, "subnet": str(subnet), "bridge": f"{PREFIX}{cid}",
                    "gateway": str(ipaddress.ip_address(base + 1)), "made": False, "forward_rule": False,
                    "hosts": table})

    def create(self) -> None:
        """Make the bridge and every host's namespace; on failure, remove what was made."""
        s = self.state
        s["made"] = True   # from here on, destroy() has something to look for
        try:
            _run("ip", "link", "add", s["bridge"], "type", "bridge")
            _run("ip", "addr", "add", f"{s['gateway']}/24", "dev", s["bridge"])
            _run("ip", "link", "set", s["bridge"], "up")
            if _bridged_traffic_filtered():
                _run("iptables", *self._forward_rule("-I"))
                s["forward_rule"] = True
            for host in s["hosts"].values():
                ns = host["netns"]
                _run("ip", "netns", "add", ns)
                _run("ip", "link", "add", host["veth"], "type", "veth", "peer", "name", "eth0", "netns", ns)
                _run("ip", "link", "set", host["veth"], "master", s["bridge"], "up")
                _run("ip", "-n", ns, "addr", "add", f"{host['address']}/24", "dev", "eth0")
                _run("ip", "-n", ns, "link", "set", "eth0", "up")
                _run("ip", "-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.destroy()
            raise

    def destroy(self) -> None:
        """Remove every namespace (its veth goes with it), the bridge and the FORWARD rule. The
        processes in the namespaces must be gone first: a namespace outlives its name while a
        process is in it."""
        s = self.state
        if not s.get("made"):
            return
        for ns in self.leftovers()["netns"]:
            _run("ip", "netns", "del", ns, check=False)
        for link in self.leftovers()["links"]:
            _run("ip", "link", "del", link, check=False)
        if s.get("forward_rule"):
            _run("iptables", *self._forward_rule("-D"), check=False)
            s["forward_rule"] = False
        s["made"] = False

    def leftovers(self) -> dict[str, list[str]]:
        """What of this cluster's network exists on the machine: namespaces, links, FORWARD rules."""
        cid = self.state["id"]
        names = _run("ip", "netns", "list", check=False).stdout.split()
        netns = [n for n in names if n.startswith(f"{PREFIX}-{cid}-")]
        links = [link["ifname"] for link in json.loads(_run("ip", "-j", "link", check=False).stdout or "[]")
                 if link["ifname"] == self.state["bridge"] or link["ifname"].startswith(f"{PREFIX}{cid}-")]
        rules = []
        if shutil.which("iptables"):
            rules = [r for r in _run("iptables", "-S", "FORWARD", check=False).stdout.splitlines()
                     if f"hedgefs-{cid}" in r]
        return {"netns": netns, "links": links, "forward_rules": rules}

    def _forward_rule(self, op: str) -> list[str]:
        b = self.state["bridge"]
        return [op, "FORWARD", "-i", b, "-o", b, "-m", "comment", "--comment", f"hedgefs-{self.state['id']}",
                "-j", "ACCEPT"]

    # ------------------------------------------------------------------ queries

    @property
    def gateway(self) -> str:
        """The root namespace's address on the bridge: where the NameNode listens."""
        return self.state["gateway"]

    @property
    def hosts(self) -> list[str]:
        return list(self.state["hosts"])

    @property
    def racks(self) -> list[str]:
        return sorted({h["rack"] for h in self.state["hosts"].values()}, key=lambda r: int(r[4:]))

    def host(self, name: str) -> dict:
        return self.state["hosts"][name]

    def hosts_of(self, target: str) -> list[str]:
        """The hosts a target names: ``host3`` itself, or every host of ``rack2``."""
        if target in self.state["hosts"]:
            return [target]
        return [h for h, e in self.state["hosts"].items() if e["rack"] == target]

    def exec_prefix(self, host: str) -> list[str]:
        """The command prefix that runs a program on ``host`` (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.host(host)["netns"]]

    def rack_subnet(self, rack: str) -> str:
        base = int(ipaddress.ip_network(self.state["subnet"]).network_address)
        return f"{ipaddress.ip_address(base + 32 * int(rack[4:]))}/27"

    # ------------------------------------------------------------------ faults

    def partition(self, target: str) -> list[str]:
        """Cut ``target`` (a host, or a rack) off from everything outside it: inside each of its
        hosts' namespaces, drop every packet to or from an address outside it. Its own hosts still
        reach each other. Returns the hosts cut."""
        hosts = self.hosts_of(target)
        inside = f"{self.host(target)['address']}/32" if target in self.state["hosts"] else self.rack_subnet(target)
        for host in hosts:
            ns = self.host(host)["netns"]
            self._clear(ns)
            _run("ip", "netns", "exec", ns, "iptables", "-A", "INPUT", "-i", "eth0", "!", "-s", inside, "-j", "DROP")
            _run("ip", "netns", "exec", ns, "iptables", "-A", "OUTPUT", "-o", "eth0", "!", "-d", inside, "-j", "DROP")
            self.host(host)["partitioned"] = target
        return hosts

    def heal(self, target: str | None = None) -> list[str]:
        """Undo partitions of ``target``'s hosts (every host: None). Returns the hosts healed."""
        hosts = self.hosts_of(target) if target else self.hosts
        healed = []
        for host in hosts:
            if self.host(host).pop("partitioned", None):
                self._clear(self.host(host)["netns"])
                healed.append(host)
        return healed

    def partitioned(self) -> dict[str, str]:
        """host -> what it was cut off with (itself or its rack)."""
        return {h: e["partitioned"] for h, e in self.state["hosts"].items() if e.get("partitioned")}

    @staticmethod
    def _clear(ns: str) -> None:
        if shutil.which("iptables") is None:
            raise HostsUnavailable("iptables", "a partition needs `iptables` on PATH (Debian: apt-get install iptables)")
        _run("ip", "netns", "exec", ns, "iptables", "-F", "INPUT")
        _run("ip", "netns", "exec", ns, "iptables", "-F", "OUTPUT")


def _bridged_traffic_filtered() -> bool:
    """Would traffic between two hosts (bridged, not routed) meet a FORWARD chain that drops it?
    Only when br_netfilter hands bridged packets to iptables and FORWARD's policy is not ACCEPT
    (a Docker host's is DROP)."""
    try:
        with open("/proc/sys/net/bridge/bridge-nf-call-iptables") as f:
            if f.read().strip() != "1":
                return False
    except OSError:
        return False
    if shutil.which("iptables") is None:
        return False
    policy = _run("iptables", "-S", "FORWARD", check=False).stdout.splitlines()
    return bool(policy) and policy[0].strip() != "-P FORWARD ACCEPT"
