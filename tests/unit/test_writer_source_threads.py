"""The writer's sources read in threads kept between files (client/writer.py, ``SourceThreads``):
one file after another reuses one thread; a source blocked on its input never holds up another's
read (no bound); a thread idle for ``IDLE_S`` ends; a read's error reaches its writer."""

from __future__ import annotations

import asyncio
import io
import threading

import pytest

from hedgefs.client.writer import SourceThreads, StripeSource

from conftest import wait_until


def alive(threads: SourceThreads) -> int:
    return sum(1 for t in threading.enumerate() if t.name == "hedgefs-source" and t.is_alive())


def test_files_read_one_after_another_share_one_thread():
    threads = SourceThreads()
    before = alive(threads)
    seen = []   # the thread objects themselves (held here, so never reused as a thread id may be)

    def read(n: int) -> bytes:
        seen.append(threading.current_thread())
        return b""

    async def files():
        for i in range(50):
            data = io.BytesIO(bytes([i]) * 3000)
            source = StripeSource(data.read, threads)
            assert await source.read(1000) == bytes([i]) * 1000
            assert await source.read(5000) == bytes([i]) * 2000   # short only at the end
            assert await StripeSource(read, threads).read(10) == b""
    asyncio.run(files())
    assert len(seen) == 50 and len({id(t) for t in seen}) == 1
    assert alive(threads) - before <= 1


def test_a_source_blocked_on_its_input_does_not_hold_up_another():
    threads = SourceThreads()
    gate = threading.Event()

    def idle_pipe(n: int) -> bytes:
        gate.wait(30)
        return b""

    async def both():
        blocked = asyncio.ensure_future(StripeSource(idle_pipe, threads).read(10))
        other = await asyncio.wait_for(StripeSource(io.BytesIO(b"abc").read, threads).read(10), 10)
        assert other == b"abc" and not blocked.done()
        gate.set()
        assert await blocked == b""
    asyncio.run(both())


def test_an_idle_thread_ends_and_a_later_read_starts_another(monkeypatch):
    monkeypatch.setattr(SourceThreads, "IDLE_S", 0.05)
    threads = SourceThreads()
    ran = []   # the thread objects (held: a thread id may be reused)

    def read(n: int) -> bytes:
        ran.append(threading.current_thread())
        return b""

    asyncio.run(StripeSource(read, threads).read(1))
    wait_until(lambda: not ran[0].is_alive(), 10, "the idle thread to end")
    asyncio.run(StripeSource(read, threads).read(1))
    assert len(ran) == 2 and ran[1] is not ran[0] and ran[1].is_alive()


def test_a_read_that_raises_fails_its_writer_and_the_thread_serves_on():
    threads = SourceThreads()

    def broken(n: int) -> bytes:
        raise OSError("input/output error")

    async def go():
        with pytest.raises(OSError, match="input/output error"):
            await StripeSource(broken, threads).read(10)
        assert await StripeSource(io.BytesIO(b"x").read, threads).read(10) == b"x"
    asyncio.run(go())
