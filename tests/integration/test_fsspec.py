"""hedgefs:// through fsspec (hedgefs/fsspec) against a real local cluster: fsspec's own abstract
test suite (copy, get, put, open, pipe: every test of the installed fsspec, none skipped), then
each method mapped onto the library, the URL forms, the storage options and the errors.

One insecure cluster for the module (and a secure one for the credentials option only).
"""

import posixpath
import subprocess
import sys

import fsspec
import pytest
from fsspec.callbacks import Callback
from fsspec.tests import abstract

from conftest import CELL, GROUP, STRIPE, cli_env, pattern, start_cluster
from hedgefs.fsspec import HedgeFileSystem

ROOT = "/abstract"


@pytest.fixture(scope="module")
def hcluster(tmp_path_factory):
    c = start_cluster(tmp_path_factory.mktemp("fsspec-cluster"))
    yield c
    c.down()


@pytest.fixture(scope="module")
def hfs(hcluster):
    fs = fsspec.filesystem("hedgefs", namenode=hcluster.namenode)
    yield fs
    fs.close()


# ---------------------------------------------------------------------------- fsspec's own suite

class HedgefsFixtures(abstract.AbstractFixtures):
    @pytest.fixture
    def fs(self, hfs):
        return hfs

    @pytest.fixture
    def fs_join(self):
        return posixpath.join

    @pytest.fixture
    def fs_path(self, hfs):
        hfs.makedirs(ROOT, exist_ok=True)
        return ROOT


class TestHedgefsCopy(abstract.AbstractCopyTests, HedgefsFixtures):
    pass


class TestHedgefsGet(abstract.AbstractGetTests, HedgefsFixtures):
    pass


class TestHedgefsPut(abstract.AbstractPutTests, HedgefsFixtures):
    pass


class TestHedgefsOpen(abstract.AbstractOpenTests, HedgefsFixtures):
    pass


class TestHedgefsPipe(abstract.AbstractPipeTests, HedgefsFixtures):
    pass


# ---------------------------------------------------------------------------- URLs and options

def test_url_forms_name_the_namenode(hcluster, hfs, monkeypatch):
    hfs.pipe("/urls/a.bin", b"abc")
    fs, path = fsspec.core.url_to_fs(f"hedgefs://{hcluster.namenode}/urls/a.bin")
    assert isinstance(fs, HedgeFileSystem) and fs.namenode == hcluster.namenode and path == "/urls/a.bin"
    with fsspec.open(f"hedgefs://{hcluster.namenode}/urls/a.bin") as f:
        assert f.read() == b"abc"
    monkeypatch.setenv("HEDGEFS_NAMENODE", hcluster.namenode)
    fs, path = fsspec.core.url_to_fs("hedgefs:///urls/a.bin", skip_instance_cache=True)
    assert fs.namenode == hcluster.namenode and path == "/urls/a.bin" and fs.cat(path) == b"abc"
    assert fs.unstrip_protocol("/urls/a.bin") == f"hedgefs://{hcluster.namenode}/urls/a.bin"
    assert HedgeFileSystem._strip_protocol("hedgefs://h:1/x/y/") == "/x/y"
    assert HedgeFileSystem._strip_protocol("x/y") == "/x/y"
    assert HedgeFileSystem._get_kwargs_from_urls("hedgefs://nn/x") == {"namenode": "nn:8020"}
    fs.close()


def test_storage_options_policy_and_hedging(hcluster):
    fs = HedgeFileSystem(namenode=hcluster.namenode, policy="REPLICATE-3", hedge_threshold_ms=40,
                         skip_instance_cache=True)
    try:
        fs.pipe("/opts/r3.bin", pattern(1000))
        assert fs.info("/opts/r3.bin")["policy"] == "REPLICATE-3"
        assert fs.client.hedge.threshold_ms == 40 and fs.client.hedge.enabled
    finally:
        fs.close()
    off = HedgeFileSystem(namenode=hcluster.namenode, hedge=False, skip_instance_cache=True)
    assert not off.client.hedge.enabled
    off.close()
    with pytest.raises(ValueError, match="hedge threshold must be > 0 ms"):
        HedgeFileSystem(namenode=hcluster.namenode, hedge_threshold_ms=-1, skip_instance_cache=True)


