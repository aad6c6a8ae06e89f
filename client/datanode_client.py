"""gRPC (asyncio) access to DataNodes: one channel per address, shared by every read and write.

Channels are created lazily and never waited on: a DataNode whose channel is still connecting (or
that accepts TCP and never answers) just makes its calls slow, and slowness is the reader's
business (it hedges). Nothing here blocks on a connect timeout.
"""

import grpc

from hedgefs.proto import GRPC_OPTIONS, wire
from hedgefs.proto import hedgefs_pb2 as pb

# A cell read that has not finished by then fails and is rebuilt, hedging or not.
CELL_READ_TIMEOUT_S = 60.0
# Asking for a unit's chunk checksums (metadata only): past this, its group is read instead.
CHECKSUMS_TIMEOUT_S = 10.0


class _Endpoint:
    """One DataNode's channel, with the data RPCs framed by hand (proto/wire.py)."""

    def __init__(self, address: str):
        self.channel = grpc.aio.insecure_channel(address, options=GRPC_OPTIONS)
        self.read_unit = self.channel.unary_stream(
            "/hedgefs.DataNode/ReadUnit", request_serializer=pb.ReadRequest.SerializeToString,
            response_deserializer=None)
        self.write_unit = self.channel.stream_unary(
            "/hedgefs.DataNode/WriteUnit", request_serializer=wire.serialize,
            response_deserializer=pb.WriteResult.FromString)
        self.chunk_checksums = self.channel.unary_unary(
            "/hedgefs.DataNode/GetChunkChecksums", request_serializer=pb.ChunkChecksumsRequest.SerializeToString,
            response_deserializer=pb.ChunkChecksums.FromString)


class DataNodeClient:
    def __init__(self):
        self._endpoints: dict[str, _Endpoint] = {}

    def _endpoint(self, address: str) -> _Endpoint:
        endpoint = self._endpoints.get(address)
        if endpoint is None:
            endpoint = self._endpoints[address] = _Endpoint(address)
        return endpoint

    async def read(self, address: str, group_id: int, index: int, offset: int, length: int):
        """Bytes [offset, offset+length) of one internal block (a buffer); raises grpc.RpcError."""
        call = self._endpoint(address).read_unit(
            pb.ReadRequest(group_id=group_id, index=index, offset=offset, length=length),
            timeout=CELL_READ_TIMEOUT_S,
        )
        parts = [wire.read_chunk_data(raw) async for raw in call]
        data = parts[0] if len(parts) == 1 else b"".join(parts)
        if len(data) != length:
            raise ShortRead(f"unit {group_id}/{index} at {address}: got {len(data)} of {length} bytes")
        return data

    async def chunk_checksums(self, address: str, group_id: int, index: int) -> pb.ChunkChecksums:
        """The stored CRC32C of every chunk of one internal block; raises grpc.RpcError."""
        return await self._endpoint(address).chunk_checksums(
            pb.ChunkChecksumsRequest(group_id=group_id, index=index), timeout=CHECKSUMS_TIMEOUT_S)

    def open_write(self, address: str, timeout: float | None = None):
        """A WriteUnit stream; write() takes pb.WriteChunk messages or wire.write_chunk() bytes."""
        return self._endpoint(address).write_unit(timeout=timeout)

    async def close(self) -> None:
        for endpoint in self._endpoints.values():
            await endpoint.channel.close()
        self._endpoints.clear()


class ShortRead(Exception):
    """A DataNode sent fewer bytes than asked: treated like any failed cell read."""
