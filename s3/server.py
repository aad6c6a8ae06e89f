"""Run the gateway: bind, serve until SIGINT/SIGTERM, close the FileSystems."""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import ssl
import sys

from aiohttp import web

from hedgefs.malloc import tune_malloc
from hedgefs.s3.app import Gateway, make_app

# Buffers up to this size come from the heap, reused once freed (hedgefs/malloc.py): a PUT's
# stripes (6 MiB for RS-6-3-1024k) and a GET's windows (8 MiB), which the CLI's 4 MiB leaves to
# mmap, each a fresh mapping page-faulted in: 68,000 faults per 256 MiB PUT or GET (8,000-10,000
# now). An arena keeps at most TRIM_THRESHOLD free at its top (the CLI's 32 MiB kept a 1 GiB PUT's
# peak 20-35 MB higher); the rest of the heap is handed back between transfers (memory.py).
MMAP_THRESHOLD = 16 << 20
TRIM_THRESHOLD = 12 << 20

log = logging.getLogger("hedgefs.s3")


async def _serve(gateway: Gateway, host: str, port: int, ssl_context: ssl.SSLContext | None) -> None:
    runner = web.AppRunner(make_app(gateway), access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context, reuse_address=True)
    try:
        await site.start()
    except OSError as err:
        await runner.cleanup()
        raise OSError(err.errno, f"cannot listen on {host}:{port}: {err.strerror}") from None
    # A long-lived service's start-up heap (aiohttp, gRPC, protobuf: some 10^5-10^6 objects) into
    # the permanent generation: CPython's full collections otherwise walk it all, with the GIL
    # held, every time the heap grows by a quarter; under 4 clients of ranged GETs that was a
    # 60-90 ms pause every ~10 s, each the slowest GETs of its run (their p99.9: 2026-12-02-s3-perf).
    gc.collect()
    gc.freeze()
    bound = site._server.sockets[0].getsockname()[1] if site._server and site._server.sockets else port
    scheme = "https" if ssl_context else "http"
    print(f"s3: serving {scheme}://{host}:{bound}/ for the NameNode at {gateway.namenode}", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def serve(gateway: Gateway, host: str, port: int, ssl_context: ssl.SSLContext | None = None) -> None:
    tune_malloc(mmap_threshold=MMAP_THRESHOLD, trim_threshold=TRIM_THRESHOLD)
    try:
        asyncio.run(_serve(gateway, host, port, ssl_context))
    finally:
        gateway.close()
