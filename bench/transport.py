"""Raw gRPC throughput between this process and one DataNode: the ceiling of the data path.

Uses the DataNode's Source/Sink probes (no disk, no checksums) with the client's own asyncio
channel settings and the data path's message size, and the same concurrency a stripe uses
(k streams at once), so `bench throughput` can state put and get as a fraction of it.
"""

import asyncio
import time

import grpc

from hedgefs.proto import CHUNK_BYTES, GRPC_OPTIONS
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto import hedgefs_pb2_grpc


async def _measure(address: str, total_bytes: int, streams: int, chunk_bytes: int) -> dict:
    async with grpc.aio.insecure_channel(address, options=GRPC_OPTIONS) as channel:
        stub = hedgefs_pb2_grpc.DataNodeStub(channel)
        # At least one whole message per stream: smaller totals would measure nothing.
        per_stream = max(chunk_bytes, total_bytes // streams // chunk_bytes * chunk_bytes)

        async def download() -> int:
            n = 0
            async for chunk in stub.Source(pb.SourceRequest(total_bytes=per_stream, chunk_bytes=chunk_bytes)):
                n += len(chunk.data)
            return n

        payload = pb.ReadChunk(data=bytes(chunk_bytes))

        async def upload() -> int:
            async def messages():
                for _ in range(per_stream // chunk_bytes):
                    yield payload
            return (await stub.Sink(messages())).length

        await download()  # warm the channel up
        started = time.perf_counter()
        got = sum(await asyncio.gather(*(download() for _ in range(streams))))
        down_s = time.perf_counter() - started
        started = time.perf_counter()
        sent = sum(await asyncio.gather(*(upload() for _ in range(streams))))
        up_s = time.perf_counter() - started
    return {"download_mb_s": got / down_s / 1e6, "upload_mb_s": sent / up_s / 1e6,
            "streams": streams, "message_bytes": chunk_bytes, "bytes": total_bytes}


def run_transport_bench(address: str, total_bytes: int = 256 << 20, streams: int = 6,
                        chunk_bytes: int = CHUNK_BYTES) -> dict:
    """MB/s (10^6 bytes) moved down (Source) and up (Sink) to the DataNode at `address`."""
    return asyncio.run(_measure(address, total_bytes, streams, chunk_bytes))
