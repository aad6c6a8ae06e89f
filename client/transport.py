"""Unit reads over DataNodes' data ports, and the pooled connections under them and under unit
writes (the data transfer protocol, proto/datatransfer.py).

All of it runs on the client's event loop (loop.py), on non-blocking sockets: a read sends one
request, receives the chunks' CRC32C values and then ``recv_into``'s the bytes into a buffer
from a pool (buffers.py; no per-chunk objects), and verifies every chunk before anyone sees a
byte; a write (unit_writes.py) ``sendmsg``'s packet headers and the encoder's cell views as they
are (no copies), on a connection from ``DataNodeClient.request``.

Why asyncio and not a thread per read: measured on this machine (bench/results/
2026-11-29-data-path.md), both move a 256 MiB read for the same client CPU
(~0.1 s: the kernel's copy dominates), but a thread adds a hand-off each way (64 KiB read p50
~0.13 ms with threads, ~0.06 ms on the loop), a read waiting on a frozen DataNode would hold a
thread, and cancelling it would need a second mechanism. On the loop, cancelling a read's task
closes its socket, new or pooled, and closing is the protocol's cancel: the DataNode stops at once.

Nothing here waits for a connection to be set up before the caller's clock starts: connecting
is part of the read, so the reader's hedge timer covers it (a DataNode that accepts TCP and
never answers is hedged like a slow one). Connections are pooled per DataNode and reused;
one that the DataNode closed while idle is noticed on reuse and replaced once.

Every failure is a ``TransferError`` whose text is ``STATUS: why``; ``Busy`` (the DataNode's
--max-streams), ``ChecksumMismatch`` and ``DeadlineExceeded`` (our own time limit: no answer) are
its kinds the reader tells apart.

Every request names its unit fully, (group id, index, generation), and carries the unit's block
token from the NameNode (empty in an insecure cluster). Given an ``ssl.SSLContext`` (a secure
cluster) every connection is TLS, driven through a MemoryBIO on the same non-blocking socket
(``_TlsConnection``), and checked to be the DataNode the NameNode named (``peer``): its
certificate must say so. The handshake is part of connecting, so the hedge timer covers it.
"""

import asyncio
import dataclasses
import socket
import ssl
import struct
import time
from typing import Callable

from hedgefs.client.buffers import BufferPool
from hedgefs.proto import datatransfer as dt
from hedgefs.proto.datatransfer import Busy, ChecksumMismatch, TransferError
from hedgefs.security.identity import DATANODE, server_name

__all__ = ["DataNodeClient", "TransferError", "Busy", "ChecksumMismatch", "DeadlineExceeded"]


class DeadlineExceeded(TransferError):
    """A unit read that had no answer within our own time limit: no answer, not a refusal."""

    def __init__(self, message: str):
        super().__init__("DEADLINE_EXCEEDED", message)


# A unit read that has not finished by then fails and is rebuilt, hedging or not.
UNIT_READ_TIMEOUT_S = 60.0
# Asking for a unit's chunk checksums (metadata only): past this, its group is read instead.
CHECKSUMS_TIMEOUT_S = 10.0
# A pooled connection idle this long is closed; DataNodes close theirs after 300 s.
_IDLE_S = 60.0
# Reads in flight to one DataNode at once (more wait here, their hedge timers running): a burst
# of reads must not open hundreds of connections to one DataNode, nor exhaust our descriptors.
_MAX_READS_PER_DATANODE = 32
_MAX_IDLE_PER_DATANODE = _MAX_READS_PER_DATANODE


@dataclasses.dataclass
class Phases:
    """Where a unit read's time went, filled in as it goes (``DataNodeClient.read(phases=...)``):
    waiting for one of the DataNode's read slots, and setting up a new connection (TCP connect,
    TLS handshake; 0 on a pooled one). The rest is the DataNode's answer."""
    queued_s: float = 0.0
    connect_s: float = 0.0
    new_connection: bool = False
    on_connect: "Callable[[], None] | None" = None   # called as a new connection starts to be set up
    on_answer: "Callable[[], None] | None" = None    # called as the DataNode's response header arrives


