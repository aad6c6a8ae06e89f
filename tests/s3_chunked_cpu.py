"""CPU of decoding an aws-chunked body (boto3's default over HTTPS: STREAMING-UNSIGNED-PAYLOAD-TRAILER,
1 MiB chunks) as the gateway does: sigv4.ChunkedBody fed the 256 KiB pieces the event loop receives,
its payload joined into 6 MiB stripes (body.Body._take). No cluster, no network: the decoder alone.

    python tests/s3_chunked_cpu.py [MiB]     # prints CPU-s per 256 MiB, best of 5

A script beside tests/s3_conformance.py, not a test (nor in bench/: bench may not import the gateway).

Run it with another tree's python (its hedgefs.s3) for an A/B in one sitting.
"""

from __future__ import annotations

import os
import sys
import time

from hedgefs.s3 import sigv4

CHUNK, PIECE, STRIPE = 1 << 20, 256 << 10, 6 << 20


def main(mib: int = 64) -> None:
    data = os.urandom(mib << 20)
    wire = b"".join(b"%x\r\n" % len(data[i:i + CHUNK]) + data[i:i + CHUNK] + b"\r\n"
                    for i in range(0, len(data), CHUNK)) + b"0\r\nx-amz-checksum-crc32:AAAAAA==\r\n\r\n"
    pieces = [wire[i:i + PIECE] for i in range(0, len(wire), PIECE)]
    best = None
    for _ in range(5):
        decoder = sigv4.ChunkedBody(None, sigv4.STREAMING_UNSIGNED_TRAILER)
        pending, got, out = [], 0, 0
        started = time.process_time()
        for piece in pieces:
            for part in decoder.feed(piece):
                pending.append(part)
                got += len(part)
                if got >= STRIPE:
                    out += len(b"".join(pending))
                    pending, got = [], 0
        out += len(b"".join(pending))
        decoder.finish()
        seconds = (time.process_time() - started) * 256 / mib
        assert out == len(data)
        best = seconds if best is None else min(best, seconds)
    print(f"aws-chunked decode + join: {best:.3f} CPU-s per 256 MiB (best of 5, {mib} MiB each)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 64)
