"""Ports a process restarts on are picked outside the kernel's ephemeral range, from which every
outgoing connection draws its source port: a chaos run's NameNode could not restart on its HTTP
port ("Address already in use"), taken meanwhile by some client's connection."""

import socket

from hedgefs.plumbing import _ephemeral_range, stable_port


def test_stable_ports_are_outside_the_ephemeral_range_free_and_never_repeated():
    ephemeral = _ephemeral_range()
    ports = [stable_port() for _ in range(50)]
    assert len(set(ports)) == 50
    assert not [p for p in ports if p in ephemeral]
    for port in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))   # free: a server can take it


def test_a_local_cluster_records_stable_ports_for_every_process(tmp_path):
    from conftest import start_cluster

    cluster = start_cluster(tmp_path / "c", datanodes=3)
    try:
        state = cluster.state
        ports = [state["namenode"]["port"], state["namenode"]["http_port"]]
        ports += [p for d in state["datanodes"].values() for p in (d["port"], d["http_port"])]
        assert all(p and p not in _ephemeral_range() for p in ports), ports
        cluster.kill("namenode")
        cluster.start("namenode")          # on the same ports
        assert [cluster.state["namenode"]["port"], cluster.state["namenode"]["http_port"]] == ports[:2]
    finally:
        cluster.down()
