"""The helpers of the durability tests (test_durability.py, test_scrubber_repair.py,
test_replication.py): fsck and report through the library and the CLI, where units are on disk,
puts paused mid-group, and putting a cluster back as it was."""

import json
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest
from conftest import (
    CELL,
    assert_one_line_error,
    cli_env,
    run_cli,
    wait_until,
)

from hedgefs.client.admin import DataNodeReport, FsckReport
from hedgefs.client.config import HedgeConfig
from hedgefs.client.errors import NotFound
from hedgefs.client.fs import FileSystem
from hedgefs.cluster.launcher import LocalCluster
from hedgefs.datanode.storage import parse_name

NO_HEDGE = HedgeConfig(enabled=False)



def fsck(fs: FileSystem, path: str = "/") -> FsckReport:
    return fs.admin.fsck(path)


def fsck_cli(nn: str, path: str = "/") -> dict:
    result = run_cli("fsck", path, "--json", namenode=nn)
    doc = json.loads(result.stdout)
    assert result.code == (1 if doc["status"] == "CORRUPT" else 0), result.stderr
    return doc


def report(fs: FileSystem) -> dict[str, DataNodeReport]:
    return {d.id: d for d in fs.admin.report().datanodes}


def report_cli(nn: str) -> dict[str, dict]:
    result = run_cli("admin", "report", "--json", namenode=nn)
    assert result.code == 0, result.stderr
    return {row["id"]: row for row in json.loads(result.stdout)["datanodes"]}


def stat_cli(nn: str, path: str) -> dict:
    result = run_cli("stat", "--json", path, namenode=nn)
    assert result.code == 0, result.stderr
    return json.loads(result.stdout)


def holders(fs: FileSystem, path: str, group: int = 0) -> dict[int, str]:
    """unit index -> DataNode, for one group of a file (units on dead DataNodes left out)."""
    return {i: u.datanode_id for i, u in fs.stat(path).groups[group].units.items()}


def unit_file(cluster: LocalCluster, dn: str, group_id: int, index: int) -> Path:
    """The block file of a unit on a DataNode (its newest version; a path that does not exist if none)."""
    d = cluster.root / dn / "blocks" / f"{group_id % 256:02x}"
    found = sorted(d.glob(f"{group_id}_{index}_*.blk"), key=lambda p: parse_name(p.name)[3])
    return found[-1] if found else d / f"{group_id}_{index}_1.blk"


def stored_units(cluster: LocalCluster) -> list[Path]:
    """Every finalized unit file on every DataNode."""
    return sorted(p for dn in cluster.datanode_ids for p in (cluster.root / dn / "blocks").glob("*/*.blk"))


def unit_names(cluster: LocalCluster) -> Counter:
    """(group id, unit index) of every finalized unit on any DataNode, counted (a copy each)."""
    return Counter(parse_name(p.name)[:2] for p in stored_units(cluster))


def temp_units(cluster: LocalCluster, dn: str) -> list[Path]:
    """A DataNode's unfinished writes (its tmp/ directory), block files only."""
    tmp = cluster.root / dn / "tmp"
    return sorted(p for p in tmp.iterdir() if p.suffix == ".blk") if tmp.exists() else []


def writing(cluster: LocalCluster, holds=lambda sizes: bool(sizes)) -> list[str]:
    """DataNodes whose unfinished units' sizes (bytes received so far) satisfy ``holds``."""
    out = []
    for dn in cluster.datanode_ids:
        sizes = []
        for p in temp_units(cluster, dn):
            try:
                sizes.append(p.stat().st_size)
            except FileNotFoundError:
                pass     # finished or dropped meanwhile
        if holds(sizes):
            out.append(dn)
    return out


def writing_now(cluster: LocalCluster, cells: int) -> list[str]:
    """DataNodes holding a temp unit that has received exactly `cells` cells so far."""
    return writing(cluster, lambda sizes: cells * CELL in sizes)


def wait_mid_group(cluster: LocalCluster, cells: int = 2) -> list[str]:
    """Wait until a put is `cells` cells into a block group on 9 DataNodes; returns those DataNodes."""
    def nine() -> list[str] | None:
        dns = writing_now(cluster, cells)
        return dns if len(dns) == 9 else None

    return wait_until(nine, 20, f"9 DataNodes holding {cells} cells of the group being written",
                      detail=lambda: f"temp units: { {dn: temp_units(cluster, dn) for dn in cluster.datanode_ids} }")


def assert_invisible(fs: FileSystem, nn: str, path: str) -> None:
    with pytest.raises(NotFound):
        fs.stat(path)
    parent = path.rsplit("/", 1)[0] or "/"
    assert path not in [e.path for e in fs.list(parent)]
    listing = run_cli("ls", parent, namenode=nn)
    assert listing.code == 0, listing.stderr
    assert path.encode() not in listing.stdout
    assert_one_line_error(run_cli("stat", path, namenode=nn), "no such file")


def restore(cluster: LocalCluster, fs: FileSystem, timeout: float = 60) -> None:
    """Bring every process back (thaw frozen ones, start stopped ones) and wait for HEALTHY."""
    for name in ["namenode", *cluster.datanode_ids]:
        state = cluster.process_state(name)
        if state == "frozen":
            cluster.thaw(name)
        elif state == "stopped":
            cluster.start(name)
    cluster.wait_live(cluster.datanode_ids, timeout)
    wait_until(lambda: fsck(fs).status == "HEALTHY", timeout, "fsck HEALTHY before the scenario",
               detail=lambda: str(fsck(fs)))
    wait_until(lambda: settled(cluster, fs), timeout, "the DataNodes to settle before the scenario",
               detail=lambda: f"copies {[n for n, c in unit_names(cluster).items() if c > 1]}, "
                              f"report {[(d, r.units) for d, r in report(fs).items()]}")


def settled(cluster: LocalCluster, fs: FileSystem) -> bool:
    """No unit on two disks (stale copies deleted), no temp files, and every DataNode's last
    heartbeat agrees with its disk."""
    names = unit_names(cluster)
    if any(c > 1 for c in names.values()) or any(temp_units(cluster, dn) for dn in cluster.datanode_ids):
        return False
    rows = report(fs)
    return all(rows[dn].units == len(list((cluster.root / dn / "blocks").glob("*/*.blk")))
               for dn in cluster.datanode_ids)


class BackgroundPut(threading.Thread):
    def __init__(self, fs: FileSystem, path: str, source):
        super().__init__(daemon=True)
        self.fs, self.path, self.source = fs, path, source
        self.length: int | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.length = self.fs.write(self.path, self.source)
        except BaseException as err:  # noqa: BLE001 - handed to the test
            self.error = err


class PipedPut:
    """`hedgefs put - PATH` in a subprocess, fed by the test through a pipe."""

    def __init__(self, nn: str, path: str):
        env = cli_env(nn)
        self.proc = subprocess.Popen([sys.executable, "-m", "hedgefs", "put", "-", path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)

    def feed(self, data: bytes) -> bool:
        """Write to the put's stdin (returns once it has read all but a pipe buffer); False if it is gone."""
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
            return True
        except BrokenPipeError:
            return False

    def why(self) -> str:
        """Why feeding failed: what the put said on stderr (it closed its stdin, so it is exiting)."""
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            return "(the put stopped reading its stdin but did not exit)"
        return self.proc.stderr.read().decode(errors="replace")

    def finish(self, timeout: float = 60) -> tuple[int, str]:
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass  # the put gave up before reading everything
        self.proc.stdin = None
        _, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, err.decode(errors="replace")

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except BrokenPipeError:
                pass


# ---------------------------------------------------------------------------- fixtures
