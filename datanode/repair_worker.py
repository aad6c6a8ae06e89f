"""The reconstruction worker: rebuild one lost internal block from others, stripe by stripe (or
copy it, when the command names a copy of it: a move).

For a RepairUnitCommand the worker asks the code for the cheapest source set (``ec/sources.py``:
k units, data first, for RS; the 3 other members of the lost unit's local group for LRC-6-2-2,
globally only when the group is short) and then, stripe after stripe, reads each source's cell
over the data port (proto/datatransfer.py, every chunk checked against the source's CRC32C),
decodes the wanted unit's cell with the group's OWN policy, and appends it to a local temp unit. A
source that fails or stalls is dropped, the plan is made again without it (the sources still open
are free), and the new sources are opened at the start of the current stripe. Memory is a stripe's
worth of cells, never the whole unit.
On success the unit is committed (with its CRC sidecar) and ``on_stored`` tells the NameNode.
Everything is of the command's generation: the sources read and the unit made. In a secure
cluster each source is read over TLS, checked to be the DataNode the command names, with the
read token the command carries for it.
"""

from __future__ import annotations

import functools
import logging
import socket
import ssl
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait

from hedgefs.datanode.storage import BlockStore
from hedgefs.ec import layout, sources
from hedgefs.ec.policy import parse_policy
from hedgefs.plumbing import describe
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.proto.datatransfer import ChecksumMismatch, TransferError, connect, read_range, verify
from hedgefs.security import tls
from hedgefs.security.identity import DATANODE, Credential, server_name

log = logging.getLogger("hedgefs.datanode")


class RepairError(Exception):
    pass


class _Source:
    """One source unit, read a cell at a time from ``offset`` on, over the data port.

    Every chunk is checked against the source DataNode's CRC32C (``read_range``); a mismatch
    fails the source like any error (another one is opened) and is reported."""

    def __init__(self, loc: pb.UnitLocation, group_id: int, generation: int, offset: int, timeout_s: float,
                 wrap=None):
        self.loc = loc
        self.index = loc.index
        self.group_id = group_id
        self.generation = generation
        self._wrap = wrap   # (sock, datanode_id) -> TLS socket, in a secure cluster
        self._offset = offset
        self._timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._cancelled = False

    def take(self, n: int):
        """The next ``n`` bytes of the unit."""
        if n == 0:
            return b""
        with self._lock:
            if self._cancelled:
                raise RepairError("cancelled")
            if self._sock is None:
                if not self.loc.data_address.rpartition(":")[0]:
                    raise RepairError(f"no data address for {self.loc.datanode_id}")
                wrap = functools.partial(self._wrap, datanode_id=self.loc.datanode_id) if self._wrap else None
                try:
                    self._sock = connect(self.loc.data_address, self._timeout_s, wrap)
                except (OSError, ssl.SSLError) as e:
                    raise RepairError(f"unit {self.index} on {self.loc.datanode_id}: {describe(e)}") from None
            sock = self._sock
        try:
            data = read_range(sock, self.group_id, self.index, self._offset, n, where=self.loc.datanode_id,
                              token=self.loc.token, generation=self.generation)
        except OSError as e:   # a closed or reset connection, or a timeout
            raise RepairError(f"unit {self.index} on {self.loc.datanode_id}: {describe(e)}") from None
        self._offset += n
        return data

    def cancel(self) -> None:
        """Stop: closing the connection also stops the source DataNode's work."""
        with self._lock:
            self._cancelled = True
            if self._sock is not None:
                try:
                    self._sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self._sock.close()


