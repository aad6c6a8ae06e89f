"""The NameNodes of a cluster, and every call to them: which one is active, failover, retry ids.

A cluster may have several NameNodes (HA: the metadata on etcd, one active, standbys):
``HEDGEFS_NAMENODE`` / ``--namenode`` is then a list, ``nn1:8020,nn2:8020``; a single address is a
list of one and behaves as it always did. Every NameNode call of the client goes through
``NameNodes.call`` (blocking) or ``call_async`` (the client's event loop), which:

- sends it to the NameNode that last answered (the first of the list at first);
- on FAILED_PRECONDITION carrying the trailing metadata ``hedgefs-active`` (a standby: "not the
  active; the active is X", proto/hedgefs.proto) goes to X at once; an empty X (an election is on)
  is tried again like an unreachable one. FAILED_PRECONDITION without that key keeps its meaning
  (not a directory, not empty, ...) and is the caller's error at once;
- on UNAVAILABLE or DEADLINE_EXCEEDED tries the next address of the list, after a pause of 50 ms
  doubling to 1 s, until the overall deadline (``FailoverConfig.deadline_s``, 15 s: longer than a
  failover) has passed; then the one-line ``cannot reach the NameNode at any of A, B`` (exit 3).
  The deadline decides whether another try starts; a try started has a call's timeout
  (``NAMENODE_TIMEOUT_S``), the last one too, so a NameNode slow to answer the try that ends a
  failover is heard: a call ends by its deadline plus one try. With a single address an
  unreachable NameNode is that error at once, as before;
- gives each non-idempotent call (``NON_IDEMPOTENT``) the metadata ``hedgefs-client-id`` (one per
  client process) and ``hedgefs-call-id`` (one per logical call, the same on every retry), so
  the active answers a retry after a lost reply with the first answer (its retry cache);
- keeps the highest etcd revision a reply carried (trailing ``hedgefs-rev``) and sends it with
  every call, so a standby answering an observer read waits until its view has it (read your
  writes; past a bound it redirects to the active). The revision is kept per process and address
  list (``HighWater``), shared by every NameNodes object of the process on the same addresses;
  it does not carry across processes.

A TLS refusal is asked about (``tls.diagnose``) whenever a call gets UNAVAILABLE: gRPC says
"Socket closed" whether TLS refused us (or we have no credential for a secure NameNode) or the
NameNode is down, and a refusal is no outage (NotAllowed, exit 4, at once).
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import threading
import time
from typing import TYPE_CHECKING

import grpc

from hedgefs.client.config import FailoverConfig
from hedgefs.client.errors import HedgefsError, Unavailable, UsageError, from_namenode_error
from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2_grpc
from hedgefs.security import tls
from hedgefs.security.identity import NAMENODE_NAME

if TYPE_CHECKING:
    from hedgefs.security.identity import Credential

NAMENODE_TIMEOUT_S = 10.0   # one try of one call

ACTIVE_KEY = "hedgefs-active"
SAFE_MODE_KEY = "hedgefs-safe-mode"   # a safe-mode refusal: "retry" (a start-up one, ends by itself) or "wait"
CLIENT_ID_KEY = "hedgefs-client-id"
REVISION_KEY = "hedgefs-rev"
FRESH = "-1"   # the revision a client sends before it has seen one (HA): "the active's, now"
CALL_ID_KEY = "hedgefs-call-id"
# The calls a retry must not repeat (the NameNode's retry cache answers them by call id).
NON_IDEMPOTENT = frozenset({"Create", "Mkdir", "Delete", "Rename", "Complete", "Concat", "AddBlockGroup",
                            "Abandon", "SetPolicy", "SetPermission", "SetOwner", "SetTimes", "CreateSymlink",
                            "SetXAttr", "RemoveXAttr", "Append", "Truncate", "RecoverLease",
                            # batched: the client id goes with them, each item has its own call id
                            "Mkdirs", "DeleteMany", "CreateMany", "Sync"})
CLIENT_ID = secrets.token_hex(16)   # this client process
_CALLS = itertools.count()


def call_id() -> str:
    """A new logical call's id: increasing within this process, so that the NameNode's retry-cache
    rows of one client append instead of landing on random pages (an entry 46 -> 21 us of SQLite
    time), and 64 random bits after the count, so that nobody guesses another call's id."""
    return f"{next(_CALLS):012x}{secrets.token_hex(8)}"


