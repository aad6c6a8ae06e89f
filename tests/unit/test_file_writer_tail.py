"""What an hflush writes again: FileWriter's record of the bytes of the file's last block group
(client/file_writer.py ``_Tail``), across group boundaries and past its bound."""

import pytest

from hedgefs.client import file_writer
from hedgefs.client.file_writer import _Tail


def test_the_kept_bytes_are_those_of_the_last_group_across_boundaries():
    full = 100
    tail, data = _Tail(200, full, keep=True), bytes(range(256)) * 2
    at = 200
    for n in (30, 70, 5, 150, 45, 1):    # ends: 230, 300 (a boundary), 305, 455, 500 (a boundary), 501
        tail.add(data[at - 200:at - 200 + n])
        at += n
        start = at - at % full
        assert tail.since(start, at) == data[start - 200:at - 200]
        assert tail.since(start - full, at) is None            # only the last group's
        assert tail.since(start, at - 1) is None               # and only up to the end


def test_nothing_is_kept_before_an_hflush_or_past_the_bound(monkeypatch):
    tail = _Tail(0, 1000, keep=False)
    tail.add(b"x" * 10)
    assert tail.since(0, 10) is None                           # a put that never hflushed copies nothing
    monkeypatch.setattr(file_writer, "TAIL_BYTES", 60)
    tail = _Tail(0, 1000, keep=True)
    tail.add(b"y" * 60)
    assert tail.since(0, 60) == b"y" * 60
    tail.add(b"z")
    assert tail.since(0, 61) is None                           # past the bound: read back instead
    tail.add(b"w" * 989)                                       # a new group (at 1000): kept again
    assert tail.since(1000, 1050) == b"w" * 50


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
def test_chunking_does_not_matter(chunk):
    full, data = 64, bytes(i % 251 for i in range(1000))
    tail = _Tail(0, full, keep=True)
    for i in range(0, len(data), chunk):
        tail.add(data[i:i + chunk])
    assert tail.since(len(data) - len(data) % full, len(data)) == data[len(data) - len(data) % full:]
