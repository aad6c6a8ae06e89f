"""The active NameNode cut off from etcd alone (issue 24, failure test 3): clients and DataNodes
still reach it, etcd does not. It must stop serving within its lease, the standby takes over,
nothing acknowledged is lost, no two NameNodes are active at once, and healed it comes back as a
standby.

The cut is a real one, made by the kernel: every etcd member listens on a second client port,
nn1 (the victim) is given only those ports, nn2 and everything else the first ones; iptables
drops every loopback packet to or from the second ports (a chain of this test's own, removed
after). Dropped, not refused: nn1's calls to etcd hang until their deadline, as behind a dead
switch. Needs root and iptables (`make iptables` installs Debian's when root); otherwise skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid

import grpc
import pytest

from etcd_support import ETCD, ETCDCTL, SKIP_REASON, EtcdCluster, prefix
from ha_support import DataNodeProcess, NameNodeProcess, active_of, epochs, role, stat, stub
from hedgefs.client.fs import FileSystem
from hedgefs.cluster.etcd import free_ports, member_command
from hedgefs.proto import hedgefs_pb2 as pb

from conftest import pattern, wait_until

TTL_S = 3
NN_ARGS = ("--default-policy", "REPLICATE-3", "--block-size", "262144")
BEFORE, AFTER = pattern(300_000, seed=241), pattern(200_000, seed=242)


def _no_iptables() -> str | None:
    if os.geteuid() != 0:
        return "not root: the etcd partition test needs iptables on loopback"
    if shutil.which("iptables") is None:
        return "iptables is not installed (as root, `make iptables` installs it): partition test skipped"
    r = subprocess.run(["iptables", "-S", "OUTPUT"], capture_output=True, text=True)
    return None if r.returncode == 0 else f"iptables does not work here: {r.stderr.strip()[:120]}"


class TwoDoorEtcd(EtcdCluster):
    """Members that listen on a second client port each (the side door the victim is given)."""

    def __init__(self, log_dir):
        super().__init__(log_dir)
        self.side_ports = dict(zip(self.names, free_ports(len(self.names))))

    def start_member(self, name: str, state: str = "new") -> None:
        cmd = member_command(self.etcd, name, os.path.join(self.dir, name), self.client_ports, self.peer_ports,
                             self.token, state)
        i = cmd.index("--listen-client-urls") + 1
        cmd[i] += f",http://127.0.0.1:{self.side_ports[name]}"
        with open(os.path.join(self.log_dir, f"{name}.log"), "ab") as log:
            self.procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, start_new_session=True)

    def side_url(self, prefix_: str) -> str:
        return "etcd://" + ",".join(f"127.0.0.1:{self.side_ports[n]}" for n in self.names) + "/" + prefix_


class Cut:
    """An iptables chain that drops every loopback packet to or from ``ports``."""

    def __init__(self, ports):
        self.chain = f"HFSCUT{uuid.uuid4().hex[:6].upper()}"
        self.ports = list(ports)
        self.on = False

    def _ipt(self, *args: str, check: bool = True) -> None:
        subprocess.run(["iptables", "-w", "5", *args], check=check, capture_output=True, timeout=15)

    def __enter__(self) -> "Cut":
        self._ipt("-N", self.chain)
        try:
            for port in self.ports:
                self._ipt("-A", self.chain, "-p", "tcp", "--dport", str(port), "-j", "DROP")
                self._ipt("-A", self.chain, "-p", "tcp", "--sport", str(port), "-j", "DROP")
            self._ipt("-I", "OUTPUT", "-o", "lo", "-j", self.chain)
        except BaseException:
            self.heal()
            raise
        self.on = True
        return self

    def heal(self) -> None:
        if self.on:
            self._ipt("-D", "OUTPUT", "-o", "lo", "-j", self.chain, check=False)
            self.on = False
        self._ipt("-F", self.chain, check=False)
        self._ipt("-X", self.chain, check=False)

    def __exit__(self, *exc) -> None:
        self.heal()


@pytest.fixture(scope="module")
def etcd2(tmp_path_factory):
    if ETCD is None or ETCDCTL is None:
        pytest.skip(SKIP_REASON)
    why = _no_iptables()
    if why:
        pytest.skip(why)
    cluster = TwoDoorEtcd(tmp_path_factory.mktemp("etcd"))
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


class Roles:
    """Both NameNodes' roles and epochs, polled all along: (sent at, name, role, epoch)."""

    def __init__(self, nodes):
        self.nodes, self.seen, self.stop = nodes, [], threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            for n in self.nodes:
                sent = time.monotonic()
                try:
                    r = stub(n.address).Report(pb.Empty(), timeout=1).namenode
                    self.seen.append((sent, n.name, r.role, r.epoch))
                except grpc.RpcError:
                    self.seen.append((sent, n.name, "unreachable", 0))
            self.stop.wait(0.05)

    def __enter__(self) -> "Roles":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(10)

    def last_active(self, name: str) -> float | None:
        times = [t for t, n, r, _ in self.seen if n == name and r == "active"]
        return max(times) if times else None

    def dual_actives(self) -> list:
        """Answers "active" with an epoch older than one another NameNode answered active before."""
        newest, bad = 0, []
        for t, name, r, epoch in sorted(self.seen):
            if r != "active":
                continue
            if epoch < newest:
                bad.append((t, name, epoch, newest))
            newest = max(newest, epoch)
        return bad