def parse_addresses(text: str) -> tuple[str, ...]:
    """``HOST:PORT[,HOST:PORT...]`` as a tuple (whitespace around entries dropped: a port file's
    newline), or UsageError naming what was given and where it came from."""
    given = text.strip()
    addresses = tuple(part.strip() for part in given.split(","))
    for address in addresses:
        if not address and len(addresses) > 1:
            raise UsageError(f"bad NameNode address list {given!r}: an empty entry "
                             f"(expected HOST:PORT[,HOST:PORT...], from --namenode or HEDGEFS_NAMENODE)")
        host, colon, port = address.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            where = f" in {given!r}" if len(addresses) > 1 else ""
            raise UsageError(f"bad NameNode address {address!r}{where}: expected HOST:PORT[,HOST:PORT...] "
                             f"(from --namenode or HEDGEFS_NAMENODE)")
    return addresses


def active_hint(err: grpc.RpcError) -> str | None:
    """The active a standby named in its refusal ("" while an election is on); None when ``err``
    is not a standby's refusal."""
    return _trailer(err, ACTIVE_KEY)


def safe_mode_retry(err: grpc.RpcError) -> bool:
    """A refusal of a NameNode in start-up safe mode, which ends by itself: worth retrying."""
    return _trailer(err, SAFE_MODE_KEY) == "retry"


def _trailer(err: grpc.RpcError, wanted: str) -> str | None:
    if err.code() != grpc.StatusCode.FAILED_PRECONDITION:
        return None
    try:
        metadata = err.trailing_metadata() or ()
    except Exception:   # an error raised before any call was made has none
        return None
    for key, value in metadata:
        if key == wanted:
            return value.decode() if isinstance(value, bytes) else value
    return None


class Attempts:
    """One logical call's tries: where to send the next, with what ids, how long to pause first,
    and when to give up (then ``failed`` raises the user's error)."""

    def __init__(self, nodes: "NameNodes", method: str, deadline: float | None = None):
        self.nodes, self.method, self.clock = nodes, method, nodes.clock
        self.config = nodes.config
        self.address = nodes.active
        # No try starts after ``deadline`` (on ``clock``): deadline_s from now, or a caller's own,
        # for a call that is one step of a longer wait (a reader's lookup, fs.py _locate). It
        # bounds when tries start, not how long one may take: each has a call's timeout
        # (``NAMENODE_TIMEOUT_S``), the last one too, so a NameNode slow to answer it is heard.
        self.began = self.clock()
        self.deadline = deadline if deadline is not None else self.began + self.config.deadline_s
        self.pause = self.config.backoff_start_s
        self.metadata = ((CLIENT_ID_KEY, CLIENT_ID), (CALL_ID_KEY, call_id())) \
            if method in NON_IDEMPOTENT else None
        self.redirected = False
        self.standbys: set[str] = set()   # addresses that answered as standbys during this call

    def failed(self, err: grpc.RpcError, tls_refusal: str | None = None) -> float:
        """After ``err`` from ``self.address``: the seconds to pause before the next try (at the
        new ``self.address``), or raise the HedgefsError the caller should see."""
        code = err.code()
        hint = active_hint(err)
        if safe_mode_retry(err) and not tls_refusal:   # a restarted NameNode's safe mode: it ends soon
            left = self.deadline - self.clock()
            if left <= 0:
                raise from_namenode_error(err, self.address)
            pause, self.pause = self.pause, min(self.pause * 2, self.config.backoff_max_s)
            return min(pause, left)
        if tls_refusal or (hint is None and code not in (grpc.StatusCode.UNAVAILABLE,
                                                          grpc.StatusCode.DEADLINE_EXCEEDED)):
            raise from_namenode_error(err, self.address, tls_refusal)
        if hint is None and len(self.nodes.addresses) == 1:
            raise from_namenode_error(err, self.address)   # one NameNode, down: as it always was
        if hint is not None:
            self.standbys.add(self.address)
        if hint and hint != self.address:
            # The standby knows the active: go there, at once the first time (standbys whose views
            # lag may send us round in a circle: from then on with the pause, as any retry).
            self.address, pause = hint, (self.pause if self.redirected else 0.0)
            if self.redirected:
                self.pause = min(self.pause * 2, self.config.backoff_max_s)
            self.redirected = True
        else:
            self.address, pause = self.nodes.after(self.address), self.pause
            self.pause = min(self.pause * 2, self.config.backoff_max_s)
        left = self.deadline - self.clock()
        if left <= 0:
            raise self._gave_up(code, hint)
        return min(pause, left)   # and one last try at the deadline

    def _gave_up(self, code: grpc.StatusCode, hint: str | None) -> HedgefsError:
        listed = ", ".join(self.nodes.addresses)
        took = f"tried for {self.clock() - self.began:.1f} s"   # the deadline and the last try's timeout
        if self.standbys:   # someone answered, as a standby: no active, rather than no NameNode
            if hint is None:
                why = f"{', '.join(sorted(self.standbys))} answered as standby, the rest {code.name.lower()}"
            else:
                why = f"the active named, {self.address}, did not answer as one" if hint else "an election is on"
            return Unavailable(f"no active NameNode among {listed} ({why}; {took})")
        return Unavailable(f"cannot reach the NameNode at any of {listed} ({code.name.lower()}; {took})")


