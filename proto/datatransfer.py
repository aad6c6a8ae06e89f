"""The data transfer protocol: unit reads and writes as plain TCP streams, beside gRPC.

Control calls (NameNode, heartbeats, fault knobs) stay gRPC; the bytes of internal blocks move
over a DataNode's *data port* in this small versioned protocol (HDFS does the same with its
DataTransferProtocol), so a read is one request, a few bytes of header and then ``sendfile`` from
the page cache into the socket, and the client ``recv_into``'s its own buffer: no per-message
work, no copies in between. All integers are little-endian.

Request (client -> DataNode), then ``token_length`` bytes of block token (security/tokens.py: a
secure DataNode checks it before anything else, and refuses with PERMISSION_DENIED; an insecure
one ignores it)::

    magic "HFDT" | version u8 | op u8 | flags u16 | group_id u64 | index u32 | generation u64 |
    offset u64 | length u64 | token_length u16

A unit is (group_id, index, generation): the generation the NameNode issued with its block group.
A DataNode holding the unit (group_id, index) of another generation answers NOT_FOUND.

In a secure cluster the connection is TLS (mutual, against the cluster CA) from its first byte.

Response header (DataNode -> client), then ``message_length`` bytes of UTF-8 (errors say why)::

    status u8 | reserved u8 | message_length u16

READ (``offset``, ``length``: the range wanted). An OK header is followed by the range actually
sent, widened to whole checksum chunks so the reader can verify every chunk it uses, the chunks'
stored CRC32C values (from the DataNode's sidecar: the DataNode does not read the bytes it
serves), and the bytes::

    start u64 | nbytes u64 | chunk u32 | CRC32C u32 x ceil(nbytes / chunk) | nbytes bytes

WRITE (``length``: the unit's length if known, else 0 and given at the end). A unit is written
once: a WRITE of a unit the DataNode holds is refused (ALREADY_EXISTS), and so is one that another
write commits first. The DataNode answers with a header at once (OK: send; else why not, e.g.
BUSY), then the client sends packets::

    kind u8 | value u64        DATA: value = number of bytes that follow; END: value = unit length

and after END the DataNode answers with a header and, if OK, ``stored_length u64``.

APPEND (``offset``: the unit's committed length as the writer knows it, with an append token; ``length``: the number of
bytes that follow the request at once, at most ``MAX_APPEND_BYTES``): the bytes are appended in
place to the stored unit (a replica of a replicated open tail) and made durable; the answer is a
header and, if OK, ``stored_length u64`` (the unit's new length). One round trip: the DataNode
reads the bytes before it answers, so a refusal keeps the stream in step. An ``offset`` other than
the unit's committed length is refused (FAILED_PRECONDITION: a stale writer, or one that missed an
append) and changes nothing. A refusal before the bytes are read (a bad token, BUSY, too long)
closes the connection.

CHECKSUMS: the unit's stored CRC32C values, no data (what a file checksum is combined from). An
OK header is followed by ``unit_length u64 | chunk u32`` and the CRCs of every chunk.

VERIFY (a reader found bytes of this unit that failed their checksum): the DataNode checks its
stored copy from disk, chunk by chunk, and answers OK (intact: the bytes went bad on the way) or
DATA_LOSS (damaged: it has told the NameNode, which has the unit rebuilt elsewhere). So a bad
link or a reader's bad memory never costs a healthy unit, and a bad disk is repaired.

A connection carries one request at a time and is reused for the next one; closing it is how a
reader cancels (the DataNode stops and counts the read as cancelled).

This module is the wire format plus a blocking client (``read_range``), which the DataNode's
repair worker and the tests use; the client library has its own asyncio transport on top of the
same helpers.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import socket
import struct


def _load_crc32c():
    """The crc32c package's C function. Its ``__init__`` looks up its own version through
    importlib.metadata, ~30 ms of every CLI start-up; the extension module alone costs ~1 ms."""
    spec = importlib.util.find_spec("crc32c")
    for location in spec.submodule_search_locations or ():
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = f"{location}/_crc32c{suffix}"
            try:
                ext = importlib.util.spec_from_file_location("crc32c._crc32c", path)
                module = importlib.util.module_from_spec(ext)
                ext.loader.exec_module(module)
                return module.crc32c
            except (ImportError, OSError):
                continue
    from crc32c import crc32c  # whatever the layout: the package itself
    return crc32c


crc32c = _load_crc32c()   # crc32c(data, crc=0) -> int

MAGIC = b"HFDT"
VERSION = 2     # 2: generations (and block tokens checked)

OP_READ = 1
OP_WRITE = 2
OP_VERIFY = 3
OP_CHECKSUMS = 4
OP_APPEND = 5

MAX_APPEND_BYTES = 16 * 1024 * 1024   # one APPEND's bytes (a sync of an open tail: usually a few KiB)

REQUEST = struct.Struct("<4sBBHQIQQQH")
RESPONSE = struct.Struct("<BBH")
READ_INFO = struct.Struct("<QQI")
UNIT_INFO = struct.Struct("<QI")
PACKET = struct.Struct("<BQ")
STORED = struct.Struct("<Q")

PACKET_DATA = 1
PACKET_END = 2

# Status codes; their names are what users read in error messages (like gRPC's).
OK = 0
BUSY = 1              # the DataNode is serving --max-streams streams: read elsewhere
NOT_FOUND = 2
OUT_OF_RANGE = 3
UNAVAILABLE = 4       # the DataNode could not serve it right now (injected error, stopping)
DATA_LOSS = 5         # the stored unit is damaged (e.g. its sidecar)
INVALID_ARGUMENT = 6  # a malformed request, or a write whose length does not add up
INTERNAL = 7          # local I/O failed on the DataNode
RESOURCE_EXHAUSTED = 8  # disk full
PERMISSION_DENIED = 9   # a bad, expired or missing block token (security)
ALREADY_EXISTS = 10     # a WRITE of a unit that is stored: units are written once
FAILED_PRECONDITION = 11  # an APPEND at an offset other than the unit's length: a stale writer

STATUS_NAMES = {OK: "OK", BUSY: "BUSY", NOT_FOUND: "NOT_FOUND", OUT_OF_RANGE: "OUT_OF_RANGE",
                UNAVAILABLE: "UNAVAILABLE", DATA_LOSS: "DATA_LOSS", INVALID_ARGUMENT: "INVALID_ARGUMENT",
                INTERNAL: "INTERNAL", RESOURCE_EXHAUSTED: "RESOURCE_EXHAUSTED",
                PERMISSION_DENIED: "PERMISSION_DENIED", ALREADY_EXISTS: "ALREADY_EXISTS",
                FAILED_PRECONDITION: "FAILED_PRECONDITION"}

MAX_TOKEN_BYTES = 4096


class TransferError(Exception):
    """A unit read or write that failed; ``str()`` is ``STATUS: why`` (one line for a user)."""

    def __init__(self, status: str, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class Busy(TransferError):
    """The DataNode refused a stream (--max-streams reached): treat it like a slow DataNode."""

    def __init__(self, message: str):
        super().__init__("BUSY", message)


class ChecksumMismatch(TransferError):
    """Bytes received do not match the DataNode's stored CRC32C: the unit read failed."""

    def __init__(self, group_id: int, index: int, offset: int, where: str):
        super().__init__("DATA_LOSS", f"checksum mismatch in unit {group_id}/{index} at offset {offset} from {where}")
        self.group_id, self.index, self.offset = group_id, index, offset


