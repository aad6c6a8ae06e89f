"""A PUT's body as the library's writer reads it (s3/body.py ``Body``): every byte once and in
order, whatever sizes are asked for after a read ahead, with its length, MD5 and checksum.

The body is aiohttp's own StreamReader, fed on an event loop thread of its own in pieces of
odd sizes (as a socket delivers them); the reads come from this thread, as the writer's source
thread makes them.
"""

import asyncio
import base64
import gc
import hashlib
import threading
import warnings
import zlib

import pytest
from aiohttp.streams import StreamReader
from aiohttp.test_utils import make_mocked_request

from hedgefs.s3.body import CLOSE, Body, ChunkSource, _Receiver
from hedgefs.s3.errors import S3Error

MiB = 1 << 20


class Flow:
    """The connection's side of aiohttp's flow control (a socket paused and resumed): here
    every piece is in the reader's buffer already."""

    _reading_paused = False

    def pause_reading(self, **_) -> None:
        self._reading_paused = True

    def resume_reading(self, **_) -> None:
        self._reading_paused = False


@pytest.fixture
def loop():
    """The gateway's event loop, on a thread of its own, ended as asyncio.run and aiohttp's runner
    end one: what is still running (a read ahead that a close cancelled before it started) is
    cancelled and awaited first. A coroutine left never awaited fails the test."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop

    async def settle():
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run_coroutine_threadsafe(settle(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)], [str(w.message) for w in caught]


def body_of(loop, data: bytes, declared: int | None = None, piece: int = 65_537) -> Body:
    """A Body over ``data`` received in ``piece``-byte pieces, the CRC32 sent in its header."""
    crc = base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()
    headers = {"Content-Length": str(len(data) if declared is None else declared), "x-amz-checksum-crc32": crc}

    async def make():
        stream = StreamReader(Flow(), 1 << 16, loop=loop)
        for at in range(0, len(data), piece):
            stream.feed_data(data[at:at + piece])
        stream.feed_eof()
        return Body(make_mocked_request("PUT", "/b/k", headers=headers, payload=stream), None)
    return asyncio.run_coroutine_threadsafe(make(), loop).result(10)


def read_all(body: Body, sizes) -> bytes:
    out = []
    for n in sizes:
        out.append(body.read(n))
    while chunk := body.read(6 * MiB):
        out.append(chunk)
    return b"".join(out)


def test_stripe_reads_get_every_byte_once_with_its_md5_and_checksum(loop):
    data = bytes(range(256)) * (5 * MiB // 256) + b"tail"
    body = body_of(loop, data)
    got = [body.read(MiB) for _ in range(6)]
    assert [len(c) for c in got] == [MiB] * 5 + [4]
    assert body.read(MiB) == b""
    assert b"".join(got) == data
    assert body.length == len(data)
    assert body.etag() == f'"{hashlib.md5(data).hexdigest()}"'
    assert body.checksum == ("CRC32", zlib.crc32(data).to_bytes(4, "big"))


@pytest.mark.parametrize("sizes", [(MiB, 100), (MiB, MiB, 3 * MiB), (MiB, -1), (MiB, 2 * MiB + 7, MiB)])
def test_a_read_of_another_size_after_a_read_ahead_loses_nothing(loop, sizes):
    data = hashlib.sha256(b"x").digest() * (4 * MiB // 32) + b"0123456789"
    body = body_of(loop, data)
    assert read_all(body, sizes) == data
    assert body.etag() == f'"{hashlib.md5(data).hexdigest()}"'
    assert body.checksum is not None


def test_a_body_shorter_than_its_length_is_refused(loop):
    data = b"z" * (2 * MiB)
    body = body_of(loop, data, declared=3 * MiB)
    with pytest.raises(S3Error) as err:
        read_all(body, (MiB,))
    assert err.value.code == "IncompleteBody"


class Socket:
    """The transport's side a _Receiver drives (s3/body.py): reading on or paused, its protocol."""

    reading = True
    protocol = None

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def get_protocol(self):
        return self.protocol

    def set_protocol(self, protocol) -> None:
        self.protocol = protocol

    def get_extra_info(self, name: str, default=None):
        return default


def receive(receiver: _Receiver, data: bytes) -> None:
    """``data`` as the socket hands it to the receiver: into the buffers it gives, in pieces."""
    view = memoryview(data)
    while view:
        buf = receiver.get_buffer(len(view))
        n = min(len(buf), len(view), 100_003)
        buf[:n] = view[:n]
        receiver.buffer_updated(n)
        view = view[n:]