class HighWater:
    """The highest etcd revision replies from one cluster carried in this process, shared by
    every NameNodes object on the same addresses (``of``): a write through one client is read
    through another, in any thread. Thread-safe."""

    _all: dict[frozenset[str], "HighWater"] = {}
    _all_lock = threading.Lock()

    def __init__(self):
        self.value = 0
        self._lock = threading.Lock()

    @classmethod
    def of(cls, addresses: tuple[str, ...]) -> "HighWater":
        key = frozenset(addresses)
        with cls._all_lock:
            found = cls._all.get(key)
            if found is None:
                found = cls._all[key] = cls()
            return found

    def saw(self, revision: int) -> None:
        if revision > self.value:
            with self._lock:
                self.value = max(self.value, revision)


class NameNodes:
    """The NameNode addresses of one cluster, the one that answered last, and their channels
    (one per address, each made on first use: blocking ones for ``call``, asyncio ones for
    ``call_async``). Safe to use from several threads."""

    def __init__(self, addresses: "str | tuple[str, ...]", credential: "Credential | None" = None,
                 config: FailoverConfig | None = None):
        self.addresses = parse_addresses(addresses) if isinstance(addresses, str) else tuple(addresses)
        self.credential = credential
        if config is None:
            try:
                config = FailoverConfig.from_environ()
            except ValueError as err:
                raise UsageError(str(err)) from None
        self.config = config
        self.active = self.addresses[0]
        self.clock = time.monotonic   # the tries' deadlines (a test's virtual clock)
        self.high_water = HighWater.of(self.addresses)   # the highest etcd revision seen (HA); sent with every call
        self._lock = threading.Lock()
        self._blocking: dict[str, tuple[grpc.Channel, hedgefs_pb2_grpc.NameNodeStub]] = {}
        self._aio: dict[str, tuple[object, hedgefs_pb2_grpc.NameNodeStub]] = {}
        self._closed = False

    def after(self, address: str) -> str:
        """The address to try after ``address`` fails: the next of the list (one the list does not
        hold, an active a standby named, is followed by the list's first)."""
        try:
            return self.addresses[(self.addresses.index(address) + 1) % len(self.addresses)]
        except ValueError:
            return self.addresses[0]

    @property
    def revision(self) -> int:
        """The highest etcd revision a reply from these NameNodes carried in this process."""
        return self.high_water.value

    def _answered(self, address: str, trailing) -> None:
        self.active = address
        for key, value in trailing or ():
            if key == REVISION_KEY and value.isdigit():
                self.high_water.saw(int(value))

    def _metadata(self, attempts: Attempts):
        """The call's ids, and the revision to read at least (a standby waits for it: read your writes)."""
        revision = self.high_water.value
        if not revision:
            if len(self.addresses) == 1:
                return attempts.metadata
            # HA, and nothing seen yet in this process: FRESH asks a standby for a view as new as
            # the active's (HDFS's msync before a new client's first observer read), so another
            # process's write that finished before this one started is read.
            return (*(attempts.metadata or ()), (REVISION_KEY, FRESH))
        return (*(attempts.metadata or ()), (REVISION_KEY, str(revision)))

    # ---------------------------------------------------------------- blocking calls

    def _blocking_stub(self, address: str) -> hedgefs_pb2_grpc.NameNodeStub:
        with self._lock:
            if self._closed:
                raise HedgefsError("the hedgefs client is closed")
            made = self._blocking.get(address)
            if made is None:
                channel = tls.channel(address, self.credential, NAMENODE_NAME, GRPC_OPTIONS)
                made = self._blocking[address] = (channel, hedgefs_pb2_grpc.NameNodeStub(channel))
            return made[1]

    def call(self, method: str, request):
        """Call a NameNode method (blocking), failing over as the module says; errors are HedgefsError."""
        attempts = Attempts(self, method)
        while True:
            address = attempts.address
            stub = self._blocking_stub(address)
            try:
                reply, call = getattr(stub, method).with_call(request, timeout=NAMENODE_TIMEOUT_S,
                                                              metadata=self._metadata(attempts))
            except grpc.RpcError as err:
                pause = attempts.failed(err, self._refusal(address, err))
                if pause:
                    time.sleep(pause)
                continue
            self._answered(address, call.trailing_metadata())
            return reply

    def _refusal(self, address: str, err: grpc.RpcError) -> str | None:
        if err.code() != grpc.StatusCode.UNAVAILABLE:
            return None
        return tls.diagnose(address, self.credential, NAMENODE_NAME, "the NameNode")

    # ---------------------------------------------------------------- calls on the event loop

    def _aio_stub(self, address: str) -> hedgefs_pb2_grpc.NameNodeStub:
        if self._closed:
            raise HedgefsError("the hedgefs client is closed")
        made = self._aio.get(address)
        if made is None:   # only ever on the client's loop thread: no lock needed
            channel = tls.channel(address, self.credential, NAMENODE_NAME, GRPC_OPTIONS, aio=True)
            made = self._aio[address] = (channel, hedgefs_pb2_grpc.NameNodeStub(channel))
        return made[1]

    async def call_async(self, method: str, request, deadline: float | None = None):
        """``call`` on the client's event loop; ``deadline`` (on ``self.clock``), a caller's own in
        place of ``deadline_s`` from now: no try starts after it; a try started has its
        NAMENODE_TIMEOUT_S (10 s), so the call may end that long after the deadline."""
        attempts = Attempts(self, method, deadline=deadline)
        while True:
            address = attempts.address
            try:
                call = getattr(self._aio_stub(address), method)(
                    request, timeout=NAMENODE_TIMEOUT_S, metadata=self._metadata(attempts))
                return_value = await call
                trailing = await call.trailing_metadata()
            except grpc.RpcError as err:
                refusal = None
                if err.code() == grpc.StatusCode.UNAVAILABLE:
                    refusal = await asyncio.get_running_loop().run_in_executor(None, self._refusal, address, err)
                pause = attempts.failed(err, refusal)
                if pause:
                    await asyncio.sleep(pause)
                continue
            self._answered(address, trailing)
            return return_value

    # ---------------------------------------------------------------- closing

    async def close_async(self) -> None:
        """Close the event loop's channels (on that loop)."""
        channels, self._aio = [c for c, _ in self._aio.values()], {}
        for channel in channels:
            await channel.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            channels, self._blocking = [c for c, _ in self._blocking.values()], {}
        for channel in channels:
            channel.close()
