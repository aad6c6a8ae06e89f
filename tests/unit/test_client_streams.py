"""The library's read-ahead and ranged streams (client/streams.py) over a scripted reader.

The reader gives bytes = f(offset) and records every read; reads may be held back (a Future left
pending) to check what is in flight. Checked: a stream gives exactly its range in windows; a leased
chunk kept past ``next()`` shows poison or raises, never a later chunk's bytes; owned chunks stay
intact; ``read(n)`` is every byte once; a window dropped by a random read while a joined read waits
on it is read again.
"""

import concurrent.futures
import threading
from types import SimpleNamespace

import pytest

from conftest import pattern
from hedgefs.client.streams import POISON, ReadAhead, Stream

WINDOW = 1000


class ScriptedReader:
    def __init__(self, data: bytes, hold: bool = False):
        self.data = data
        self.length = len(data)
        self.status = SimpleNamespace(policy="RS-6-3-64k")
        self.reads: list[tuple[int, int, bool]] = []   # (offset, length, into a given buffer)
        self.held: list[tuple[concurrent.futures.Future, int, int, bytearray | None]] = []
        self.hold = hold
        self.lock = threading.Lock()

    def submit(self, offset: int, length: int, into: bytearray | None = None) -> concurrent.futures.Future:
        future = concurrent.futures.Future()
        with self.lock:
            self.reads.append((offset, length, into is not None))
            if self.hold:
                self.held.append((future, offset, length, into))
                return future
        self._answer(future, offset, length, into)
        return future

    def _answer(self, future, offset, length, into):
        if future.cancelled():
            return
        if into is None:
            future.set_result(bytearray(self.data[offset:offset + length]))
        else:
            into[:length] = self.data[offset:offset + length]
            future.set_result(memoryview(into)[:length])

    def release_all(self) -> None:
        with self.lock:
            held, self.held = self.held, []
        for future, offset, length, into in held:
            self._answer(future, offset, length, into)


@pytest.mark.parametrize("start, end", [(0, 10_000), (1, 999), (999, 1001), (2500, 10_000), (7, 7)])
def test_a_stream_gives_exactly_its_range_in_windows(start, end):
    data = pattern(10_000)
    reader = ScriptedReader(data)
    with Stream(reader, start, end, WINDOW, read_ahead=2) as s:
        chunks = [bytes(c) for c in s]
    assert b"".join(chunks) == data[start:end]
    assert all(len(c) <= WINDOW for c in chunks)
    assert sum(length for _o, length, _i in reader.reads) == end - start   # nothing read twice or past the end


def test_a_stream_keeps_read_ahead_windows_in_flight_and_no_more():
    reader = ScriptedReader(pattern(10 * WINDOW), hold=True)
    s = Stream(reader, 0, 10 * WINDOW, WINDOW, read_ahead=2)
    step = threading.Thread(target=lambda: next(s))
    step.start()
    from conftest import wait_until

    wait_until(lambda: len(reader.reads) == 3, 5, "the first window and two ahead asked for")
    reader.release_all()
    step.join(5)
    assert [o for o, _n, _i in reader.reads] == [0, WINDOW, 2 * WINDOW]
    next(s)   # done with the first window: one more goes out
    assert [o for o, _n, _i in reader.reads] == [0, WINDOW, 2 * WINDOW, 3 * WINDOW]
    s.close()
    assert all(f.cancelled() for f, *_ in reader.held)   # close cancels what is in flight


def test_a_leased_chunk_kept_past_next_shows_poison_or_raises_never_later_bytes():
    data = pattern(6 * WINDOW)
    reader = ScriptedReader(data)
    with Stream(reader, 0, len(data), WINDOW, read_ahead=1, reuse=True, poison=True) as chunks:
        first = next(chunks)
        kept = first[10:20]                       # a slice: outlives the release of the view
        assert bytes(kept) == data[10:20]
        second = next(chunks)
        assert bytes(second) == data[WINDOW:2 * WINDOW]
        with pytest.raises(ValueError):
            bytes(first)                          # the view handed out is released
        assert bytes(kept) == bytes([POISON]) * 10
        rest = [bytes(c) for c in chunks]
        assert bytes(kept) == bytes([POISON]) * 10   # never read into again
    assert b"".join(rest) == data[2 * WINDOW:]
    assert all(into for _o, _n, into in reader.reads)


def test_a_leased_stream_reuses_its_buffers_outside_poison_mode():
    data = pattern(8 * WINDOW)
    reader = ScriptedReader(data)
    seen = set()
    with Stream(reader, 0, len(data), WINDOW, read_ahead=1, reuse=True, poison=False) as chunks:
        for i, chunk in enumerate(chunks):
            assert bytes(chunk) == data[i * WINDOW:(i + 1) * WINDOW]
            seen.add(id(chunk.obj))
    assert len(seen) <= 3   # read_ahead + 1 buffers (and one more at most while one is handed out)


def test_owned_chunks_stay_intact_after_the_stream_moves_on():
    data = pattern(5 * WINDOW)
    with Stream(ScriptedReader(data), 0, len(data), WINDOW, read_ahead=1) as s:
        chunks = list(s)
    assert b"".join(bytes(c) for c in chunks) == data


def test_read_n_is_every_byte_once():
    data = pattern(7 * WINDOW + 3)
    with Stream(ScriptedReader(data), 5, len(data), WINDOW) as s:
        out, n = [], 1
        while piece := s.read(n):
            assert len(piece) <= n
            out.append(piece)
            n = n * 7 % 2003 + 1
        assert s.read(10) == b""
    assert b"".join(out) == data[5:]
    with Stream(ScriptedReader(data), 0, len(data), WINDOW) as s:
        assert s.read(3) == data[:3] and s.read() == data[3:]


def test_a_read_over_a_window_a_random_read_dropped_is_read_again():
    data = pattern(20 * WINDOW)
    reader = ScriptedReader(data, hold=True)
    ahead = ReadAhead(reader, window=WINDOW, max_window=WINDOW, ahead=1)
    first = ahead.fetch(0, WINDOW)                   # sequential: [0, 1000) and one window ahead
    across = ahead.fetch(WINDOW - 10, 20)            # spans two windows: a joined read
    reader.hold = False
    ahead.fetch(15 * WINDOW, 5)                      # random: drops what was read ahead, unanswered
    assert first.cancelled()
    got = across.result(timeout=5)
    assert bytes(got) == data[WINDOW - 10:WINDOW + 10]


def test_reads_go_in_pieces_when_asked_to():
    data = pattern(10 * WINDOW)
    reader = ScriptedReader(data)
    ahead = ReadAhead(reader, window=WINDOW, max_window=WINDOW, piece=lambda: 300)
    assert bytes(ahead.fetch(4000, 1000).result()) == data[4000:5000]    # random: its range, in pieces
    assert [(o, n) for o, n, _i in reader.reads] == [(4000, 200), (4200, 300), (4500, 300), (4800, 200)]
