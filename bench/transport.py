"""The machine's limit for the data path: a plain socket probe, no hedgefs code on either side.

A server process ``sendfile``s a cached file into k TCP streams on loopback whose client
threads ``recv_into`` one reused 1 MiB buffer each (download), and ``recv_into``s what k client
streams ``sendall`` from one buffer (upload). No protocol, no checksums, no copies: what this
machine can move between two processes, which is what ``bench throughput`` puts hedgefs beside.
CPU is the client process's own (``os.times``), so it compares with the client's cost per GiB.

``python -m hedgefs.bench.transport FILE`` is the server (it prints its port).
"""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time

_REQUEST = struct.Struct("<cQQ")   # b"D" (download) / b"U" (upload), offset, length
_BUFFER = 1 << 20


def _serve(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)

    def handle(conn: socket.socket) -> None:
        with conn:
            head = conn.recv(_REQUEST.size, socket.MSG_WAITALL)
            if len(head) < _REQUEST.size:
                return
            op, offset, length = _REQUEST.unpack(head)
            if op == b"D":
                sent = 0
                while sent < length:
                    sent += os.sendfile(conn.fileno(), fd, offset + sent, length - sent)
            else:
                buf = memoryview(bytearray(_BUFFER))
                got = 0
                while got < length:
                    n = conn.recv_into(buf, min(len(buf), length - got))
                    if not n:
                        return
                    got += n
                conn.sendall(b"k")

    while True:
        conn, _ = listener.accept()
        threading.Thread(target=handle, args=(conn,), daemon=True).start()


def _stream(port: int, op: bytes, offset: int, length: int) -> None:
    buf = memoryview(bytearray(_BUFFER))
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(_REQUEST.pack(op, offset, length))
        if op == b"D":
            got = 0
            while got < length:
                n = s.recv_into(buf, min(len(buf), length - got))
                if not n:
                    raise ConnectionError("probe server closed early")
                got += n
        else:
            sent = 0
            while sent < length:
                n = min(len(buf), length - sent)
                s.sendall(buf[:n])
                sent += n
            s.recv(1)


def _timed(port: int, op: bytes, size: int, streams: int) -> tuple[float, float]:
    """(MB/s, client CPU seconds per GiB) of moving ``size`` bytes in ``streams`` streams."""
    share = size // streams
    threads = [threading.Thread(target=_stream, args=(port, op, i * share, share)) for i in range(streams)]
    cpu0, t0 = os.times(), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu1 = time.perf_counter() - t0, os.times()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    moved = share * streams
    return moved / wall / 1e6, cpu / (moved / (1 << 30))


def run_socket_probe(path: str, size: int, streams: int = 6) -> dict:
    """Download and upload MB/s (10^6 B) and client CPU s/GiB, with 1 and ``streams`` streams,
    over the first ``size`` bytes of ``path`` (read it once first, so it is in the page cache)."""
    server = subprocess.Popen([sys.executable, "-m", "hedgefs.bench.transport", path], stdout=subprocess.PIPE,
                              text=True)
    try:
        port = int(server.stdout.readline())
        _timed(port, b"D", min(size, 16 << 20), 1)   # warm up
        out = {}
        for n in sorted({1, streams}):
            down, down_cpu = _timed(port, b"D", size, n)
            up, up_cpu = _timed(port, b"U", size, n)
            out[str(n)] = {"download_mb_s": round(down, 1), "upload_mb_s": round(up, 1),
                           "download_cpu_s_per_gib": round(down_cpu, 3), "upload_cpu_s_per_gib": round(up_cpu, 3)}
        return {"streams": out, "bytes": size}
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    _serve(sys.argv[1])
