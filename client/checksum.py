"""File checksums that do not depend on the storage layout: COMPOSITE-CRC32C, HDFS's idea.

A file's checksum is the CRC32C of its bytes, so an RS-6-3 file, an RS-3-2 file and a local file
with the same bytes have the same one. It is computed without moving data: DataNodes keep a CRC32C
per 64 KiB chunk of each internal block (the data port's CHECKSUMS request returns them), a cell whose size is a
multiple of the chunk size is a run of whole chunks (the unit's last cell ends with the block's
last, shorter chunk), and CRCs combine (ec/crc.py). So:

    plan_pieces     (pure) the file in order as pieces: a run of one unit's stored chunks
                    (ChunkRun), or a file byte range to read (ByteRange)
    file_checksum   asks each unit's DataNode for its chunk CRCs, concurrently; reads (decoding if
                    need be) every group whose cells do not align with chunks (tiny cells) or whose
                    units cannot all be asked (a dead DataNode, a unit being repaired); combines

A replicated block (REPLICATE-n) is one ChunkRun over a replica's whole block: any replica's
stored CRCs will do, so the next replica is asked before the block is read instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Awaitable, Callable, Sequence

from hedgefs.client.transport import DataNodeClient, TransferError
from hedgefs.client.locations import GroupLocation
from hedgefs.ec import layout
from hedgefs.ec.crc import combine, combine_all
from hedgefs.ec.policy import Policy
from hedgefs.plumbing import describe
from hedgefs.proto.datatransfer import crc32c

log = logging.getLogger("hedgefs.client.checksum")

ALGORITHM = "COMPOSITE-CRC32C"
STORED_CHUNK = 64 * 1024      # the DataNodes' checksum chunk; a unit that says otherwise is read
READ_STEP = 8 * 1024 * 1024   # bytes per read when a range must be read
_CONCURRENT_ASKS = 32


@dataclasses.dataclass(frozen=True)
class FileChecksum:
    crc: int
    length: int
    algorithm: str = ALGORITHM

    def __str__(self) -> str:
        return f"{self.algorithm} {self.crc:08x}"


@dataclasses.dataclass(frozen=True)
class ChunkRun:
    """``length`` bytes of the file that are unit ``index``'s internal block from chunk
    ``first_chunk`` on, in whole chunks (the last one may be the block's short last chunk)."""

    group_index: int
    index: int
    first_chunk: int
    length: int


@dataclasses.dataclass(frozen=True)
class ByteRange:
    """File bytes ``[offset_in_file, offset_in_file + length)``, to be read."""

    offset_in_file: int
    length: int


def plan_pieces(codes: Sequence[Policy], group_lengths: list[int],
                chunk: int = STORED_CHUNK) -> list[ChunkRun | ByteRange]:
    """The file's bytes, in order, as pieces whose CRCs are stored (ChunkRun) or must be read;
    ``codes[i]``: the code group i is stored in (an EC file's open tail: replicated)."""
    pieces: list[ChunkRun | ByteRange] = []
    offset = 0
    for group_index, (policy, group_length) in enumerate(zip(codes, group_lengths, strict=True)):
        if policy.replicated:
            pieces.append(ChunkRun(group_index, 0, 0, group_length))   # the block, in any replica
        elif policy.cell_size % chunk:
            pieces.append(ByteRange(offset, group_length))  # cells split chunks: no CRC covers a cell
        else:
            for cell in layout.group_range_to_cells(policy, group_length, 0, group_length):
                pieces.append(ChunkRun(group_index, cell.index, cell.offset_in_block // chunk, cell.length))
        offset += group_length
    return pieces


def run_crc(crcs: tuple[int, ...], run: ChunkRun, chunk: int = STORED_CHUNK) -> int:
    """The CRC of a run's bytes from its unit's chunk CRCs."""
    full, rest = divmod(run.length, chunk)
    parts = [(crcs[run.first_chunk + i], chunk) for i in range(full)]
    if rest:
        parts.append((crcs[run.first_chunk + full], rest))
    return combine_all(parts)[0]


ReadFn = Callable[[int, int], Awaitable[bytes]]


async def file_checksum(datanodes: DataNodeClient, policy: Policy, groups: tuple[GroupLocation, ...],
                        length: int, read: ReadFn) -> FileChecksum:
    """The COMPOSITE-CRC32C of a file from its layout; ``read(offset, length)`` reads file bytes."""
    codes = [g.code(policy) for g in groups]   # each group in its own code (an open tail's replicas)
    pieces = plan_pieces(codes, [g.length for g in groups])
    wanted = sorted({(p.group_index, p.index) for p in pieces if isinstance(p, ChunkRun)})
    limit = asyncio.Semaphore(_CONCURRENT_ASKS)

    async def ask(group_index: int, index: int):
        return await _unit_crcs(datanodes, limit, codes[group_index], groups[group_index], index)

    answers = await asyncio.gather(*(ask(g, i) for g, i in wanted))
    crcs = dict(zip(wanted, answers))
    unreadable = {g for (g, _), c in crcs.items() if c is None}
    crc, total, offset = 0, 0, 0
    done_groups: set[int] = set()
    group_offsets = [sum(g.length for g in groups[:i]) for i in range(len(groups))]
    for piece in pieces:
        if isinstance(piece, ChunkRun) and piece.group_index in unreadable:
            if piece.group_index in done_groups:
                continue
            done_groups.add(piece.group_index)
            piece = ByteRange(group_offsets[piece.group_index], groups[piece.group_index].length)
        if isinstance(piece, ChunkRun):
            piece_crc, n = run_crc(crcs[(piece.group_index, piece.index)], piece), piece.length
        else:
            piece_crc, n = await _read_crc(read, piece), piece.length
        crc = combine(crc, piece_crc, n)
        total += n
    if total != length:
        raise AssertionError(f"checksum covered {total} bytes of a {length}-byte file")  # a planning bug
    return FileChecksum(crc, total)


async def _unit_crcs(datanodes: DataNodeClient, limit: asyncio.Semaphore, policy: Policy,
                     group: GroupLocation, index: int) -> tuple[int, ...] | None:
    """A unit's stored chunk CRCs, or None if its DataNode cannot give them as planned. For a
    replicated policy, any replica's (unit ``index``'s first)."""
    if policy.replicated:
        for replica in sorted(group.units, key=lambda i: (i != index, i)):
            crcs = await _one_unit_crcs(datanodes, limit, policy, group, replica)
            if crcs is not None:
                return crcs
        return None
    return await _one_unit_crcs(datanodes, limit, policy, group, index)


async def _one_unit_crcs(datanodes: DataNodeClient, limit: asyncio.Semaphore, policy: Policy,
                         group: GroupLocation, index: int) -> tuple[int, ...] | None:
    loc = group.units.get(index)
    if loc is None:
        return None
    async with limit:
        try:
            answer = await datanodes.chunk_checksums(loc.data_address, group.id, index, generation=group.generation,
                                                     token=loc.token, peer=loc.datanode_id)
        except (TransferError, TimeoutError) as err:
            log.info("no chunk checksums for unit %d/%d from %s (%s): reading its group instead",
                     group.id, index, loc.datanode_id, describe(err))
            return None
    expected = layout.unit_length(policy, group.length, index)
    if answer.chunk_size != STORED_CHUNK or answer.length != expected:
        log.info("unit %d/%d on %s: %d bytes in %d-byte chunks, expected %d in %d: reading its group instead",
                 group.id, index, loc.datanode_id, answer.length, answer.chunk_size, expected, STORED_CHUNK)
        return None
    return tuple(answer.crcs)


async def _read_crc(read: ReadFn, piece: ByteRange) -> int:
    crc = 0
    for start in range(piece.offset_in_file, piece.offset_in_file + piece.length, READ_STEP):
        n = min(READ_STEP, piece.offset_in_file + piece.length - start)
        crc = crc32c(await read(start, n), crc)
    return crc


def local_file_checksum(path: str) -> FileChecksum:
    """The same checksum for a local file: CRC32C of its bytes, read in steps."""
    crc, total = 0, 0
    with open(path, "rb") as f:
        while True:
            data = f.read(READ_STEP)
            if not data:
                break
            crc = crc32c(data, crc)
            total += len(data)
    return FileChecksum(crc, total)