def test_the_active_cut_off_from_etcd_stops_within_its_lease_and_the_standby_takes_over(etcd2, tmp_path):
    name = prefix("cut")
    a = NameNodeProcess(tmp_path, "nn1", etcd2.side_url(name), *NN_ARGS, lease_ttl_s=TTL_S).start()
    b = dns = None
    try:
        active_of([a])
        b = NameNodeProcess(tmp_path, "nn2", etcd2.url(name), *NN_ARGS, lease_ttl_s=TTL_S).start()
        wait_until(lambda: role(b.address) == f"standby:{a.address}", 15, "nn2 to be a standby naming nn1")
        names = ["dn1", "dn2", "dn3"]
        dns = [DataNodeProcess(tmp_path, n, f"{a.address},{b.address}").start() for n in names]
        epoch_a = stub(a.address).Report(pb.Empty(), timeout=5).namenode.epoch
        wait_until(lambda: epochs(tmp_path, names) == [epoch_a] * 3, 30, "every DataNode to record nn1's epoch")
        acked, failed, stop = [], [], threading.Event()
        with FileSystem(f"{a.address},{b.address}") as fs:
            wait_until(lambda: sum(d.state == "live" for d in stub(a.address).Report(pb.Empty(), timeout=2).datanodes)
                       == 3, 30, "three live DataNodes on nn1")
            fs.write_bytes("/before", BEFORE)

            def writer():   # mkdirs all along, through the client's failover
                i = 0
                while not stop.is_set():
                    path = f"/w/{i:04d}"
                    try:
                        fs.mkdir(path, parents=True)
                        acked.append(path)
                    except Exception as err:   # a clean failure is allowed; it is not acknowledged
                        failed.append((path, repr(err)))
                    i += 1

            thread = threading.Thread(target=writer, daemon=True)
            with Roles([a, b]) as roles:
                thread.start()
                wait_until(lambda: len(acked) >= 5, 30, "the writer to get going on nn1")
                with Cut(etcd2.side_ports.values()) as cut:
                    cut_at = time.monotonic()
                    wait_until(lambda: role(b.address) == "active", 30, "nn2 to take over",
                               detail=lambda: f"nn1: {role(a.address)}; nn2: {role(b.address)}")
                    n_at_takeover = len(acked)
                    wait_until(lambda: len(acked) >= n_at_takeover + 5, 30, "writes to go on through nn2")
                    # nn1 still reaches the DataNodes and the clients; it must not be the active
                    assert role(a.address) != "active"
                    with pytest.raises(grpc.RpcError) as refused:
                        stub(a.address).Mkdir(pb.MkdirRequest(path="/from-the-cut-off"), timeout=10)
                    assert refused.value.code() in (grpc.StatusCode.FAILED_PRECONDITION,
                                                    grpc.StatusCode.UNAVAILABLE), refused.value
                    epoch_b = stub(b.address).Report(pb.Empty(), timeout=5).namenode.epoch
                    assert epoch_b > epoch_a
                    wait_until(lambda: epochs(tmp_path, names) == [epoch_b] * 3, 30,
                               "every DataNode to record nn2's epoch (nn1's commands are refused from now)")
                    cut.heal()
                    wait_until(lambda: role(a.address) == f"standby:{b.address}", 30,
                               "nn1, healed, to come back as a standby of nn2",
                               detail=lambda: f"nn1: {role(a.address)}")
                stop.set()
                thread.join(60)
            last_a = roles.last_active("nn1")
            assert last_a is not None and last_a < cut_at + TTL_S, (last_a, cut_at)   # within its lease
            assert roles.dual_actives() == []
            assert fs.read_bytes("/before") == BEFORE
            fs.write_bytes("/after", AFTER)
            assert fs.read_bytes("/after") == AFTER
        for path in acked:   # nothing acknowledged is lost, on either NameNode's view
            assert stat(b.address, path).is_dir, path
        wait_until(lambda: _exists(a.address, acked[-1]), 15, "nn1's view to follow nn2")
        with pytest.raises(grpc.RpcError) as gone:
            stat(b.address, "/from-the-cut-off")
        assert gone.value.code() == grpc.StatusCode.NOT_FOUND
        assert a.proc.poll() is None and b.proc.poll() is None
        for n in (a, b):   # calls caught by the demotion are refused (NotActive), never an internal error
            log = open(n.log_path, errors="replace").read()
            assert "Traceback" not in log, log[-3000:]
        print(f"acknowledged {len(acked)} mkdirs, {len(failed)} failed cleanly")
    finally:
        for dn in dns or []:
            dn.stop()
        for n in (b, a):
            if n is not None:
                n.stop()


def _exists(address: str, path: str) -> bool:
    try:
        stat(address, path)
        return True
    except grpc.RpcError:
        return False
