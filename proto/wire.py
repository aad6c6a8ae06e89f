"""The two data-carrying messages, framed by hand so cell bytes are copied once.

protobuf would copy a cell into a message and again to serialise it (or to parse it): on the
client's event loop thread, and in every DataNode read. WriteChunk{data} and ReadChunk{data} are
one length-delimited field each, so framing is a tag, a varint and the bytes; the RPCs that
carry them are registered with these functions instead of protobuf's (de)serialisers.
tests/test_wire.py checks both against protobuf.
"""

from hedgefs.proto import hedgefs_pb2 as pb

_WRITE_DATA_TAG = b"\x22"  # WriteChunk.data: field 4, wire type 2 (length-delimited)
_READ_DATA_TAG = 0x0A  # ReadChunk.data: field 1, wire type 2


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def write_chunk(data) -> bytes:
    """A serialised WriteChunk carrying only `data` (any buffer)."""
    if not len(data):
        return b""
    return b"".join((_WRITE_DATA_TAG, _varint(len(data)), data))


def read_chunk(data) -> bytes:
    """A serialised ReadChunk carrying `data` (any buffer): what a DataNode sends."""
    if not len(data):
        return b""
    return b"".join((b"\x0a", _varint(len(data)), data))


def serialize(message) -> bytes:
    """Pass pre-framed bytes through; serialise protobuf messages (headers, finalize) as usual."""
    return message if isinstance(message, bytes) else message.SerializeToString()


def read_chunk_data(raw: bytes) -> memoryview:
    """The data of a serialised ReadChunk, as a view into `raw` (no copy)."""
    view = memoryview(raw)
    if not raw:
        return view
    if raw[0] != _READ_DATA_TAG:
        # Not the shape we frame by hand (a newer server?): let protobuf decide.
        return memoryview(pb.ReadChunk.FromString(raw).data)
    length, shift, pos = 0, 0, 1
    while True:
        byte = raw[pos]
        length |= (byte & 0x7F) << shift
        pos += 1
        if not byte & 0x80:
            break
        shift += 7
    if pos + length != len(raw):
        return memoryview(pb.ReadChunk.FromString(raw).data)
    return view[pos:pos + length]
