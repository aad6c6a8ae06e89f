"""The mount's hand-written parts without a kernel: the inode table and its read-ahead (the
library's ReadAhead with the mount's windows).

The reader under ReadHandle is a scripted one (bytes = f(offset), every call recorded), as the
reader-logic tests do with a scripted transport: what is checked is which ranges are asked for
(a random read asks for exactly its range, with no read-ahead; a run of sequential reads grows the
window from the cell, or the kernel's read if larger, to MAX_WINDOW) and that every byte
returned is the file's.
"""

import concurrent.futures
from types import SimpleNamespace

from conftest import pattern

from hedgefs.mount import files
from hedgefs.mount.files import ReadHandle
from hedgefs.mount.inodes import ROOT_INODE, InodeTable, child

CELL = 64 * 1024


class ScriptedReader:
    def __init__(self, data: bytes, policy: str = "RS-6-3-64k"):
        self.data = data
        self.length = len(data)
        self.status = SimpleNamespace(policy=policy)
        self.submits: list[tuple[int, int]] = []

    def submit(self, offset: int, length: int) -> concurrent.futures.Future:
        self.submits.append((offset, length))
        future = concurrent.futures.Future()
        future.set_result(bytearray(self.data[offset:offset + length]))
        return future

    def close(self) -> None:
        pass


def test_random_reads_ask_for_exactly_their_range():
    data = pattern(50 * CELL)
    reader = ScriptedReader(data)
    handle = ReadHandle(reader)
    for offset, size in [(7 * CELL + 3, 4096), (CELL, 100), (40 * CELL, CELL), (3, 5)]:
        assert handle.read(offset, size) == data[offset:offset + size]
    assert reader.submits == [(7 * CELL + 3, 4096), (CELL, 100), (40 * CELL, CELL), (3, 5)]


def test_sequential_reads_grow_the_read_ahead_from_the_cell_to_the_maximum(monkeypatch):
    monkeypatch.setattr(files, "MAX_WINDOW", 1 << 20)   # 64 KiB cells: 64k, 128k, ..., 1 MiB
    data = pattern(5 << 20)
    reader = ScriptedReader(data)
    handle = ReadHandle(reader)
    got = bytearray()
    for offset in range(0, len(data), 128 * 1024):   # as the kernel asks: 128 KiB at a time
        got += handle.read(offset, 128 * 1024)
    assert got == data
    sizes = [length for _offset, length in reader.submits]
    assert sizes[0] == 128 * 1024 and max(sizes) == 1 << 20   # the first window: the kernel's read
    assert sizes == sorted(sizes[:-1]) + sizes[-1:]   # growing (the last one ends at the end of the file)
    covered = 0
    for offset, length in reader.submits:   # back to back, nothing read twice
        assert offset == covered
        covered += length
    assert covered == len(data)


def test_a_random_read_drops_the_read_ahead_and_reads_past_the_end_are_empty():
    data = pattern(30 * CELL + 5)
    reader = ScriptedReader(data)
    handle = ReadHandle(reader)
    assert handle.read(0, 4096) == data[:4096] and reader.submits[0] == (0, CELL)   # the first window: a cell
    assert handle.read(20 * CELL, 10) == data[20 * CELL:20 * CELL + 10]
    assert reader.submits[-1] == (20 * CELL, 10)
    assert handle.read(len(data) - 2, 100) == data[-2:]
    assert handle.read(len(data), 100) == b"" and handle.read(len(data) + 7, 1) == b""


def test_inode_table_counts_lookups_and_follows_renames():
    table = InodeTable()
    a = table.learn("/d/a")
    assert table.learn("/d/a").inode == a.inode and a.lookups == 2
    d = table.learn("/d")
    table.moved("/d", "/e")
    assert (d.path, a.path) == ("/e", "/e/a") and table.at("/e/a") is a and table.at("/d/a") is None
    b = table.learn("/e/b")
    table.moved("/e/a", "/e/b")   # onto an existing name: that one is detached
    assert b.path is None and table.at("/e/b") is a
    table.forget(a.inode, 1)
    assert table.get(a.inode) is a
    table.forget(a.inode, 1)
    assert table.get(a.inode) is None and table.at("/e/b") is None
    assert table.learn("/e/b").inode != a.inode   # a new number for a forgotten path
    table.forget(ROOT_INODE, 100)
    assert table.get(ROOT_INODE).path == "/"
    assert child("/", "x") == "/x" and child("/a", "x") == "/a/x"


def test_an_unlinked_inode_keeps_its_number_until_forgotten():
    table = InodeTable()
    node = table.learn("/f")
    table.detach("/f")
    assert table.get(node.inode) is node and node.path is None and table.at("/f") is None
    table.forget(node.inode, 1)
    assert table.get(node.inode) is None


def test_an_aborted_write_is_an_error_for_the_writer_not_an_end_of_file():
    """Unmounted mid-write (or aborted): the striped writer must fail (and abandon the file), never
    see EOF and commit the bytes so far. The FileWriter's pipe, which the mount writes into."""
    import pytest

    from hedgefs.client.errors import WriteAborted
    from hedgefs.client.file_writer import _Pipe

    pipe = _Pipe(1 << 20)
    assert pipe.put(b"abc") and pipe.read(2) == b"ab" and pipe.read(10) == b"c"
    pipe.put(b"more")
    pipe.fail(WriteAborted("aborted"))
    with pytest.raises(WriteAborted):
        pipe.read(10)
    pipe.finished()
    assert not pipe.put(b"x")
    done = _Pipe(1 << 20)
    done.put(b"z")
    done.end()
    assert done.read(5) == b"z" and done.read(5) == b""