def test_a_pickled_filesystem_reads_on_the_other_side(hcluster, hfs):
    import pickle

    hfs.pipe("/pickle/a.bin", b"pickled")
    again = pickle.loads(pickle.dumps(hfs))
    assert again.namenode == hcluster.namenode and again.cat("/pickle/a.bin") == b"pickled"


def test_hedgefs_cat_never_imports_fsspec(hcluster, hfs):
    hfs.pipe("/startup/one", b"1")
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "hedgefs", "cat", "/startup/one"],
                          capture_output=True, env=cli_env(hcluster.namenode), timeout=60)
    assert proc.returncode == 0 and proc.stdout == b"1"
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.decode().splitlines()]
    assert "hedgefs.client.fs" in imported and not [m for m in imported if m.split(".")[0] == "fsspec"]


# ---------------------------------------------------------------------------- namespace

def test_info_and_ls_give_size_type_mtime_policy_owner_mode(hfs):
    hfs.pipe("/meta/d/f.bin", pattern(12345))
    info = hfs.info("/meta/d/f.bin")
    assert info["name"] == "/meta/d/f.bin" and info["size"] == 12345 and info["type"] == "file"
    assert info["policy"] == "RS-6-3-64k" and info["owner"] and info["mode"] & 0o400 and info["mtime"] > 1.6e9
    assert hfs.ls("/meta", detail=False) == ["/meta/d"]
    (entry,) = hfs.ls("/meta/d")
    assert entry == info
    assert hfs.ls("/meta/d/f.bin", detail=False) == ["/meta/d/f.bin"]          # a file lists as itself
    assert hfs.find("/meta", withdirs=True) == ["/meta", "/meta/d", "/meta/d/f.bin"]
    assert hfs.modified("/meta/d/f.bin") == hfs.created("/meta/d/f.bin")
    assert abs(hfs.modified("/meta/d/f.bin").timestamp() - info["mtime"]) < 1e-3
    with pytest.raises(NotImplementedError, match="no creation time for a directory"):
        hfs.created("/meta/d")


def test_mkdir_makedirs_rm_rmdir(hfs):
    hfs.mkdir("/ns/a/b")                                    # parents made
    with pytest.raises(FileExistsError, match="directory exists: /ns/a/b"):
        hfs.mkdir("/ns/a/b")
    hfs.makedirs("/ns/a/b", exist_ok=True)
    with pytest.raises(FileExistsError):
        hfs.makedirs("/ns/a/b")
    with pytest.raises(FileNotFoundError, match="no such file or directory: /ns/x"):
        hfs.mkdir("/ns/x/y", create_parents=False)
    hfs.pipe("/ns/a/b/f", b"x")
    with pytest.raises(OSError, match="directory not empty: /ns/a/b"):
        hfs.rmdir("/ns/a/b")
    with pytest.raises(OSError, match="directory not empty"):
        hfs.rm("/ns/a")
    hfs.rm("/ns/a", recursive=True)
    assert not hfs.exists("/ns/a")
    hfs.mkdir("/ns/empty")
    hfs.rmdir("/ns/empty")
    assert hfs.ls("/ns") == []


def test_mv_is_a_rename_of_files_and_directories(hfs):
    data = pattern(GROUP + 7)
    hfs.pipe("/mv/src/big.bin", data)
    before = hfs.info("/mv/src/big.bin")
    hfs.mv("/mv/src/big.bin", "/mv/moved.bin")
    assert not hfs.exists("/mv/src/big.bin") and hfs.cat("/mv/moved.bin") == data
    assert hfs.info("/mv/moved.bin")["mtime"] == before["mtime"]      # renamed, not copied
    hfs.mv("/mv/moved.bin", "/mv/src")                                  # into a directory
    assert hfs.ls("/mv/src", detail=False) == ["/mv/src/moved.bin"]
    hfs.pipe("/mv/other.bin", b"old")
    hfs.mv("/mv/other.bin", "/mv/src/moved.bin")                        # over a file
    assert hfs.cat("/mv/src/moved.bin") == b"old"
    hfs.mv("/mv/src", "/mv/new/place")                                  # a whole tree, parents made
    assert hfs.find("/mv") == ["/mv/new/place/moved.bin"]
    with pytest.raises(FileNotFoundError):
        hfs.mv("/mv/nope", "/mv/x")


