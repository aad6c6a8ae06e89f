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

from hedgefs.s3.body import Body, ChunkSource
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