@dataclasses.dataclass(frozen=True)
class ChunkChecksums:
    length: int                  # the internal block's length
    chunk_size: int              # bytes per checksum chunk; the last chunk may be shorter
    crcs: tuple[int, ...]        # CRC32C of chunk 0, 1, ...


class _Connection:
    """One non-blocking TCP connection to a DataNode's data port, driven by the event loop."""

    def __init__(self, sock: socket.socket, address: str, peer: str = ""):
        self.sock = sock
        self.address = address
        self.key = (address, peer)   # what the pool keeps it under
        self.idle_since = 0.0
        self._loop = asyncio.get_running_loop()

    async def send(self, buffers) -> None:
        """Send every buffer, in order, with as few ``sendmsg`` calls as the socket allows."""
        views = [memoryview(b).cast("B") for b in buffers if len(b)]
        while views:
            try:
                sent = self.sock.sendmsg(views)
            except BlockingIOError:
                sent = 0
            while sent:
                if sent >= len(views[0]):
                    sent -= len(views.pop(0))
                else:
                    views[0] = views[0][sent:]
                    sent = 0
            if views:
                await self._writable()

    async def _writable(self) -> None:
        fut = self._loop.create_future()
        fd = self.sock.fileno()
        self._loop.add_writer(fd, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            self._loop.remove_writer(fd)

    async def recv_into(self, view: memoryview) -> None:
        """Fill ``view`` exactly."""
        got, n = 0, len(view)
        while got < n:
            r = await self._loop.sock_recv_into(self.sock, view[got:])
            if not r:
                raise ConnectionError(f"connection closed by {self.address}")
            got += r

    async def recv_response(self) -> tuple[int, str]:
        head = bytearray(dt.RESPONSE.size)
        await self.recv_into(memoryview(head))
        status, _, n = dt.RESPONSE.unpack(head)
        message = bytearray(n)
        await self.recv_into(memoryview(message))
        return status, message.decode(errors="replace")

    def close(self) -> None:
        self.sock.close()


class _TlsConnection(_Connection):
    """A TLS connection on the same non-blocking socket: ``ssl``'s SSLObject over two MemoryBIOs,
    records moved by the event loop (what asyncio's own SSL transport does), so the pooled,
    cancel-by-closing design stays as it is. Decrypted bytes land straight in the caller's view."""

    _RECORDS = 256 * 1024   # bytes of TLS records taken off the socket at a time

    def __init__(self, sock: socket.socket, address: str, context: ssl.SSLContext, peer_name: str):
        super().__init__(sock, address)
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._in, self._out, server_side=False, server_hostname=peer_name)
        self._records = memoryview(bytearray(self._RECORDS))   # reused: no 256 KiB allocation per fill

    async def handshake(self) -> None:
        while True:
            try:
                self._tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._flush()
                await self._fill()
        await self._flush()

    async def _flush(self) -> None:
        if self._out.pending:
            await super().send([self._out.read()])

    async def _fill(self) -> None:
        n = await self._loop.sock_recv_into(self.sock, self._records)
        if not n:
            raise ConnectionError(f"connection closed by {self.address}")
        self._in.write(self._records[:n])

    async def send(self, buffers) -> None:
        for b in buffers:
            view = memoryview(b).cast("B")
            for pos in range(0, len(view), self._RECORDS):
                self._tls.write(view[pos:pos + self._RECORDS])
                if self._out.pending >= self._RECORDS:
                    await self._flush()
        await self._flush()

    async def recv_into(self, view: memoryview) -> None:
        got, n = 0, len(view)
        while got < n:
            try:
                r = self._tls.read(n - got, view[got:])
            except ssl.SSLWantReadError:
                await self._flush()
                await self._fill()
                continue
            except ssl.SSLZeroReturnError:
                r = 0
            if not r:
                raise ConnectionError(f"connection closed by {self.address}")
            got += r
        if self._out.pending:   # what reading made TLS say (key updates): send it on
            await self._flush()