def test_cp_file_streams_a_byte_exact_copy(hfs):
    data = pattern(2 * GROUP + STRIPE + 3, seed=3)
    hfs.pipe("/cp/a.bin", data)
    hfs.cp_file("/cp/a.bin", "/cp/deep/b.bin")
    assert hfs.cat("/cp/deep/b.bin") == data
    assert hfs.checksum("/cp/deep/b.bin") == hfs.checksum("/cp/a.bin")
    hfs.copy("/cp/deep", "/cp/tree", recursive=True)
    assert hfs.cat("/cp/tree/b.bin") == data


# ---------------------------------------------------------------------------- reads

def test_cat_file_ranges_and_cat_ranges(hfs):
    data = pattern(GROUP + STRIPE + 100, seed=5)
    hfs.pipe("/cat/a.bin", data)
    assert hfs.cat_file("/cat/a.bin") == data
    for start, end in [(0, 1), (CELL - 1, CELL + 1), (STRIPE - 5, GROUP + 5), (-100, None), (10, -10), (None, 7),
                       (len(data) - 1, len(data) + 50), (len(data) + 5, None)]:
        assert hfs.cat_file("/cat/a.bin", start, end) == data[start:end], (start, end)
    hfs.pipe("/cat/b.bin", b"bee")
    starts = [0, CELL, GROUP - 3, 0, 1, 0]
    ends = [10, 3 * CELL, GROUP + 3, 3, None, 1]
    paths = ["/cat/a.bin"] * 3 + ["/cat/b.bin"] * 2 + ["/cat/nope"]
    out = hfs.cat_ranges(paths, starts, ends)
    assert out[:3] == [data[s:e] for s, e in zip(starts[:3], ends[:3])] and out[3:5] == [b"bee", b"ee"]
    assert isinstance(out[5], FileNotFoundError)
    with pytest.raises(FileNotFoundError):
        hfs.cat_ranges(paths, starts, ends, on_error="raise")
    assert hfs.cat(["/cat/b.bin", "/cat/a.bin"]) == {"/cat/b.bin": b"bee", "/cat/a.bin": data}


def test_cat_ranges_are_in_flight_together(hcluster):
    """Every range waits on one stalled DataNode (hedging off): all of them are stalled there at
    once, so they were sent together, not one after the other."""
    from hedgefs.proto import hedgefs_pb2 as pb
    from conftest import wait_until

    fs = HedgeFileSystem(namenode=hcluster.namenode, hedge=False, skip_instance_cache=True)
    try:
        data = pattern(GROUP, seed=6)
        fs.pipe("/par/a.bin", data)
        unit0 = fs.client.stat("/par/a.bin").groups[0].units[0].datanode_id
        stripes = GROUP // STRIPE
        starts = [s * STRIPE + 10 for s in range(stripes)]      # cell 0 of each stripe: unit 0's DataNode
        hcluster.datanode_rpc(unit0, "SetFaults", pb.FaultConfig(stall=True))
        try:
            import threading

            result = {}
            reader = threading.Thread(target=lambda: result.setdefault("out", fs.cat_ranges(
                ["/par/a.bin"] * stripes, starts, [s + 100 for s in starts])))
            reader.start()
            wait_until(lambda: hcluster.datanode_rpc(unit0, "GetFaults", pb.FaultClearRequest()).stalled_reads
                       >= stripes, 20, f"{stripes} ranges stalled on {unit0} at once")
        finally:
            hcluster.datanode_rpc(unit0, "ClearFaults", pb.FaultClearRequest())
        reader.join(30)
        assert result["out"] == [data[s:s + 100] for s in starts]
    finally:
        fs.close()


