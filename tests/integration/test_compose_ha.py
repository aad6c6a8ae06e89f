"""docker-compose.yml's `ha` profile (HEDGEFS_HA=1 docker compose --profile ha up): checked
statically, and run as local processes the way tests/integration/test_compose.py runs the default services
(its docstring says what is remapped; an etcd member's /usr/local/bin/etcd is the etcd on PATH,
Debian's etcd-server here), with a kill of the active NameNode.
"""

import os
import random
import re
import shlex
import signal
import subprocess

import grpc
import pytest
from compose_run import (
    Processes,
    Remap,
    channel_to,
    up,
    wait_registered,
)
from compose_support import (
    DATANODES,
    dockerfile,
    environment,
    flag_value,
    load_compose,
    volume_mounts,
)

from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc

from conftest import wait_until

ETCD_MEMBERS = ["etcd-1", "etcd-2", "etcd-3"]
HA = {"HEDGEFS_HA": "1"}


def test_ha_profile_is_three_etcd_members_and_a_standby_namenode_on_one_prefix():
    compose, plain = load_compose(HA), load_compose()
    ha = {n for n, s in compose["services"].items() if "ha" in (s.get("profiles") or [])}
    assert ha == {"namenode-2", *ETCD_MEMBERS}
    meta = environment(compose["services"]["namenode"])["HEDGEFS_META"]
    assert meta == "etcd://etcd-1:2379,etcd-2:2379,etcd-3:2379/hedgefs"
    assert environment(compose["services"]["namenode-2"])["HEDGEFS_META"] == meta
    assert environment(plain["services"]["namenode"])["HEDGEFS_META"] == ""   # without HEDGEFS_HA: SQLite
    assert compose["services"]["namenode-2"]["command"] == compose["services"]["namenode"]["command"]
    for name in DATANODES:
        assert flag_value(compose["services"][name]["command"], "--namenode") == "namenode:8020,namenode-2:8020"
    assert environment(compose["services"]["client"])["HEDGEFS_NAMENODE"] == "namenode:8020,namenode-2:8020"
    members = {m: compose["services"][m]["command"] for m in ETCD_MEMBERS}
    for member, command in members.items():
        assert re.fullmatch(r"[\w./-]+:v3\.5\.(\d+)", compose["services"][member]["image"]), "etcd 3.5.6 or newer"
        assert int(compose["services"][member]["image"].rsplit(".", 1)[1]) >= 6
        assert flag_value(command, "--name") == member
        assert flag_value(command, "--advertise-client-urls") == f"http://{member}:2379"
        assert flag_value(command, "--initial-cluster") == ",".join(f"{m}=http://{m}:2380" for m in ETCD_MEMBERS)
        assert flag_value(command, "--max-txn-ops") == "1024"   # the NameNode's --etcd-max-txn-ops default
        assert flag_value(command, "--auto-compaction-mode") and flag_value(command, "--quota-backend-bytes")
        assert [t for _s, t in volume_mounts(compose["services"][member])] == [flag_value(command, "--data-dir")]
        assert not compose["services"][member].get("ports"), f"{member}: etcd is not published"


def test_ha_profile_runs_as_local_processes_and_survives_a_kill_of_the_active(tmp_path):
    """`HEDGEFS_HA=1 docker compose --profile ha up`, then `docker compose kill` of the active
    NameNode: the etcd members run as Debian's etcd here (the image's /usr/local/bin/etcd)."""
    import shutil

    if not shutil.which("etcd") or not shutil.which("etcdctl"):
        pytest.skip("etcd is not installed (as root, `make etcd` installs Debian's etcd-server): compose HA run skipped")
    compose, image = load_compose(HA), dockerfile()
    remap = Remap(compose, tmp_path, profiles=("ha",))
    procs = Processes(tmp_path)
    try:
        up(compose, image, remap, procs, profiles=("ha",))
        nn = {n: f"127.0.0.1:{remap.ports[(n, '8020')]}" for n in ("namenode", "namenode-2")}
        wait_registered(procs, nn["namenode"], DATANODES)   # the first up is the active (or its standby)
        client = compose["services"]["client"]
        client_env = remap.env("client", image["ENV"], environment(client))
        assert client_env["HEDGEFS_NAMENODE"] == f"{nn['namenode']},{nn['namenode-2']}"
        client_argv = remap.entrypoint(client.get("entrypoint") or image["ENTRYPOINT"])

        def run_client(*args: str, input: bytes | None = None) -> subprocess.CompletedProcess:
            done = subprocess.run(client_argv + list(args), env=client_env, input=input, capture_output=True,
                                  timeout=90, cwd=tmp_path)
            assert done.returncode == 0, f"client {shlex.join(args)} exited {done.returncode}: {done.stderr.decode()}"
            return done

        def roles() -> dict[str, str]:
            out = {}
            for name, address in nn.items():
                try:
                    with channel_to(address, None, "namenode.hedgefs") as channel:
                        out[name] = hedgefs_pb2_grpc.NameNodeStub(channel).Report(pb.Empty(), timeout=2).namenode.role
                except grpc.RpcError:
                    out[name] = "down"
            return out

        def one_active():
            now = roles()
            return now if sorted(now.values()) == ["active", "standby"] else None
        found = wait_until(one_active, 30, "one active NameNode and one standby", detail=lambda: str(roles()))
        active = next(n for n, r in found.items() if r == "active")
        data = random.Random(24).randbytes(6 * 1024 * 1024 + 99)
        run_client("put", "-", "/ha-check.bin", input=data)
        os.killpg(procs.procs[active][0].pid, signal.SIGKILL)   # docker compose kill <the active>
        other = next(n for n in nn if n != active)

        def serving() -> bool:   # the new active, with every DataNode registered to it as the active
            try:
                with channel_to(nn[other], None, "namenode.hedgefs") as channel:
                    r = hedgefs_pb2_grpc.NameNodeStub(channel).Report(pb.Empty(), timeout=2)
                return r.namenode.role == "active" and sum(d.state == "live" for d in r.datanodes) == len(DATANODES)
            except grpc.RpcError:
                return False
        wait_until(serving, 30, f"{other} to be the active with {len(DATANODES)} live DataNodes",
                   detail=lambda: str(roles()))
        # (Read only now: until the DataNodes have registered with the new active, it hands out the
        # locations of those that have, and a read right after the kill can be "data unavailable":
        # a fresh-clone run caught one with 3 of 9 registered. Left open in issue 24's notes.)
        assert run_client("cat", "/ha-check.bin").stdout == data   # the client fails over by itself
        run_client("put", "-", "/after-kill.bin", input=data[:100_000])
        assert run_client("cat", "/after-kill.bin").stdout == data[:100_000]
    finally:
        procs.stop_all()
