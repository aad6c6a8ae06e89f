"""Hand-framed data messages are byte-identical to protobuf's and parse back exactly."""

import os

import pytest

from hedgefs.proto import wire
from hedgefs.proto import hedgefs_pb2 as pb


@pytest.mark.parametrize("size", [0, 1, 127, 128, 16383, 16384, 65536, 1 << 20, (4 << 20) + 3])
def test_write_chunk_matches_protobuf(size):
    data = os.urandom(size)
    assert wire.write_chunk(data) == pb.WriteChunk(data=data).SerializeToString()
    assert wire.write_chunk(memoryview(data)) == pb.WriteChunk(data=data).SerializeToString()


@pytest.mark.parametrize("size", [0, 1, 127, 128, 300, 1 << 20])
def test_read_chunk_data_is_a_view_of_the_payload(size):
    data = os.urandom(size)
    raw = pb.ReadChunk(data=data).SerializeToString()
    assert bytes(wire.read_chunk_data(raw)) == data


def test_read_chunk_falls_back_to_protobuf_for_other_shapes():
    msg = pb.ReadChunk(data=b"abc")
    raw = msg.SerializeToString() + b"\x10\x01"  # an unknown field after the data
    assert bytes(wire.read_chunk_data(raw)) == b"abc"


@pytest.mark.parametrize("size", [0, 1, 127, 128, 1 << 20])
def test_read_chunk_matches_protobuf(size):
    data = os.urandom(size)
    assert wire.read_chunk(memoryview(data)) == pb.ReadChunk(data=data).SerializeToString()