def repair_unit(cmd: pb.RepairUnitCommand, store: BlockStore, *, stripe_timeout_s: float = 30.0,
                stop: threading.Event | None = None, on_bad_source=None, wrap=None) -> tuple[int, list[str]]:
    """Rebuild unit ``cmd.index`` of group ``cmd.group_id`` into ``store``.

    Returns (bytes stored, ids of the DataNodes read from). Raises RepairError (or ValueError
    for a bad policy) and leaves nothing behind on failure. ``on_bad_source(group_id, index,
    loc)`` hears of a source whose bytes failed their checksum. ``wrap(sock, datanode_id=...)``
    makes a source's connection TLS (a secure cluster).
    """
    policy = parse_policy(cmd.policy)   # the group's own policy, never a default
    k, want, gid, glen = policy.k, cmd.index, cmd.group_id, cmd.group_length
    if want >= policy.units:
        raise RepairError(f"unit index {want} out of range for {policy.name}")
    from hedgefs.ec.codec import codec_for   # numpy and the codec: only a DataNode that repairs pays for them

    codec = codec_for(policy)
    total = layout.unit_length(policy, glen, want)

    # A copy of the wanted unit itself among the sources (a move of the balancer's, a
    # decommission's): the plan reads it alone, and a copy needs no decode; if it fails, the
    # plan turns to the others.
    candidates: dict[int, pb.UnitLocation] = {}
    for u in cmd.sources:
        if u.index < policy.units:
            candidates.setdefault(u.index, u)
    # A small file's zero units (ec/layout.py) are sources known without a read: free, so the
    # plan takes them first; each of their cells is read as 0 bytes, which the codec pads.
    zeros = layout.zero_units(policy, glen)
    if want in zeros:
        raise RepairError(f"unit {want} of a group of {glen} bytes is zeros: nothing to store")
    for index in zeros:
        candidates[index] = pb.UnitLocation(index=index)
    failed: set[int] = set()
    used: list[str] = []
    stripe_at = 0   # where the stripe being rebuilt starts in every internal block

    def choose(reading) -> tuple[int, ...]:
        try:
            return sources.plan(policy, [want], set(candidates) - failed, set(reading) | zeros).read
        except sources.Undecodable as err:
            others = len(set(candidates) - {want})
            if not failed and others < k and want not in candidates:
                raise RepairError(f"only {others} source units, need {k}") from None
            raise RepairError(f"cannot rebuild unit {want}: {err}") from None

    def open_source(loc: pb.UnitLocation) -> _Source:
        if loc.datanode_id and loc.datanode_id not in used:   # (a zero unit's: none)
            used.append(loc.datanode_id)
        return _Source(loc, gid, cmd.generation, stripe_at, stripe_timeout_s, wrap)

    first = choose(())
    # The writer first: if it cannot open (disk full), no source connection has been opened yet.
    writer = store.open_writer(gid, want, total, generation=cmd.generation)
    active: list[_Source] = []

    def replace(lost: _Source, why: str) -> list[_Source]:
        """``lost`` failed: plan again without it; the new sources, opened at this stripe."""
        failed.add(lost.index)
        try:
            read = choose([s.index for s in active])
        except RepairError as err:
            raise RepairError(f"too few sources: unit {lost.index} on {lost.loc.datanode_id} failed ({why}) "
                              f"and no other is left ({err})") from None
        for src in [s for s in active if s.index not in read]:   # no longer needed
            src.cancel()
            active.remove(src)
        new = [open_source(candidates[i]) for i in read if i not in {s.index for s in active}]
        log.info("repair of %d/%d: unit %d on %s failed (%s); reading units %s instead", gid, want,
                 lost.index, lost.loc.datanode_id, why, [s.index for s in new])
        active.extend(new)
        return new

    pool = ThreadPoolExecutor(max_workers=policy.units, thread_name_prefix="dn-repair-read")
    try:
        active.extend(open_source(candidates[i]) for i in first)
        for stripe in layout.iter_stripes(policy, glen):
            if stop is not None and stop.is_set():
                raise RepairError("DataNode is stopping")
            stripe_at = stripe.offset_in_block
            n = stripe.cell_lengths[want]
            if not n:
                break   # only the last stripe can be short: nothing of the wanted unit is left
            # Columns decode on their own, so the first n bytes of each source cell are enough. A
            # source cell is longer than n only in the (short) last stripe: no offset drifts.
            cells = _fetch_stripe(active, replace, [0 if u in zeros else min(n, c) for u, c in
                                                    enumerate(stripe.cell_lengths)], pool,
                                  stripe_timeout_s, gid, on_bad_source)
            writer.write(cells[want] if want in cells else codec.decode(cells, [want], n)[want])
        length = writer.commit()
    finally:
        writer.abort()   # no-op after commit
        for src in active:
            src.cancel()
        pool.shutdown(wait=False, cancel_futures=True)
    return length, used