def test_open_rb_random_reads_fetch_what_is_asked_and_sequential_reads_read_ahead(hfs):
    data = pattern(3 * GROUP + 1000, seed=7)
    hfs.pipe("/open/a.bin", data)
    hfs.fetched.reset()
    with hfs.open("/open/a.bin") as f:
        assert f.size == len(data)
        for offset in (5 * CELL + 3, GROUP + 11, 17, 2 * GROUP - 500):     # random: exactly the bytes asked
            f.seek(offset)
            assert f.read(1000) == data[offset:offset + 1000]
        assert hfs.fetched.ranges == 4 and hfs.fetched.bytes == 4000
        hfs.fetched.reset()
        f.seek(0)
        out = bytearray()
        while chunk := f.read(100_000):                                    # sequential: read ahead
            out += chunk
        assert out == data and f.read() == b""
    reads = -(-len(data) // 100_000)
    assert hfs.fetched.bytes <= len(data) + 2 * 100_000                    # nothing fetched twice or past the end
    assert hfs.fetched.ranges < reads / 2, (hfs.fetched.ranges, reads)


def test_get_file_and_put_file_report_progress(hfs, tmp_path):
    data = pattern(3 * GROUP + 5, seed=8)
    local = tmp_path / "in.bin"
    local.write_bytes(data)

    class Recorder(Callback):
        def __init__(self):
            super().__init__()
            self.sizes, self.updates = [], []

        def set_size(self, size):
            self.sizes.append(size)

        def relative_update(self, inc=1):
            self.updates.append(inc)

    put = Recorder()
    hfs.put_file(str(local), "/transfer/in.bin", callback=put)
    assert hfs.cat("/transfer/in.bin") == data
    assert put.sizes == [len(data)] and sum(put.updates) == len(data) and len(put.updates) >= 1
    got = Recorder()
    hfs.get_file("/transfer/in.bin", str(tmp_path / "out" / "out.bin"), callback=got)
    assert (tmp_path / "out" / "out.bin").read_bytes() == data
    assert got.sizes == [len(data)] and sum(got.updates) == len(data)
    with pytest.raises(FileExistsError):
        hfs.put_file(str(local), "/transfer/in.bin", mode="create")
    with pytest.raises(FileNotFoundError):
        hfs.get_file("/transfer/nope", str(tmp_path / "nope.bin"))
    assert not (tmp_path / "nope.bin").exists()


# ---------------------------------------------------------------------------- writes

def test_open_wb_streams_and_commits_on_close(hfs):
    data = pattern(2 * GROUP + 333, seed=9)
    with hfs.open("/write/a.bin", "wb") as f:
        for i in range(0, len(data), 77_777):
            assert f.write(data[i:i + 77_777]) == len(data[i:i + 77_777])
        assert not hfs.exists("/write/a.bin")        # not visible before the commit
    assert hfs.cat("/write/a.bin") == data
    with hfs.open("/write/t.txt", "w") as f:         # text mode on top
        f.write("héllo\n")
    assert hfs.cat("/write/t.txt") == "héllo\n".encode()


def test_a_failed_or_discarded_writer_leaves_no_file(hfs):
    with pytest.raises(RuntimeError, match="boom"):
        with hfs.open("/fail/new.bin", "wb") as f:
            f.write(pattern(GROUP + 1))
            raise RuntimeError("boom")
    assert not hfs.exists("/fail/new.bin")
    hfs.pipe("/fail/old.bin", b"old")
    with pytest.raises(RuntimeError):
        with hfs.open("/fail/old.bin", "wb") as f:
            f.write(b"new")
            raise RuntimeError("boom")
    assert hfs.cat("/fail/old.bin") == b"old"        # an overwrite that failed left the old file
    f = hfs.open("/fail/dropped.bin", "wb")
    f.write(b"never closed")
    f.discard()
    assert not hfs.exists("/fail/dropped.bin")


def test_open_ab_appends_and_creates(hfs):
    hfs.pipe("/ab/log", b"one\n")
    with hfs.open("/ab/log", "ab") as f:
        assert f.tell() == 4
        f.write(b"two\n")
        assert hfs.cat("/ab/log") == b"one\n"          # the new version appears at close
    assert hfs.cat("/ab/log") == b"one\ntwo\n" and hfs.info("/ab/log")["size"] == 8
    with hfs.open("/ab/new", "ab") as f:               # none there: created
        f.write(b"first")
    assert hfs.cat("/ab/new") == b"first"
    with pytest.raises(RuntimeError):
        with hfs.open("/ab/log", "ab") as f:
            f.write(b"lost")
            raise RuntimeError("boom")
    assert hfs.cat("/ab/log") == b"one\ntwo\n"          # an append that failed left the file


def test_write_errors_come_out_at_open(hfs):
    hfs.pipe("/wx/a.bin", b"a")
    with pytest.raises(FileExistsError, match="file exists: /wx/a.bin"):
        hfs.open("/wx/a.bin", "xb")
    with pytest.raises(NotADirectoryError, match="not a directory: /wx/a.bin"):
        hfs.open("/wx/a.bin/under", "wb")
    with pytest.raises(IsADirectoryError, match="is a directory: /wx"):
        hfs.open("/wx", "wb")
    with pytest.raises(FileExistsError):
        hfs.pipe_file("/wx/a.bin", b"again", mode="create")
    with pytest.raises(IsADirectoryError, match="is a directory: /wx"):
        hfs.open("/wx", "ab")
    with pytest.raises(NotImplementedError, match="rb, wb, xb or ab"):
        hfs.open("/wx/a.bin", "r+b")
    with pytest.raises(ValueError, match="policy"):
        hfs.pipe_file("/wx/p.bin", b"x", policy="RS-9-9-bogus")


# ---------------------------------------------------------------------------- checksums and errors

def test_checksum_is_layout_independent_and_ukey_tracks_content(hfs):
    data = pattern(GROUP + 99, seed=10)
    hfs.pipe("/sum/rs.bin", data)
    hfs.pipe("/sum/r3.bin", data, policy="REPLICATE-3")
    assert hfs.info("/sum/r3.bin")["policy"] == "REPLICATE-3"
    assert hfs.checksum("/sum/rs.bin") == hfs.checksum("/sum/r3.bin")
    assert hfs.ukey("/sum/rs.bin") == hfs.ukey("/sum/r3.bin")
    key = hfs.ukey("/sum/rs.bin")
    hfs.pipe("/sum/rs.bin", data[:-1] + b"!")
    assert hfs.ukey("/sum/rs.bin") != key


def test_errors_are_pythons_with_hedgefs_one_line_message(hcluster, hfs):
    from conftest import run_cli

    cli = run_cli("cat", "/err/nope", namenode=hcluster.namenode)
    with pytest.raises(FileNotFoundError) as caught:
        hfs.cat("/err/nope")
    assert str(caught.value) == "no such file or directory: /err/nope"
    assert cli.stderr.strip() == f"hedgefs: {caught.value}"
    hfs.mkdir("/err/dir")
    with pytest.raises(IsADirectoryError, match="is a directory: /err/dir"):
        hfs.open("/err/dir")
    with pytest.raises(IsADirectoryError):
        hfs.cat_file("/err/dir")
    down = HedgeFileSystem(namenode="127.0.0.1:1", skip_instance_cache=True)
    with pytest.raises(ConnectionError, match=r"^cannot reach the NameNode at 127.0.0.1:1 \(unavailable\)$"):
        down.ls("/")
    down.close()


def test_credentials_option_on_a_secure_cluster(tmp_path):
    secure = start_cluster(tmp_path / "secure", "secure", datanodes=3, policy="REPLICATE-3")
    try:
        fs = HedgeFileSystem(namenode=secure.namenode, credentials=secure.credentials, skip_instance_cache=True)
        fs.pipe("/s/a.bin", pattern(STRIPE + 1))
        assert fs.cat("/s/a.bin") == pattern(STRIPE + 1)
        fs.close()
        anonymous = HedgeFileSystem(namenode=secure.namenode, credentials=None, skip_instance_cache=True)
        with pytest.raises(PermissionError) as caught:
            anonymous.ls("/")
        assert "\n" not in str(caught.value) and str(caught.value)
        anonymous.close()
        with pytest.raises(ValueError):
            HedgeFileSystem(namenode=secure.namenode, credentials=str(tmp_path / "missing.cred"),
                            skip_instance_cache=True)
    finally:
        secure.down()
