"""Round trips through the CLI and the library, at every layout boundary.

Sizes (RS-6-3-64k, 256 KiB internal blocks): 0 B, 1 B, cell-1, cell, cell+1, stripe-1, stripe,
stripe+1, several stripes, group-1, group, group+1, two groups and a partial third.
Data is offset-dependent and not UTF-8, so a misplaced or dropped byte shows.
"""

import hashlib

import pytest

from conftest import CELL, GROUP, STRIPE, assert_one_line_error, pattern, run_cli

SIZES = {
    "0B": 0, "1B": 1, "cell-1": CELL - 1, "cell": CELL, "cell+1": CELL + 1,
    "stripe-1": STRIPE - 1, "stripe": STRIPE, "stripe+1": STRIPE + 1, "3stripes+5": 3 * STRIPE + 5,
    "group-1": GROUP - 1, "group": GROUP, "group+1": GROUP + 1, "2groups+cell+7": 2 * GROUP + CELL + 7,
}


@pytest.mark.parametrize("name", SIZES)
def test_library_round_trip_and_every_range(fs, name):
    size = SIZES[name]
    data = pattern(size, seed=size)
    path = f"/lib/{name}"
    fs.mkdir("/lib", parents=True)
    assert fs.write_bytes(path, data, overwrite=True) == size
    assert fs.read_bytes(path) == data
    assert fs.stat(path).length == size
    with fs.open(path) as f:
        for offset, length in [(0, 1), (CELL - 1, 2), (STRIPE - 3, 7), (size // 2, CELL + 3), (max(size - 5, 0), 100)]:
            assert f.pread(offset, length) == data[offset:offset + length]


@pytest.mark.parametrize("name", SIZES)
def test_cli_put_file_get_file(cluster, tmp_path, name):
    data = pattern(SIZES[name], seed=7)
    local = tmp_path / "in.bin"
    local.write_bytes(data)
    remote = f"/cli/{name}"
    run_cli("mkdir", "-p", "/cli", namenode=cluster.namenode)
    put = run_cli("put", "-f", str(local), remote, namenode=cluster.namenode)
    assert put.code == 0, put.stderr
    out = tmp_path / "out.bin"
    got = run_cli("get", remote, str(out), namenode=cluster.namenode)
    assert got.code == 0, got.stderr
    assert out.read_bytes() == data


def test_cli_stdin_to_cat_to_stdout_binary_safe(cluster):
    blobs = [pattern(n, seed=n) for n in (0, 1, STRIPE + 1, GROUP + CELL)]
    blobs.append(bytes(range(256)) * 4 + b"\xff\xfe\x00\r\n\x80")
    paths = []
    assert run_cli("mkdir", "-p", "/stdin", namenode=cluster.namenode).code == 0
    for i, blob in enumerate(blobs):
        path = f"/stdin/{i}"
        put = run_cli("put", "-f", "-", path, namenode=cluster.namenode, input=blob)
        assert put.code == 0, put.stderr
        paths.append(path)
    one = run_cli("cat", paths[2], namenode=cluster.namenode)
    assert one.code == 0 and one.stdout == blobs[2]
    every = run_cli("cat", *paths, namenode=cluster.namenode)
    assert every.code == 0, every.stderr
    assert hashlib.sha256(every.stdout).hexdigest() == hashlib.sha256(b"".join(blobs)).hexdigest()
    to_stdout = run_cli("get", paths[3], "-", namenode=cluster.namenode)
    assert to_stdout.code == 0 and to_stdout.stdout == blobs[3]


def test_stat_json_lists_groups_and_units(cluster):
    import json

    data = pattern(GROUP + 10)
    assert run_cli("mkdir", "/stat", namenode=cluster.namenode).code == 0
    assert run_cli("put", "-f", "-", "/stat/f", namenode=cluster.namenode, input=data).code == 0
    result = run_cli("stat", "--json", "/stat/f", namenode=cluster.namenode)
    assert result.code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {"path", "type", "length", "policy", "owner", "group", "permission", "mtime_ms", "mtime", "atime_ms",
                         "groups"}
    assert doc["type"] == "file" and doc["length"] == GROUP + 10 and doc["policy"] == "RS-6-3-64k"
    assert [g["length"] for g in doc["groups"]] == [GROUP, 10]
    whole, tail = doc["groups"]
    assert [u["index"] for u in whole["units"]] == list(range(9))
    assert [u["index"] for u in tail["units"]] == [0, 6, 7, 8]   # 10 bytes: units 1-5 hold none, not stored
    for g in doc["groups"]:
        assert len({u["datanode"] for u in g["units"]}) == len(g["units"])
        assert all(set(u) == {"index", "datanode", "length"} for u in g["units"])
    assert [u["length"] for u in tail["units"]] == [10, 10, 10, 10]
    directory = json.loads(run_cli("stat", "--json", "/stat", namenode=cluster.namenode).stdout)
    assert directory["type"] == "directory" and "groups" not in directory


def test_namespace_verbs(cluster):
    nn = cluster.namenode
    assert run_cli("mkdir", "-p", "/ns/a/b", namenode=nn).code == 0
    assert run_cli("put", "-", "/ns/a/b/f", namenode=nn, input=b"hello").code == 0
    assert run_cli("mv", "/ns/a", "/ns/z", namenode=nn).code == 0
    listing = run_cli("ls", "-R", "/ns", namenode=nn)
    assert listing.code == 0
    paths = [line.split()[-1] for line in listing.stdout.decode().splitlines()]
    assert paths == ["/ns/z", "/ns/z/b", "/ns/z/b/f"]
    assert run_cli("cat", "/ns/z/b/f", namenode=nn).stdout == b"hello"
    assert_one_line_error(run_cli("rm", "/ns/z", namenode=nn), "not empty")
    assert run_cli("rm", "-r", "/ns/z", namenode=nn).code == 0
    assert_one_line_error(run_cli("cat", "/ns/z/b/f", namenode=nn), "/ns/z/b/f")


def test_policy_is_inherited_from_the_nearest_directory(cluster):
    nn = cluster.namenode
    assert run_cli("mkdir", "-p", "/pol/deep/er", namenode=nn).code == 0
    assert run_cli("ec", "set-policy", "/pol", "RS-3-2-64k", namenode=nn).code == 0
    got = run_cli("ec", "get-policy", "/pol/deep/er", namenode=nn)
    assert got.stdout.decode().split()[0] == "RS-3-2-64k" and "/pol" in got.stdout.decode()
    data = pattern(3 * 65536 * 2 + 17)
    assert run_cli("put", "-", "/pol/deep/er/f", namenode=nn, input=data).code == 0
    assert run_cli("cat", "/pol/deep/er/f", namenode=nn).stdout == data
    import json
    doc = json.loads(run_cli("stat", "--json", "/pol/deep/er/f", namenode=nn).stdout)
    assert doc["policy"] == "RS-3-2-64k" and len(doc["groups"][0]["units"]) == 5


def test_write_from_a_raw_pipe_that_returns_short_reads(fs):
    """A pipe returns what it has; only b"" is the end. Nothing may be silently dropped."""
    import os
    import threading

    data = pattern(GROUP + STRIPE + 999, seed=42)
    r, w = os.pipe()

    def feed():
        with os.fdopen(w, "wb", buffering=0) as out:
            for start in range(0, len(data), 100_000):
                out.write(data[start:start + 100_000])

    feeder = threading.Thread(target=feed)
    feeder.start()
    fs.mkdir("/pipe", parents=True)
    with os.fdopen(r, "rb", buffering=0) as source:
        assert fs.write("/pipe/raw", source, overwrite=True) == len(data)
    feeder.join()
    assert fs.read_bytes("/pipe/raw") == data