def _fetch_stripe(active: list[_Source], replace, lengths: list[int], pool, timeout: float, gid: int,
                  on_bad_source=None) -> dict[int, bytes]:
    """One stripe's cells from the ``active`` sources; ``replace(source, why)`` swaps a failed or
    overdue one for the new sources the plan needs (opened at this stripe)."""
    cells: dict[int, bytes] = {}
    todo = list(active)
    while todo:
        futures = {pool.submit(src.take, lengths[src.index]): src for src in todo}
        _done, late = wait(futures, timeout=timeout)
        todo = []
        for f, src in futures.items():
            error = None
            if f in late:
                error = f"no answer in {timeout:.0f} s"
            elif f.exception() is not None:
                error = describe(f.exception())
                if isinstance(f.exception(), ChecksumMismatch) and on_bad_source is not None:
                    on_bad_source(gid, src.index, src.generation, src.loc)
            if error is None:
                cells[src.index] = f.result()
                continue
            src.cancel()
            if src in active:
                active.remove(src)
            todo = [t for t in todo if t in active] + replace(src, error)
    return cells


class RepairRunner:
    """Runs repairs from heartbeat commands, at most ``max_repairs`` at once, no duplicates."""

    def __init__(self, datanode_id: str, store: BlockStore, *, max_repairs: int = 2,
                 on_stored=None, stripe_timeout_s: float = 30.0, credential: Credential | None = None):
        self.datanode_id = datanode_id
        self.store = store
        self.on_stored = on_stored or (lambda group_id, index, generation, length: None)
        # (group_id, index, generation, loc): a source failed its checksum
        self.on_bad_source = self._have_source_checked
        self._tls = tls.client_context(credential) if credential is not None else None
        self.stripe_timeout_s = stripe_timeout_s
        self._pool = ThreadPoolExecutor(max_workers=max(1, max_repairs),
                                        thread_name_prefix="dn-repair")
        self._lock = threading.Lock()
        self._pending: set[tuple[int, int]] = set()
        self._stop = threading.Event()
        self.done = self.failed = 0        # since start, for /metrics

    def active(self) -> int:
        """Repairs queued or running."""
        with self._lock:
            return len(self._pending)

    def submit(self, cmd: pb.RepairUnitCommand):
        key = (cmd.group_id, cmd.index)
        with self._lock:
            if key in self._pending or self._stop.is_set():
                return None
            self._pending.add(key)
        copy = pb.RepairUnitCommand()
        copy.CopyFrom(cmd)
        return self._pool.submit(self._run, copy)

    def _wrap(self, sock: socket.socket, *, datanode_id: str) -> socket.socket:
        """TLS to a source, which must be the DataNode the command names."""
        return self._tls.wrap_socket(sock, server_hostname=server_name(DATANODE, datanode_id))

    def _have_source_checked(self, group_id: int, index: int, generation: int, loc: pb.UnitLocation) -> None:
        """Ask a source whose bytes failed their checksum to check its copy (it reports a damaged one)."""
        wrap = functools.partial(self._wrap, datanode_id=loc.datanode_id) if self._tls else None
        try:
            answer = verify(loc.data_address, group_id, index, timeout=10, token=loc.token, generation=generation,
                            wrap=wrap)
            log.info("unit %d/%d on %s failed its checksum here; %s says: %s", group_id, index, loc.datanode_id,
                     loc.datanode_id, answer)
        except (OSError, TransferError) as e:
            log.info("cannot have %s check unit %d/%d: %s", loc.datanode_id, group_id, index, describe(e))

    def _run(self, cmd: pb.RepairUnitCommand) -> None:
        g, i = cmd.group_id, cmd.index
        t0 = time.monotonic()
        try:
            length, used = repair_unit(cmd, self.store, stripe_timeout_s=self.stripe_timeout_s,
                                       stop=self._stop, on_bad_source=self.on_bad_source,
                                       wrap=self._wrap if self._tls else None)
            log.info("repaired unit %d/%d (%d bytes) from %s in %.2f s", g, i, length,
                     ",".join(used), time.monotonic() - t0)
            self.on_stored(g, i, cmd.generation, length)
            self.done += 1
        except Exception as e:
            self.failed += 1
            log.warning("repair of unit %d/%d (%s) failed after %.2f s: %s", g, i, cmd.policy,
                        time.monotonic() - t0, describe(e))
        finally:
            with self._lock:
                self._pending.discard((g, i))

    def shutdown(self) -> None:
        self._stop.set()
        self._pool.shutdown(wait=False, cancel_futures=True)