class DataNodeClient:
    def __init__(self, *, buffers: BufferPool | None = None, tls: ssl.SSLContext | None = None):
        self.buffers = buffers or BufferPool()
        self.tls = tls
        self._idle: dict[tuple[str, str], list[_Connection]] = {}
        self._slots: dict[str, asyncio.Semaphore] = {}

    # ---------------------------------------------------------------- connections

    async def _connect(self, address: str, peer: str) -> _Connection:
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise TransferError("UNAVAILABLE", f"no data address for this DataNode ({address!r})")
        host = host.strip("[]")
        try:
            family = _ip_family(host)
            if family is not None:   # an address already: no lookup (it would take a worker thread)
                sockaddr = (host, int(port))
            else:
                infos = await asyncio.get_running_loop().getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
                family, _, _, _, sockaddr = infos[0]
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as e:
            raise TransferError("UNAVAILABLE", f"cannot resolve {address}: {e.strerror or e}") from None
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await asyncio.get_running_loop().sock_connect(sock, sockaddr)
        except BaseException as e:
            sock.close()
            if isinstance(e, OSError):
                raise TransferError("UNAVAILABLE", f"cannot connect to {address}: {e.strerror or e}") from None
            raise
        if self.tls is None:
            return _Connection(sock, address)
        conn = _TlsConnection(sock, address, self.tls, server_name(DATANODE, peer))
        conn.key = (address, peer)
        try:
            await conn.handshake()
        except ssl.SSLError as e:
            conn.close()
            raise TransferError("PERMISSION_DENIED", f"TLS with {peer or address} at {address} failed: "
                                                     f"{e.verify_message if isinstance(e, ssl.SSLCertVerificationError) else e.reason or e}") from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _pooled(self, key: tuple[str, str]) -> _Connection | None:
        idle = self._idle.get(key)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            if now - conn.idle_since < _IDLE_S:
                return conn
            conn.close()
        return None

    def release(self, conn: _Connection) -> None:
        idle = self._idle.setdefault(conn.key, [])
        if len(idle) >= _MAX_IDLE_PER_DATANODE:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        idle.append(conn)

    async def request(self, address: str, peer: str, request: bytes,
                      phases: Phases | None = None) -> tuple[_Connection, int, str]:
        """Send a request on a pooled (or new) connection and read the response header. A pooled
        connection the DataNode has closed meanwhile fails at once: then once more, on a new one.
        ``peer``: the DataNode id the NameNode gave for ``address`` (TLS checks it is that one)."""
        conn = self._pooled((address, peer if self.tls else ""))
        if conn is not None:
            try:
                await conn.send([request])
                status, message = await conn.recv_response()
                return conn, status, message
            except OSError:
                conn.close()   # closed by the DataNode while idle: once more, on a new one
            except BaseException:
                conn.close()   # cancelled (a hedge won): closing is the protocol's cancel
                raise
        began = time.monotonic()
        if phases is not None and phases.on_connect is not None:
            phases.on_connect()
        conn = await self._connect(address, peer)
        if phases is not None:
            phases.new_connection, phases.connect_s = True, time.monotonic() - began
        try:
            await conn.send([request])
            status, message = await conn.recv_response()
        except BaseException:
            conn.close()
            raise
        return conn, status, message

    # ---------------------------------------------------------------- reads

    async def read(self, address: str, group_id: int, index: int, offset: int, length: int, *,
                   generation: int, token: bytes = b"", peer: str = "", phases: Phases | None = None) -> memoryview:
        """Bytes [offset, offset+length) of one internal block, every chunk verified.

        Returns a view of a pooled buffer: give it back with ``buffers.give(view)`` when done.
        Raises TransferError (Busy, ChecksumMismatch, ...); a cancelled read closes its socket.
        ``phases``, if given, is filled in with the time spent waiting for a slot and connecting."""
        slots = self._slots.get(address)
        if slots is None:
            slots = self._slots[address] = asyncio.Semaphore(_MAX_READS_PER_DATANODE)
        try:
            async with asyncio.timeout(UNIT_READ_TIMEOUT_S):
                began = time.monotonic()
                async with slots:
                    if phases is not None:
                        phases.queued_s = time.monotonic() - began
                    return await self._read(address, peer, group_id, index, generation, offset, length, token, phases)
        except TimeoutError:
            raise DeadlineExceeded(f"no answer from {address} in {UNIT_READ_TIMEOUT_S:.0f} s") from None
        except OSError as e:
            raise TransferError("UNAVAILABLE", f"{address}: {e.strerror or e}") from None

    async def _read(self, address, peer, group_id, index, generation, offset, length, token, phases=None) -> memoryview:
        request = dt.pack_request(dt.OP_READ, group_id, index, offset, length, token, generation=generation)
        conn, status, message = await self.request(address, peer, request, phases)
        if phases is not None and phases.on_answer is not None:
            phases.on_answer()   # a sign of life: a paced or delayed DataNode answers this much at once
        if status != dt.OK:
            self.release(conn)
            raise dt.error_for(status, message or f"refused by {address}")
        try:
            info = bytearray(dt.READ_INFO.size)
            await conn.recv_into(memoryview(info))
            start, nbytes, chunk = dt.READ_INFO.unpack(info)
            count = -(-nbytes // chunk) if chunk else -1
            if count < 0 or start > offset or start + nbytes < offset + length:
                raise TransferError("DATA_LOSS", f"{address} answered a read of [{offset}, {offset + length}) "
                                                 f"with [{start}, {start + nbytes})")
            crcs = bytearray(4 * count)
            await conn.recv_into(memoryview(crcs))
            buf = self.buffers.take(nbytes)
            view = memoryview(buf)[:nbytes]
            await conn.recv_into(view)
        except BaseException:
            conn.close()   # out of step (or cancelled: closing is the cancel)
            raise
        self.release(conn)
        bad = dt.first_bad_chunk(view, struct.unpack(f"<{count}I", crcs), chunk)
        if bad is not None:
            self.buffers.give(buf)
            raise ChecksumMismatch(group_id, index, start + bad, address)
        return view[offset - start:offset - start + length]

    async def chunk_checksums(self, address: str, group_id: int, index: int, *, generation: int,
                              token: bytes = b"", peer: str = "") -> "ChunkChecksums":
        """The stored CRC32C of every chunk of one internal block (no data is read)."""
        try:
            return await self._chunk_checksums(address, group_id, index, generation, token, peer)
        except OSError as e:   # reset, refused: a failed call like any other (TransferError)
            raise TransferError("UNAVAILABLE", f"{address}: {e.strerror or e}") from None

    async def _chunk_checksums(self, address, group_id, index, generation, token, peer) -> "ChunkChecksums":
        async with asyncio.timeout(CHECKSUMS_TIMEOUT_S):
            conn, status, message = await self.request(
                address, peer, dt.pack_request(dt.OP_CHECKSUMS, group_id, index, 0, 0, token, generation=generation))
            try:
                if status != dt.OK:
                    raise dt.error_for(status, message or f"refused by {address}")
                info = bytearray(dt.UNIT_INFO.size)
                await conn.recv_into(memoryview(info))
                length, chunk = dt.UNIT_INFO.unpack(info)
                count = -(-length // chunk) if chunk else 0
                raw = bytearray(4 * count)
                await conn.recv_into(memoryview(raw))
            except BaseException:
                conn.close()
                raise
        self.release(conn)
        return ChunkChecksums(length, chunk, struct.unpack(f"<{count}I", raw))

    async def verify(self, address: str, group_id: int, index: int, *, generation: int, token: bytes = b"",
                     peer: str = "") -> str:
        """Ask a DataNode to check its stored copy of a unit (a read of it failed its checksum);
        its one-line answer. It reports a damaged unit to the NameNode itself."""
        try:
            async with asyncio.timeout(UNIT_READ_TIMEOUT_S):
                conn, status, message = await self.request(
                    address, peer, dt.pack_request(dt.OP_VERIFY, group_id, index, 0, 0, token, generation=generation))
        except OSError as e:
            raise TransferError("UNAVAILABLE", f"{address}: {e.strerror or e}") from None
        self.release(conn)
        return f"{dt.STATUS_NAMES.get(status, status)}: {message}"

    async def close(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()


def _ip_family(host: str):
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
            return family
        except OSError:
            pass
    return None
