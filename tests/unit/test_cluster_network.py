"""The multi-host launcher's plan (cluster/network.py): hosts dealt to racks, the command lines
that put a DataNode on its host. Making the namespaces is tests/integration/test_cluster_hosts.py."""

import pathlib

import pytest

from hedgefs.cluster.commands import datanode_command, namenode_command
from hedgefs.cluster.launcher import Options
from hedgefs.cluster.network import layout


def test_hosts_go_to_racks_in_contiguous_runs_as_even_as_they_go():
    assert layout(12, 3) == [(f"host{h}", (h - 1) // 4 + 1) for h in range(1, 13)]
    racks = [r for _, r in layout(10, 3)]
    assert racks == [1, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    assert layout(1, 1) == [("host1", 1)]


@pytest.mark.parametrize("hosts, racks, why", [(3, 4, "--racks must be 1..3"), (9, 8, "--racks must be 1..7"),
                                               (31, 1, "at most 30 hosts a rack"), (4, 0, "--racks must be")])
def test_an_impossible_layout_says_why(hosts, racks, why):
    with pytest.raises(ValueError, match=why):
        layout(hosts, racks)


def test_a_datanode_on_a_host_binds_its_address_and_says_its_host_and_rack():
    import dataclasses

    options = dataclasses.asdict(Options())
    args = datanode_command("dn3", 0, pathlib.Path("/d"), "198.18.7.1:8020", options,
                            place={"host_id": "host3", "address": "198.18.7.65", "rack": "/rack2"})
    def value(flag: str) -> str:
        return args[args.index(flag) + 1]

    assert (value("--host"), value("--host-id"), value("--rack")) == ("198.18.7.65", "host3", "/rack2")
    assert "--host" not in datanode_command("dn3", 0, pathlib.Path("/d"), "127.0.0.1:8020", options)
    assert namenode_command(0, pathlib.Path("/n"), options, host="198.18.7.1")[-2:] == ["--host", "198.18.7.1"]
    assert "--host" not in namenode_command(0, pathlib.Path("/n"), options)
