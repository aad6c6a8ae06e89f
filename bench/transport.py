"""The machine's limit for the data path: a plain socket probe, no hedgefs code on either side.

A server process ``sendfile``s a cached file into k TCP streams on loopback whose client
threads ``recv_into`` one reused 1 MiB buffer each (download), and ``recv_into``s what k client
streams ``sendall`` from one buffer (upload). No protocol, no checksums, no copies: what this
machine can move between two processes, which is what ``bench throughput`` puts hedgefs beside.
CPU is the client process's own (``os.times``), so it compares with the client's cost per GiB.

With ``tls`` (a security material directory, security/material.py) both sides speak mutual TLS
with ``ssl`` as a secure cluster's data port does: the server reads and ``sendall``s (TLS has no
``sendfile``), the client ``recv_into``s; what TLS itself costs here, for ``bench security``.

``python -m hedgefs.bench.transport FILE [MATERIAL_DIR]`` is the server (it prints its port).
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


def _tls(material_dir: str | None, server: bool):
    if not material_dir:
        return None
    from hedgefs.security import tls
    from hedgefs.security.material import load_credential

    if server:
        return tls.server_context(load_credential(os.path.join(material_dir, "dn1.pem")))
    return tls.client_context(load_credential(os.path.join(material_dir, "admin.pem")))


def _serve(path: str, material_dir: str | None = None) -> None:
    fd = os.open(path, os.O_RDONLY)
    listener = socket.create_server(("127.0.0.1", 0))
    context = _tls(material_dir, server=True)
    print(listener.getsockname()[1], flush=True)

    def handle(conn: socket.socket) -> None:
        if context is not None:
            conn = context.wrap_socket(conn, server_side=True)
        with conn:
            head = b""
            while len(head) < _REQUEST.size:   # (no MSG_WAITALL: an ssl socket takes no flags)
                more = conn.recv(_REQUEST.size - len(head))
                if not more:
                    return
                head += more
            op, offset, length = _REQUEST.unpack(head)
            if op == b"D" and context is not None:
                buf = memoryview(bytearray(256 << 10))
                sent = 0
                while sent < length:
                    n = os.preadv(fd, [buf[:min(len(buf), length - sent)]], offset + sent)
                    conn.sendall(buf[:n])
                    sent += n
            elif op == b"D":
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


def _stream(port: int, op: bytes, offset: int, length: int, context=None) -> None:
    buf = memoryview(bytearray(_BUFFER))
    s = socket.create_connection(("127.0.0.1", port))
    if context is not None:
        s = context.wrap_socket(s, server_hostname="dn1.datanode.hedgefs")
    with s:
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


def _timed(port: int, op: bytes, size: int, streams: int, context=None) -> tuple[float, float]:
    """(MB/s, client CPU seconds per GiB) of moving ``size`` bytes in ``streams`` streams."""
    share = size // streams
    errors: list[BaseException] = []

    def stream(i: int) -> None:
        try:
            _stream(port, op, i * share, share, context)
        except BaseException as err:   # a stream that failed must not pass for a fast one
            errors.append(err)

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(streams)]
    cpu0, t0 = os.times(), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu1 = time.perf_counter() - t0, os.times()
    if errors:
        raise RuntimeError(f"socket probe: {len(errors)} of {streams} streams failed: {errors[0]!r}")
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    moved = share * streams
    return moved / wall / 1e6, cpu / (moved / (1 << 30))


def run_socket_probe(path: str, size: int, streams: int = 6, tls: str | None = None) -> dict:
    """Download and upload MB/s (10^6 B) and client CPU s/GiB, with 1 and ``streams`` streams,
    over the first ``size`` bytes of ``path`` (read it once first, so it is in the page cache).
    ``tls``: a material directory: both sides mutual TLS (see the module docstring)."""
    server = subprocess.Popen([sys.executable, "-m", "hedgefs.bench.transport", path, *([tls] if tls else [])],
                              stdout=subprocess.PIPE, text=True)
    context = _tls(tls, server=False)
    try:
        port = int(server.stdout.readline())
        _timed(port, b"D", min(size, 16 << 20), 1, context)   # warm up
        out = {}
        for n in sorted({1, streams}):
            down, down_cpu = _timed(port, b"D", size, n, context)
            up, up_cpu = _timed(port, b"U", size, n, context)
            out[str(n)] = {"download_mb_s": round(down, 1), "upload_mb_s": round(up, 1),
                           "download_cpu_s_per_gib": round(down_cpu, 3), "upload_cpu_s_per_gib": round(up_cpu, 3)}
        return {"streams": out, "bytes": size}
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
