"""Unit writes: one internal block streamed to one DataNode over the data transfer protocol
(proto/datatransfer.py), on a connection from the client's pool (transport.py). The writer
(writer.py) runs one per unit of a block group.
"""

from hedgefs.client.transport import DataNodeClient, TransferError
from hedgefs.proto import datatransfer as dt


class UnitWrite:
    """One internal block streamed to one DataNode: ``send`` cells, then ``finish(length)``.

    The connection is opened by the first ``send`` (the DataNode says OK or BUSY before any data
    moves). Errors are TransferError; time limits are the caller's (asyncio.timeout)."""

    def __init__(self, client: DataNodeClient, address: str, group_id: int, index: int, *, generation: int,
                 token: bytes = b"", peer: str = ""):
        self._client = client
        self.address = address
        self.group_id, self.index, self.generation = group_id, index, generation
        self._token, self._peer = token, peer
        self._conn = None   # the connection, once the DataNode said OK
        self._closed = False

    async def _open(self):
        if self._conn is None:
            # The unit's length is known only at the end (stdin has no size): 0 = given with END.
            request = dt.pack_request(dt.OP_WRITE, self.group_id, self.index, 0, 0, self._token,
                                      generation=self.generation)
            conn, status, message = await _guarded(self._client.request(self.address, self._peer, request),
                                                   self.address)
            if status != dt.OK:
                self._client.release(conn)
                raise dt.error_for(status, message or f"refused by {self.address}")
            self._conn = conn
        return self._conn

    async def send(self, cells) -> None:
        """Send cells (buffers) as DATA packets, with no copy of their bytes."""
        conn = await self._open()
        parts = []
        for cell in cells:
            if len(cell):
                parts += (dt.PACKET.pack(dt.PACKET_DATA, memoryview(cell).nbytes), cell)
        await _guarded(conn.send(parts), self.address)

    async def finish(self, length: int) -> int:
        """End the unit at ``length`` bytes; returns what the DataNode stored (after its fsync)."""
        conn = await self._open()
        await _guarded(conn.send([dt.PACKET.pack(dt.PACKET_END, length)]), self.address)
        status, message = await _guarded(conn.recv_response(), self.address)
        if status != dt.OK:
            self.abort()
            raise dt.error_for(status, message)
        stored = bytearray(dt.STORED.size)
        await _guarded(conn.recv_into(memoryview(stored)), self.address)
        self._conn = None
        self._client.release(conn)
        return dt.STORED.unpack(stored)[0]

    def abort(self) -> None:
        """Give up on the unit: closing the connection makes the DataNode delete its temp file."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


async def append_unit(client: DataNodeClient, address: str, group_id: int, index: int, offset: int, data, *,
                      generation: int, token: bytes = b"", peer: str = "") -> int:
    """APPEND ``data`` to a replica whose committed length is ``offset`` (a replicated open tail);
    the replica's new length, durable on the DataNode. FAILED_PRECONDITION: the replica is not
    ``offset`` bytes long (a stale writer). One round trip on a pooled connection."""
    if len(data) > dt.MAX_APPEND_BYTES:
        raise ValueError(f"an append carries at most {dt.MAX_APPEND_BYTES} bytes, not {len(data)}")
    request = dt.pack_request(dt.OP_APPEND, group_id, index, offset, len(data), token,
                              generation=generation) + bytes(data)
    conn, status, message = await _guarded(client.request(address, peer, request), address)
    if status != dt.OK:
        if status in (dt.BUSY, dt.PERMISSION_DENIED, dt.INVALID_ARGUMENT):
            conn.close()        # refused before its bytes were read: the DataNode hangs up
        else:
            client.release(conn)
        raise dt.error_for(status, message or f"refused by {address}")
    stored = bytearray(dt.STORED.size)
    try:
        await _guarded(conn.recv_into(memoryview(stored)), address)
    except BaseException:
        conn.close()
        raise
    client.release(conn)
    return dt.STORED.unpack(stored)[0]


async def _guarded(awaitable, address: str):
    try:
        return await awaitable
    except OSError as e:
        raise TransferError("UNAVAILABLE", f"{address}: {e.strerror or e}") from None
