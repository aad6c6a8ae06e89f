"""A multi-host cluster on one machine: each host a network namespace with its own address on a
bridge the launcher makes (`hedgefs cluster up --hosts N --racks R`, cluster/network.py).

A host killed (all its DataNodes SIGKILLed) and a rack partitioned (iptables in its hosts'
namespaces) leave every file readable byte-exact; `cluster down` leaves no namespace, veth, bridge
or rule behind; without root or `ip` the launcher says so in one line. Needs root and iproute2:
skipped otherwise, saying which.

Placement is by host and rack (at most m units of a group in a rack): a whole rack of more than
m DataNodes can go too, shown on real processes without root in test_placement_racks.py and in
namespaces by bench/placement_hosts.py (its result in bench/results/).
"""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import assert_one_line_error, client, run_cli, start_cluster, wait_until
from hedgefs.cluster.network import HostNetwork
from hedgefs.proto import hedgefs_pb2 as pb

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("iptables") is None,
    reason="hosts in network namespaces need root, `ip` and `iptables`")

POLICY = "RS-3-2-64k"          # m = 2: a rack here has 2 hosts of one DataNode each
BLOCK = 128 * 1024


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("hosts"), datanodes=6, hosts=6, racks=3, policy=POLICY,
                      block_size=BLOCK)
    yield c
    c.down()


def _content(n: int, salt: int) -> bytes:
    return bytes((i * 131 + salt) % 251 for i in range(n))


def _netns_of(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/ns/net")


def test_each_host_is_a_namespace_of_its_own_with_its_address_host_and_rack(hosts):
    net = hosts.network
    assert net.racks == ["rack1", "rack2", "rack3"]
    assert [net.host(h)["rack"] for h in net.hosts] == ["rack1", "rack1", "rack2", "rack2", "rack3", "rack3"]
    namespaces = {_netns_of(hosts.pid(dn)) for dn in hosts.datanode_ids}
    assert len(namespaces) == 6 and _netns_of(os.getpid()) not in namespaces
    report = hosts.namenode_rpc("namenode", "Report", pb.Empty())
    registered = {d.id: d.address.rsplit(":", 1)[0] for d in report.datanodes}
    assert registered == {dn: net.host(hosts.datanode_host(dn))["address"] for dn in hosts.datanode_ids}
    assert all(a.startswith("198.1") for a in registered.values())        # 198.18.0.0/15: test addresses
    assert hosts.namenode.startswith(net.gateway + ":")
    import urllib.request

    dn3 = hosts.datanode_address("dn3").rsplit(":", 1)[0]
    with urllib.request.urlopen(f"http://{dn3}:{hosts.state['datanodes']['dn3']['http_port']}/health",
                                timeout=10) as reply:
        assert "host host3 rack /rack2" in reply.read().decode().splitlines()


def test_a_killed_host_and_a_partitioned_rack_leave_every_file_readable(hosts):
    files = {f"/hosts/f{i}": _content(n, i) for i, n in enumerate([1, 64 * 1024 + 1, 3 * BLOCK * 2 + 777])}
    with client(hosts.namenode) as fs:
        fs.mkdir("/hosts", parents=True)
        for path, data in files.items():
            fs.write_bytes(path, data)
    try:
        hosts.kill("dn1")                                       # host1: its only DataNode
        with client(hosts.namenode) as fs:
            assert {p: fs.read_bytes(p) for p in files} == files
        hosts.start("dn1")
        hosts.wait_live(["dn1"])
        assert hosts.partition("rack2") == ["host3", "host4"]
        assert hosts.network.partitioned() == {"host3": "rack2", "host4": "rack2"}
        # Cut off, not down: dropped packets, not refusals; reads hedge or rebuild around them.
        with client(hosts.namenode) as fs:
            assert {p: fs.read_bytes(p) for p in files} == files
        # The CLI, as an operator runs it
        for path, data in files.items():
            got = run_cli("cat", path, namenode=hosts.namenode)
            assert got.code == 0 and got.stdout == data
    finally:
        hosts.heal()
        if not hosts.is_running("dn1"):
            hosts.start("dn1")
    assert hosts.network.partitioned() == {}
    hosts.wait_live(hosts.datanode_ids)


def test_the_cli_kills_and_restarts_a_host_and_partitions_and_heals_a_rack(hosts):
    env = {"HEDGEFS_CLUSTER_DIR": str(hosts.root)}
    killed = run_cli("cluster", "kill", "host5", env=env)
    assert killed.code == 0 and b"dn5" in killed.stdout
    assert not hosts.is_running("dn5")
    assert run_cli("cluster", "restart", "host5", env=env).code == 0
    cut = run_cli("cluster", "partition", "rack1", env=env)
    assert cut.code == 0 and b"host1 host2" in cut.stdout
    status = run_cli("cluster", "status", env=env)
    assert b"(partitioned: rack1)" in status.stdout
    assert run_cli("cluster", "heal", env=env).code == 0
    assert_one_line_error(run_cli("cluster", "partition", "rack9", env=env), "no host or rack 'rack9'")
    assert_one_line_error(run_cli("cluster", "kill", "host9", env=env), "host9", "racks: rack1, rack2, rack3")
    hosts.wait_live(hosts.datanode_ids)


def test_down_removes_every_namespace_veth_bridge_and_rule(tmp_path):
    """A secure cluster of two hosts (TLS between namespaces): it serves, and `down` leaves nothing."""
    c = start_cluster(tmp_path / "c", "secure", datanodes=2, hosts=2, racks=2, policy="REPLICATE-2")
    try:
        net = c.network
        made = net.leftovers()
        assert len(made["netns"]) == 2 and len(made["links"]) == 3   # two veths and the bridge
        with client(c.namenode) as fs:
            fs.write_bytes("/x", b"across namespaces")
            assert fs.read_bytes("/x") == b"across namespaces"
        c.partition("host1")
        ns = net.host("host1")["netns"]
        rules = subprocess.run(["ip", "netns", "exec", ns, "iptables", "-S"], capture_output=True, text=True).stdout
        assert "-j DROP" in rules
    finally:
        c.down()
    assert HostNetwork(c.state["network"]).leftovers() == {"netns": [], "links": [], "forward_rules": []}
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert c.state["network"]["id"] not in names


def test_without_root_or_ip_cluster_up_hosts_says_so_in_one_line(tmp_path):
    root = tmp_path / "nobody"
    root.mkdir()
    root.chmod(0o777)
    tmp_path.chmod(0o755)
    if shutil.which("setpriv"):
        as_nobody = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                                    os.path.join(os.path.dirname(sys.executable), "hedgefs"), "cluster", "up",
                                    "--dir", str(root / "c"), "--hosts", "3"], capture_output=True, text=True)
        assert as_nobody.returncode == 4, as_nobody.stderr
        assert as_nobody.stderr.strip().splitlines() == [
            "hedgefs: cluster up --hosts: hosts in network namespaces need root (run as root, or without --hosts)"]
    no_ip = run_cli("cluster", "up", "--dir", str(root / "c2"), "--hosts", "3", env={"PATH": "/nonexistent"})
    assert_one_line_error(no_ip, "need `ip` on PATH")
    assert no_ip.code == 2
    assert not (root / "c").exists() and not (root / "c2").exists()   # nothing made
