"""gRPC (asyncio) access to DataNodes: one channel per address, shared by every read and write.

Channels are created lazily and never waited on: a DataNode whose channel is still connecting (or
that accepts TCP and never answers) just makes its calls slow, and slowness is the reader's
business (it hedges). Nothing here blocks on a connect timeout.
"""

import grpc

from hedgefs.proto import GRPC_OPTIONS
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc

# A cell read that has not finished by then fails and is rebuilt, hedging or not.
CELL_READ_TIMEOUT_S = 60.0


class DataNodeClient:
    def __init__(self, token: str | None = None):
        self._stubs: dict[str, hedgefs_pb2_grpc.DataNodeStub] = {}
        self._channels: list[grpc.aio.Channel] = []
        self._token = token or ""

    def stub(self, address: str) -> hedgefs_pb2_grpc.DataNodeStub:
        stub = self._stubs.get(address)
        if stub is None:
            channel = grpc.aio.insecure_channel(address, options=GRPC_OPTIONS)
            self._channels.append(channel)
            stub = self._stubs[address] = hedgefs_pb2_grpc.DataNodeStub(channel)
        return stub

    async def read(self, address: str, group_id: int, unit: int, offset: int, length: int) -> bytes:
        """Bytes [offset, offset+length) of one internal block; raises grpc.RpcError."""
        call = self.stub(address).ReadUnit(
            pb.ReadRequest(group_id=group_id, index=unit, offset=offset, length=length),
            timeout=CELL_READ_TIMEOUT_S,
        )
        parts = [chunk.data async for chunk in call]
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        if len(data) != length:
            raise ShortRead(f"unit {group_id}/{unit} at {address}: got {len(data)} of {length} bytes")
        return data

    def open_write(self, address: str, timeout: float | None = None):
        return self.stub(address).WriteUnit(timeout=timeout)

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()
        self._channels.clear()
        self._stubs.clear()


class ShortRead(Exception):
    """A DataNode sent fewer bytes than asked: treated like any failed cell read."""