def error_for(status: int, message: str) -> TransferError:
    if status == BUSY:
        return Busy(message)
    return TransferError(STATUS_NAMES.get(status, f"STATUS_{status}"), message)


def pack_request(op: int, group_id: int, index: int, offset: int, length: int, token: bytes = b"", *,
                 generation: int) -> bytes:
    return REQUEST.pack(MAGIC, VERSION, op, 0, group_id, index, generation, offset, length, len(token)) + token


def pack_response(status: int, message: str = "") -> bytes:
    raw = message.encode()[:60000]
    return RESPONSE.pack(status, 0, len(raw)) + raw


def chunk_span(offset: int, length: int, chunk: int, unit_length: int) -> tuple[int, int]:
    """The range [start, start+nbytes) of whole checksum chunks that covers [offset, offset+length)."""
    start = offset // chunk * chunk
    end = min(unit_length, -(-(offset + length) // chunk) * chunk) if length else start
    return start, end - start


def first_bad_chunk(view: memoryview, crcs, chunk: int) -> int | None:
    """Offset in ``view`` of the first chunk whose CRC32C differs from ``crcs``, or None."""
    for n, pos in enumerate(range(0, len(view), chunk)):
        if crc32c(view[pos:pos + chunk]) != crcs[n]:
            return pos
    return None


# ---------------------------------------------------------------- a blocking client

def recv_exactly(sock: socket.socket, view: memoryview) -> None:
    got, n = 0, len(view)
    while got < n:
        r = sock.recv_into(view[got:], n - got)
        if not r:
            raise ConnectionError("connection closed by the DataNode")
        got += r


def recv_response(sock: socket.socket, where: str) -> None:
    """Read a response header; raise its error unless it is OK."""
    head = bytearray(RESPONSE.size)
    recv_exactly(sock, memoryview(head))
    status, _, n = RESPONSE.unpack(head)
    message = bytearray(n)
    recv_exactly(sock, memoryview(message))
    if status != OK:
        raise error_for(status, message.decode(errors="replace") or f"refused by {where}")


def recv_read_info(sock: socket.socket) -> tuple[int, int, int, tuple[int, ...]]:
    """After an OK read response: (start, nbytes, chunk, CRCs)."""
    raw = bytearray(READ_INFO.size)
    recv_exactly(sock, memoryview(raw))
    start, nbytes, chunk = READ_INFO.unpack(raw)
    if chunk <= 0:
        raise TransferError("DATA_LOSS", "bad checksum chunk size in a read response")
    count = -(-nbytes // chunk)
    crcs = bytearray(4 * count)
    recv_exactly(sock, memoryview(crcs))
    return start, nbytes, chunk, struct.unpack(f"<{count}I", crcs)


def connect(address: str, timeout: float, wrap=None) -> socket.socket:
    """A blocking connection to a data port; ``wrap(sock)`` makes it TLS (a secure cluster)."""
    host, _, port = address.rpartition(":")
    sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if wrap is not None:
        try:
            sock = wrap(sock)
        except BaseException:
            sock.close()
            raise
    return sock


def verify(address: str, group_id: int, index: int, *, timeout: float = 30.0, token: bytes = b"",
           generation: int, wrap=None) -> str:
    """Ask the DataNode at ``address`` to check its copy of a unit (OP_VERIFY); its answer."""
    with connect(address, timeout, wrap) as sock:
        sock.sendall(pack_request(OP_VERIFY, group_id, index, 0, 0, token, generation=generation))
        head = bytearray(RESPONSE.size)
        recv_exactly(sock, memoryview(head))
        status, _, n = RESPONSE.unpack(head)
        message = bytearray(n)
        recv_exactly(sock, memoryview(message))
    return f"{STATUS_NAMES.get(status, status)}: {message.decode(errors='replace')}"


def read_range(sock: socket.socket, group_id: int, index: int, offset: int, length: int, *,
               where: str = "the DataNode", token: bytes = b"", generation: int) -> memoryview:
    """Bytes [offset, offset+length) of a unit over a connected blocking socket, every chunk
    verified against the DataNode's CRC32C. The socket may be reused afterwards."""
    sock.sendall(pack_request(OP_READ, group_id, index, offset, length, token, generation=generation))
    recv_response(sock, where)
    start, nbytes, chunk, crcs = recv_read_info(sock)
    if start > offset or start + nbytes < offset + length:
        raise TransferError("DATA_LOSS", f"{where} sent [{start}, {start + nbytes}) for [{offset}, {offset + length})")
    buf = memoryview(bytearray(nbytes))
    recv_exactly(sock, buf)
    bad = first_bad_chunk(buf, crcs, chunk)
    if bad is not None:
        raise ChecksumMismatch(group_id, index, start + bad, where)
    return buf[offset - start:offset - start + length]


def append(sock: socket.socket, group_id: int, index: int, offset: int, data, *,
           where: str = "the DataNode", token: bytes = b"", generation: int) -> int:
    """Append ``data`` to a stored unit whose committed length is ``offset`` (OP_APPEND) over a
    connected blocking socket; the unit's new length. The socket may be reused afterwards."""
    if len(data) > MAX_APPEND_BYTES:
        raise ValueError(f"an append carries at most {MAX_APPEND_BYTES} bytes, not {len(data)}")
    sock.sendall(pack_request(OP_APPEND, group_id, index, offset, len(data), token, generation=generation))
    sock.sendall(data)
    recv_response(sock, where)
    raw = bytearray(STORED.size)
    recv_exactly(sock, memoryview(raw))
    return STORED.unpack(raw)[0]
