"""An erasure-coded file's open tail (issue 45 item 1): its last, partial block group kept as
m + 1 replicas while the file is written, so that an hsync costs an APPEND of the new bytes to
each replica (and one length record at the NameNode), not a rewrite of the whole group.

Windows Azure Storage's extents, in HDFS's words: the NameNode's Sync of an EC file places the
tail (``AppendResponse.tail``: a REPLICATE-(m+1) group, its units with append tokens); each
hsync APPENDs the bytes not yet there to every replica in parallel (the first at offset 0
creates it) and then tells the NameNode the length (SyncLength), which makes the file grow to
it. Every hsynced byte is then on m + 1 DataNodes: it survives the loss of any m. The write's
Complete seals the tail: its bytes, erasure coded as the file's last group by the striped
writer all along, take the tail's place in one record, and the replicas go.

A replica that fails or refuses (a stale offset: it missed an append), or stalls, ends the open
tail (``TailBroken``): the writer's next hsync is a Sync again (copy-on-write of the last group),
as HDFS's pipeline recovery would rebuild the pipeline; what earlier hsyncs made durable stays.
A replica stalls as a striped writer's stream does (writer.py's ``keep``): once KEEP replicas
have answered an append (the floor the NameNode requires of the tail's SyncLength, its default
--min-replicas, 2; the writer's keep of a replicated group, k + 1 = 2), the rest get
max(FINISH_STALL_FLOOR_S, STALL_FACTOR x that time), set then and never shortened; with fewer
answers, WRITE_TIMEOUT_S whatever the others do. So an hsync never waits on a frozen DataNode:
two silent replicas of four cost it ~1 s, not the 20 s cap, and never the first (fastest) answer
alone sets the allowance. Where it differs from the writer: the writer drops a stalled stream and
carries on with the others; the tail needs every replica to hold every hsynced byte, so a stall
gives it up (the hsync is a Sync).

close may go on without replicas whose DataNodes failed in the write (``leave_out``: file_writer.py's
``_hold_tail``): the appends then go to the others, and its SyncLength names them.
"""

from __future__ import annotations

import asyncio

from hedgefs.client.errors import HedgefsError
from hedgefs.client.unit_writes import append_unit
from hedgefs.client.writer import FINISH_STALL_FLOOR_S, STALL_FACTOR, WRITE_TIMEOUT_S
from hedgefs.proto import datatransfer as dt
from hedgefs.proto import hedgefs_pb2 as pb


KEEP = 2   # replicas whose answer starts the stall allowance (the module; at most all but one)


class TailBroken(HedgefsError):
    """A replica of the open tail did not take an append: the tail is given up (``datanode_id``:
    the replica's, kept off the next tail)."""

    def __init__(self, message: str, datanode_id: str = ""):
        super().__init__(message)
        self.datanode_id = datanode_id


class OpenTail:
    """The open tail of one write: its group (``pb.BlockGroup``, replicated), the file offset it
    starts at (a multiple of the file's group size) and how many bytes every replica holds."""

    def __init__(self, datanodes, group: pb.BlockGroup, start: int, room: int):
        self.group, self.start, self.room = group, start, room
        self.units = list(group.units)   # the replicas appended to (all of the group's but those left out)
        self.length = 0   # bytes on every replica, from ``start``
        self._datanodes = datanodes

    def leave_out(self, datanode_ids) -> None:
        """Go on without the replicas on ``datanode_ids``: the next appends skip them, and the
        SyncLength that follows names the others (``replicas``), so that the NameNode leaves them
        out of the tail too (``SyncLength.left_out``)."""
        self.units = [u for u in self.units if u.datanode_id not in datanode_ids]

    @property
    def replicas(self) -> list[int]:
        """The unit indexes of the replicas appended to."""
        return [u.index for u in self.units]

    @property
    def end(self) -> int:
        """The file offset every replica holds the bytes up to."""
        return self.start + self.length

    def fits(self, n: int) -> bool:
        """Can ``n`` more bytes go to the tail? It holds less than one group: the bytes that
        complete a group go by a Sync, which seals it (the NameNode refuses a full tail)."""
        return self.length + n < self.room

    async def append(self, data: bytes) -> int:
        """APPEND ``data`` to every replica, in parallel, a piece of at most MAX_APPEND_BYTES at
        a time; the file offset now on all of them. TailBroken if any fails."""
        view = memoryview(data)
        for at in range(0, len(view), dt.MAX_APPEND_BYTES):
            piece = view[at:at + dt.MAX_APPEND_BYTES]
            await self._everywhere(piece)
            self.length += len(piece)
        return self.end

    async def _everywhere(self, piece) -> None:
        """APPEND ``piece`` to every replica; TailBroken at the first that fails, refuses or
        stalls (the others' appends are cancelled: the tail is given up either way). The stall
        allowance is set once KEEP have answered (all but one of two), never shortened."""
        loop = asyncio.get_running_loop()
        began = loop.time()
        tasks = {asyncio.ensure_future(self._one(u, piece)): u for u in self.units}
        keep = max(1, min(KEEP, len(tasks) - 1))
        pending, deadline, allowed = set(tasks), began + WRITE_TIMEOUT_S, False
        try:
            while pending:
                done, pending = await asyncio.wait(pending, timeout=max(0.0, deadline - loop.time()),
                                                   return_when=asyncio.FIRST_COMPLETED)
                if not done:
                    unit = tasks[min(pending, key=lambda t: tasks[t].index)]
                    others = "while others took theirs" if len(pending) < len(tasks) else "nor from the others"
                    raise TailBroken(f"the open tail's replica {self.group.id}/{unit.index} on {unit.datanode_id}: "
                                     f"no answer in {loop.time() - began:.1f} s, {others}", unit.datanode_id)
                answers = [(tasks[task], task.exception() or task.result()) for task in done]   # (every error retrieved)
                for unit, got in sorted(answers, key=lambda a: a[0].index):
                    if isinstance(got, BaseException):
                        raise TailBroken(f"the open tail's replica {self.group.id}/{unit.index} on "
                                         f"{unit.datanode_id}: {got}", unit.datanode_id) from got
                    if got != self.length + len(piece):
                        raise TailBroken(f"the open tail's replica {self.group.id}/{unit.index} on "
                                         f"{unit.datanode_id} holds {got} bytes, not {self.length + len(piece)}",
                                         unit.datanode_id)
                if not allowed and pending and len(tasks) - len(pending) >= keep:
                    allowed = True   # the floor answered: the rest get a stall's allowance of their time
                    peers = loop.time() - began
                    deadline = min(deadline, began + max(FINISH_STALL_FLOOR_S, STALL_FACTOR * peers))
        finally:
            for task in pending:
                task.cancel()

    async def _one(self, unit: pb.UnitLocation, piece) -> int:
        return await append_unit(self._datanodes, unit.data_address, self.group.id, unit.index, self.length,
                                 piece, generation=self.group.generation, token=unit.token,
                                 peer=unit.datanode_id)
