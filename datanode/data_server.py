"""The DataNode's data port: unit reads and writes in the data transfer protocol (proto/datatransfer.py).

One thread per connection (clients pool their connections, so there are few, and each blocks in
``recv``/``sendfile`` with the GIL released). A read sends the stored range with ``sendfile``
straight from the page cache, with the sidecar's CRC32C values ahead of it; the DataNode never
reads those bytes (the reader verifies them) unless a fault knob must tamper with or pace them.

Limits, so a DataNode stays responsive under any load:

- at most ``max_streams`` requests are served at once; one more gets a BUSY answer at once (the
  client rebuilds from other units, as from a slow DataNode) and the connection stays usable;
- a write stream that sends nothing for ``write_idle_s`` is dropped, its temp file deleted;
- a connection idle between requests for ``idle_s`` is closed (clients keep theirs shorter).

Security (a secure cluster): every connection is mutual TLS (the handshake runs on the
connection's thread), and every request's block token is checked, before anything else, against
exactly the unit (group, index, generation) and the operation it asks for (security/tokens.py):
no call to the NameNode. TLS means no ``sendfile``: the bytes go through ``ssl`` in 256 KiB
pieces. A unit is written once: a WRITE of a unit stored here is refused, token or not. An APPEND
(a replica of an open tail; it needs an append token: a write token is refused) grows a stored
unit in place, only at its committed length (storage.py: the commit point is the sidecar's rename);
an APPEND at 0 of a unit not stored creates it (the replica's first bytes, receipted as a write's).

Cancellation: a client cancels a read by closing its connection. While a read waits on a knob
(stall, delay, bandwidth) the connection is watched (``HangupWatcher``) and the hang-up wakes
the wait; during ``sendfile`` it shows as a broken pipe. Either way the read is counted in
``cancelled_reads`` and its thread is free again.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import ssl
import struct
import threading
from collections.abc import Callable

from hedgefs.datanode import storage
from hedgefs.datanode.faults import InjectedError, ReadCancelled, ReadGuard, ReadPlan
from hedgefs.datanode.hangups import HangupWatcher
from hedgefs.plumbing import hostport
from hedgefs.proto import datatransfer as dt
from hedgefs.security import tokens as token_ops
from hedgefs.security.tokens import BlockTokens, TokenError

log = logging.getLogger("hedgefs.datanode")

_PIECE = 1024 * 1024        # bytes read, tampered with or paced at a time (fault paths only)
_RECV_BYTES = 1024 * 1024   # a write stream's receive buffer
_SEND_TIMEOUT_S = 60.0      # a reader that takes nothing for this long is gone
_MAX_CONNECTIONS = 1024
_HANDSHAKE_S = 10.0         # a TLS client that has not finished its handshake by then is dropped
_TLS_PIECE = 256 * 1024     # bytes read and sent at a time over TLS (no sendfile)
_TOKEN_OPS = {dt.OP_READ: token_ops.READ, dt.OP_CHECKSUMS: token_ops.READ, dt.OP_VERIFY: token_ops.READ,
              dt.OP_WRITE: token_ops.WRITE, dt.OP_APPEND: token_ops.APPEND}


class DataServer:
    def __init__(self, datanode_id: str, store, blocks: storage.BlockStore, *, host: str = "127.0.0.1",
                 port: int = 0, max_streams: int = 64, write_idle_s: float = 30.0, idle_s: float = 300.0,
                 on_bad_unit: Callable[[int, int, int, str], None] | None = None,
                 on_stored: Callable[[int, int, int, int], None] | None = None,
                 tls: ssl.SSLContext | None = None, tokens: BlockTokens | None = None):
        """``store`` is what reads and writes go through (``open_read``, ``open_writer``: the fault
        knobs and metrics wrapped around the block store); ``blocks`` the block store itself,
        which VERIFY checks with no knob in the way. ``tls`` and ``tokens``: a secure cluster's."""
        self.datanode_id = datanode_id
        self.store = store
        self.blocks = blocks
        self.faults = store.faults
        self.host, self.port = host, port
        self.max_streams = max_streams
        self.write_idle_s = write_idle_s
        self.idle_s = idle_s
        self.on_bad_unit = on_bad_unit or (lambda group_id, index, generation, reason: None)
        # The receipt: the NameNode counts a unit only once its DataNode says it is stored.
        self.on_stored = on_stored or (lambda group_id, index, generation, length: None)
        self.tls = tls
        self.tokens = tokens
        self._slots = threading.BoundedSemaphore(max_streams)
        self._listener: socket.socket | None = None
        self._watcher: HangupWatcher | None = None
        self._connections: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def start(self) -> int:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((self.host, self.port))
        except OSError as e:
            listener.close()
            raise OSError(e.errno, f"cannot listen on {hostport(self.host, self.port)} (data port): {e.strerror}") from None
        listener.listen(512)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._watcher = HangupWatcher()
        threading.Thread(target=self._accept, name="dn-data-accept", daemon=True).start()
        return self.port

    def stop(self) -> None:
        self._stopping.set()
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._watcher is not None:
            self._watcher.stop()

    # ---------------------------------------------------------------- connections

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                if self._stopping.is_set():
                    return
                continue
            with self._lock:
                if len(self._connections) >= _MAX_CONNECTIONS:
                    conn.close()
                    continue
                self._connections.add(conn)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.faults.count("connections")   # clients pool theirs: few, however many reads
            threading.Thread(target=self._serve, args=(conn,), name="dn-data", daemon=True).start()

    def _handshake(self, conn: socket.socket) -> socket.socket | None:
        """The TLS side of a new connection (None: the client failed it, and is gone)."""
        raw = conn
        try:
            raw.settimeout(_HANDSHAKE_S)
            conn = self.tls.wrap_socket(raw, server_side=True)
        except (ssl.SSLError, OSError) as e:
            self.faults.count("tls_refused")
            log.info("data connection to %s refused in TLS: %s", self.datanode_id, e)
            raw.close()
            return None
        with self._lock:
            self._connections.discard(raw)
            self._connections.add(conn)
        return conn

    def _serve(self, conn: socket.socket) -> None:
        try:
            if self.tls is not None:
                secured = self._handshake(conn)
                if secured is None:
                    with self._lock:
                        self._connections.discard(conn)
                    return
                conn = secured
            while not self._stopping.is_set():
                conn.settimeout(self.idle_s)
                request = self._recv_request(conn)
                if request is None:
                    return
                op, group_id, index, generation, offset, length, token = request
                if self.tokens is not None:
                    try:
                        self.tokens.check(token, _TOKEN_OPS[op], group_id, index, generation)
                    except TokenError as e:
                        self.faults.count("token_refused")
                        log.warning("%s refused a request: %s", self.datanode_id, e)
                        conn.sendall(dt.pack_response(dt.PERMISSION_DENIED, f"{self.datanode_id}: {e}"))
                        if op in (dt.OP_WRITE, dt.OP_APPEND):
                            return   # whatever it sends next is data, not a request
                        continue
                if not self._slots.acquire(blocking=False):
                    self.faults.count("busy")
                    conn.sendall(dt.pack_response(
                        dt.BUSY, f"{self.datanode_id} is serving {self.max_streams} streams (--max-streams)"))
                    if op == dt.OP_APPEND:
                        return   # its bytes follow the request: not read, so the stream is out of step
                    continue
                try:
                    conn.settimeout(_SEND_TIMEOUT_S)
                    if op == dt.OP_READ:
                        keep = self._read(conn, group_id, index, generation, offset, length)
                    elif op == dt.OP_WRITE:
                        keep = self._write(conn, group_id, index, generation, length)
                    elif op == dt.OP_APPEND:
                        keep = self._append(conn, group_id, index, generation, offset, length)
                    elif op == dt.OP_CHECKSUMS:
                        keep = self._checksums(conn, group_id, index, generation)
                    else:
                        keep = self._verify(conn, group_id, index, generation)
                finally:
                    self._slots.release()
                if not keep:
                    return
        except (OSError, ValueError) as e:
            if not self._stopping.is_set() and not isinstance(e, (ConnectionError, TimeoutError)):
                log.info("data connection on %s ended: %s", self.datanode_id, e)
        finally:
            with self._lock:
                self._connections.discard(conn)
            conn.close()

    def _recv_request(self, conn: socket.socket):
        """The next request, or None when the client closed the connection (or sent garbage)."""
        head = bytearray(dt.REQUEST.size)
        try:
            dt.recv_exactly(conn, memoryview(head))
        except (ConnectionError, TimeoutError, OSError):
            return None
        magic, version, op, _flags, group_id, index, generation, offset, length, token_len = dt.REQUEST.unpack(head)
        if magic != dt.MAGIC or version != dt.VERSION or op not in (dt.OP_READ, dt.OP_WRITE, dt.OP_VERIFY,
                                                                       dt.OP_CHECKSUMS, dt.OP_APPEND) \
                or token_len > dt.MAX_TOKEN_BYTES:
            # Not our protocol, or a version we do not speak: say so once and hang up.
            conn.sendall(dt.pack_response(dt.INVALID_ARGUMENT,
                                          f"{self.datanode_id} speaks data transfer version {dt.VERSION}"))
            return None
        token = bytearray(token_len)
        dt.recv_exactly(conn, memoryview(token))
        return op, group_id, index, generation, offset, length, bytes(token)

    # ---------------------------------------------------------------- reads

    def _read(self, conn: socket.socket, group_id: int, index: int, generation: int, offset: int, length: int) -> bool:
        """Serve one read; True if the connection can carry another request."""
        self.faults.count("ReadUnit")
        guard = self.faults.guard()
        watched = self.faults.may_wait()
        if watched:
            self._watcher.watch(conn, guard.cancel)
        try:
            return self._send_range(conn, group_id, index, generation, offset, length, guard)
        except (ConnectionError, TimeoutError):
            guard.cancel()      # the client hung up (or stopped reading) mid-transfer
            return False
        finally:
            if watched:
                self._watcher.unwatch(conn)
            guard.finish()

    def _send_range(self, conn, group_id, index, generation, offset, length, guard: ReadGuard) -> bool:
        try:
            plan = self.store.open_read(group_id, index, offset, length, guard, generation=generation)
        except ReadCancelled:
            return False
        except InjectedError as e:
            return self._refuse(conn, dt.UNAVAILABLE, str(e))
        except storage.UnitNotFound as e:
            return self._refuse(conn, dt.NOT_FOUND, f"{e} on {self.datanode_id}")
        except storage.RangeError as e:
            return self._refuse(conn, dt.OUT_OF_RANGE, str(e))
        except storage.ChecksumError as e:   # its sidecar is damaged
            log.warning("%s on %s", e, self.datanode_id)
            self.on_bad_unit(e.group_id, e.index, generation, str(e))
            return self._refuse(conn, dt.DATA_LOSS, str(e))
        except (ValueError, OSError) as e:
            return self._refuse(conn, dt.INTERNAL, f"cannot read unit {group_id}/{index}: {e}")
        outcome = "error"
        try:
            with plan.unit:
                conn.sendall(b"".join((dt.pack_response(dt.OK), dt.READ_INFO.pack(plan.start, plan.nbytes, plan.unit.chunk),
                                       struct.pack(f"<{len(plan.crcs)}I", *plan.crcs))))
                if plan.tamper is None and plan.pace is None:
                    if plan.nbytes and self.tls is None:
                        conn.sendfile(plan.unit.file, plan.start, plan.nbytes)
                    elif plan.nbytes:
                        _send_tls(conn, plan.unit.fileno(), plan.start, plan.nbytes)
                    outcome = "ok"
                    return True
                keep = self._send_slowly(conn, plan, guard)
                outcome = "ok" if keep else "cancelled"
                return keep
        except (ConnectionError, TimeoutError):
            outcome = "cancelled"
            raise
        finally:
            plan.done(plan.nbytes if outcome == "ok" else 0, outcome)

    def _send_slowly(self, conn, plan: ReadPlan, guard: ReadGuard) -> bool:
        """The fault path: read, tamper, pace and send a piece at a time."""
        buf = memoryview(bytearray(min(_PIECE, plan.nbytes)))
        pos, end = plan.start, plan.start + plan.nbytes
        while pos < end:
            n = min(len(buf), end - pos)
            if plan.pace is not None and plan.pace(n):
                return False                          # cancelled while paced
            got = os.preadv(plan.unit.fileno(), [buf[:n]], pos)
            if got != n:
                raise ConnectionError("unit shorter than its sidecar")   # ends the read; the reader rebuilds
            if plan.tamper is not None:
                plan.tamper(buf[:n], pos)
            conn.sendall(buf[:n])
            if guard.cancelled.is_set():
                return False
            pos += n
        return True

    def _refuse(self, conn: socket.socket, status: int, message: str) -> bool:
        conn.sendall(dt.pack_response(status, message))
        return True

    def _checksums(self, conn: socket.socket, group_id: int, index: int, generation: int) -> bool:
        """The unit's stored chunk CRCs (metadata: no byte of it is read, no read knob applies)."""
        self.faults.count("ChunkChecksums")
        try:
            length, chunk, crcs = self.store.chunk_checksums(group_id, index, generation=generation)
        except storage.UnitNotFound as e:
            return self._refuse(conn, dt.NOT_FOUND, f"{e} on {self.datanode_id}")
        except storage.ChecksumError as e:
            self.on_bad_unit(e.group_id, e.index, generation, "damaged checksum sidecar")
            return self._refuse(conn, dt.DATA_LOSS, f"{e} on {self.datanode_id}")
        except OSError as e:
            return self._refuse(conn, dt.INTERNAL, f"cannot read the checksums of unit {group_id}/{index}: {e}")
        conn.sendall(b"".join((dt.pack_response(dt.OK), dt.UNIT_INFO.pack(length, chunk),
                               struct.pack(f"<{len(crcs)}I", *crcs))))
        return True

    def _verify(self, conn: socket.socket, group_id: int, index: int, generation: int) -> bool:
        """A reader saw this unit's bytes fail their checksum: check the copy on disk (no fault
        knob applies: they model what happens to a read), report it to the NameNode if damaged."""
        self.faults.count("VerifyUnit")
        store = self.blocks
        try:
            for _ in store.read(group_id, index, 0, store.length(group_id, index, generation=generation),
                                generation=generation):
                pass
        except storage.UnitNotFound as e:
            return self._refuse(conn, dt.NOT_FOUND, f"{e} on {self.datanode_id}")
        except storage.ChecksumError as e:
            log.warning("%s on %s (a reader noticed): reported", e, self.datanode_id)
            self.on_bad_unit(e.group_id, e.index, generation, str(e))
            return self._refuse(conn, dt.DATA_LOSS, f"{e} on {self.datanode_id}: reported to the NameNode")
        except OSError as e:
            return self._refuse(conn, dt.INTERNAL, f"cannot read unit {group_id}/{index}: {e}")
        log.info("unit %d/%d on %s is intact: a reader's checksum failure happened on the way", group_id, index,
                 self.datanode_id)
        return self._refuse(conn, dt.OK, f"unit {group_id}/{index} on {self.datanode_id} is intact")

    # ---------------------------------------------------------------- writes

    def _write(self, conn: socket.socket, group_id: int, index: int, generation: int, length: int) -> bool:
        """Receive one unit; True if the connection can carry another request."""
        self.faults.count("WriteUnit")
        try:
            writer = self.store.open_writer(group_id, index, length or None, generation=generation, once=True)
        except storage.UnitExists as e:
            log.warning("%s refused a write: %s", self.datanode_id, e)
            return self._refuse(conn, dt.ALREADY_EXISTS, f"{self.datanode_id}: {e}")
        except (ValueError, storage.StorageError) as e:
            return self._refuse(conn, dt.INVALID_ARGUMENT, str(e))
        except OSError as e:
            return self._refuse(conn, *self._store_error(e, group_id, index))
        error: tuple[int, str] | None = None
        try:
            conn.sendall(dt.pack_response(dt.OK))
            conn.settimeout(self.write_idle_s)
            head = memoryview(bytearray(dt.PACKET.size))
            buf = memoryview(bytearray(_RECV_BYTES))
            while True:
                dt.recv_exactly(conn, head)
                kind, value = dt.PACKET.unpack(head)
                if kind == dt.PACKET_END:
                    break
                if kind != dt.PACKET_DATA:
                    return False
                left = value
                while left:
                    piece = buf[:min(left, len(buf))]
                    dt.recv_exactly(conn, piece)
                    left -= len(piece)
                    if error is None:      # after an error, read on to the end: the stream stays in step
                        try:
                            writer.write(piece)
                        except storage.StorageError as e:
                            error = (dt.INVALID_ARGUMENT, str(e))
                        except OSError as e:
                            error = self._store_error(e, group_id, index)
            if error is None:
                try:
                    stored = writer.commit(value or length or 0)
                except storage.UnitExists as e:
                    error = (dt.ALREADY_EXISTS, f"{self.datanode_id}: {e}")
                except storage.StorageError as e:
                    error = (dt.INVALID_ARGUMENT, str(e))
                except OSError as e:
                    error = self._store_error(e, group_id, index)
            if error is not None:
                return self._refuse(conn, *error)
            self.on_stored(group_id, index, generation, stored)
            conn.sendall(dt.pack_response(dt.OK) + dt.STORED.pack(stored))
            return True
        except TimeoutError:
            log.warning("write of unit %d/%d on %s: nothing for %g s, dropped", group_id, index,
                        self.datanode_id, self.write_idle_s)
            return False
        except ConnectionError:
            return False
        finally:
            writer.abort()   # no-op after a commit

    def _append(self, conn: socket.socket, group_id: int, index: int, generation: int, offset: int,
                length: int) -> bool:
        """Append the bytes that follow the request to a stored unit (a replica of an open tail);
        True if the connection can carry another request."""
        self.faults.count("AppendUnit")
        if length > dt.MAX_APPEND_BYTES:
            conn.sendall(dt.pack_response(dt.INVALID_ARGUMENT, f"an append carries at most "
                                          f"{dt.MAX_APPEND_BYTES} bytes, not {length}"))
            return False     # its bytes are not read: the stream is out of step
        data = bytearray(length)
        try:
            conn.settimeout(self.write_idle_s)
            dt.recv_exactly(conn, memoryview(data))
        except (ConnectionError, TimeoutError):
            return False
        try:
            stored = self.store.append(group_id, index, offset, data, generation=generation)
        except (storage.StaleAppend, storage.UnitExists, storage.NotAppendable) as e:
            log.warning("%s refused an append: %s", self.datanode_id, e)
            return self._refuse(conn, dt.FAILED_PRECONDITION, f"{self.datanode_id}: {e}")
        except storage.UnitNotFound as e:
            return self._refuse(conn, dt.NOT_FOUND, f"{e} on {self.datanode_id}")
        except storage.ChecksumError as e:   # its sidecar is damaged
            self.on_bad_unit(e.group_id, e.index, generation, "damaged checksum sidecar")
            return self._refuse(conn, dt.DATA_LOSS, f"{e} on {self.datanode_id}")
        except (ValueError, storage.StorageError) as e:
            return self._refuse(conn, dt.INVALID_ARGUMENT, str(e))
        except OSError as e:
            return self._refuse(conn, *self._store_error(e, group_id, index))
        if offset == 0:   # a new replica: the NameNode hears of it as of a unit written
            self.on_stored(group_id, index, generation, stored)
        conn.sendall(dt.pack_response(dt.OK) + dt.STORED.pack(stored))
        return True

    def _store_error(self, e: OSError, group_id: int, index: int) -> tuple[int, str]:
        """The refusal for a unit the disk would not take; a full disk is the operator's to know."""
        message = f"cannot store unit {group_id}/{index}: {e.strerror or e}"
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            log.warning("%s: %s: its file system is full; the writer goes on without it", self.datanode_id, message)
        else:
            log.error("%s: %s", self.datanode_id, message)
        return _os_status(e), message


def _send_tls(conn: ssl.SSLSocket, fd: int, offset: int, nbytes: int) -> None:
    """``sendfile`` for a TLS socket: the bytes must pass through ssl, a piece at a time."""
    buf = memoryview(bytearray(min(_TLS_PIECE, nbytes)))
    end = offset + nbytes
    while offset < end:
        n = os.preadv(fd, [buf[:min(len(buf), end - offset)]], offset)
        if n <= 0:
            raise ConnectionError("unit shorter than its sidecar")   # ends the read; the reader rebuilds
        conn.sendall(buf[:n])
        offset += n


def _os_status(e: OSError) -> int:
    return dt.RESOURCE_EXHAUSTED if e.errno in (errno.ENOSPC, errno.EDQUOT) else dt.INTERNAL