def test_a_large_body_taken_from_aiohttp_counts_what_its_reader_handed_on_while_drained():
    """take() reads what aiohttp's reader holds; draining it can have aiohttp's parser hand on
    bytes it held back (flow control resumed): those are not on the socket any more, so the
    bytes left to receive are counted after the drain, and the body comes whole and in order."""
    data = bytes(range(256)) * (3 * MiB // 256)

    class Reader(StreamReader):
        held = data[MiB:MiB + 300_000]   # what the parser hands on when reading resumes

        def read_nowait(self, n: int = -1) -> bytes:
            if self.held:
                self.feed_data(self.held)
                self.held = b""
            return super().read_nowait(n)

    async def scenario():
        content = Reader(Flow(), 1 << 16, loop=asyncio.get_running_loop())
        content.feed_data(data[:MiB])
        socket = Socket()
        request = make_mocked_request("PUT", "/b/k", headers={"Content-Length": str(len(data))},
                                      payload=content, transport=socket)
        receiver = _Receiver.take(request, None)
        assert socket.protocol is receiver and request[CLOSE] is receiver and not socket.reading
        assert receiver.remaining == len(data) - MiB - 300_000
        buf = bytearray(len(data))
        fill = asyncio.ensure_future(receiver.fill(memoryview(buf)))
        await asyncio.sleep(0)   # (the fill took what came early and waits for the socket, reading on)
        assert socket.reading
        receive(receiver, data[MiB + 300_000:])
        assert await fill == len(data) and buf == data
        assert receiver.remaining == 0 and content.is_eof()
    asyncio.run(scenario())


def test_a_body_dropped_just_as_its_fill_ends_is_still_read_to_its_end():
    """Body.close cancels the read ahead and drops the rest (drop_rest). If the fill's last bytes
    came in (reading paused) before its task ran again, the fill's end turns reading back on:
    else the client, still sending, is never read from nor answered."""
    async def scenario():
        content = StreamReader(Flow(), 1 << 16, loop=asyncio.get_running_loop())
        socket = Socket()
        receiver = _Receiver(socket, None, content, remaining=3 * MiB)
        fill = asyncio.ensure_future(receiver.fill(memoryview(bytearray(MiB))))
        await asyncio.sleep(0)   # (the fill waits for the socket)
        receive(receiver, b"x" * MiB)   # its last bytes: reading paused, the task not yet run
        assert not socket.reading
        fill.cancel()
        receiver.drop_rest()
        with pytest.raises(asyncio.CancelledError):
            await fill
        assert socket.reading
        receive(receiver, b"y" * (2 * MiB))   # the rest, read and dropped
        assert receiver.remaining == 0 and content.is_eof()
    asyncio.run(scenario())


def test_an_abandoned_body_stops_its_read_ahead(loop):
    body = body_of(loop, b"q" * (4 * MiB), piece=MiB)
    assert body.read(MiB) == b"q" * MiB
    ahead = body._ahead
    assert ahead is not None               # the next MiB is being read already
    body.close()
    assert body._ahead is None and (ahead[1].cancelled() or ahead[1].done())


@pytest.mark.parametrize("md5", [True, False])
def test_a_copy_source_hands_whole_chunks_on_as_they_are_and_hashes_only_when_asked(md5):
    """A copy's source (a stream's windows into a writer, ChunkSource): a read of a whole chunk is
    the chunk itself, not a copy of it; a read across chunks gets all it asked for (short only at
    the end); every byte once, in order. The MD5 only when asked (a multipart Complete's copy
    needs none: its ETag is the parts')."""
    chunks = [bytes([n]) * (6 * MiB) for n in range(3)] + [b"tail" * 1000, b"end" * 7]
    source = ChunkSource(iter(chunks), md5=md5)
    first = source.read(6 * MiB)
    assert first is chunks[0]
    got = [first, source.read(MiB), source.read(6 * MiB), source.read(5 * MiB), source.read(100 * MiB)]
    assert got[1] == chunks[1][:MiB] and got[2] == chunks[1][MiB:] + chunks[2][:MiB]   # across two chunks
    assert len(got[3]) == 5 * MiB and got[4] == chunks[3] + chunks[4]   # short only at the end
    assert source.read(1) == b""
    assert b"".join(got) == b"".join(chunks)
    if md5:
        assert source.md5.hexdigest() == hashlib.md5(b"".join(chunks)).hexdigest()
    else:
        assert source.md5 is None
    last = ChunkSource(iter(chunks[3:4]))
    assert last.read(6 * MiB) is chunks[3]   # a whole last chunk shorter than the read: itself
