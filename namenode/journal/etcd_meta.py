"""The one door to etcd (v3 API): the only module that imports the etcd client (``pyetcd``, the
``etcd-sdk-python`` package).

What the NameNode needs of etcd, and no more:
  ``commit``    one guarded Txn: If(create_revision(leader) == epoch) Then(puts, deletes). The
                guard is the fencing: a deposed active (its leader key gone, or another's) can
                never commit. Returns the revision; raises Fenced when the guard fails and
                MetaUnavailable when etcd did not answer (the outcome is then unknown). With a
                ``marker`` it is also one link of etcd_commit.py's chain; ``marker()`` reads it.
  ``snapshot``  every key under the prefix at one revision, in pages (a standby's view, a
                restart's).
  ``watch``     the prefix's changes from a revision on, one revision at a time.
  ``grant`` / ``keepalive`` / ``revoke``, ``campaign``, ``leader``: the election (election.py).

Keys are ``/<prefix>/<rel>``; ``rel`` is this module's callers' business (etcd_view.py). Calls go
to one member at a time, moving to another when one fails (the client's endpoint failover). Reads
and lease grants are tried once per member before MetaUnavailable; a write (``commit``,
``campaign``) is never repeated here: its outcome may be unknown, and the caller decides.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import threading
import time
from typing import Iterator

import grpc

log = logging.getLogger("hedgefs.namenode")

pyetcd = etcdrpc = None   # loaded by the first EtcdMeta

PAGE = 2000            # keys per Range page of a snapshot
# What one etcd answer may hold, for this client: gRPC's default (4 MiB) is less than a page of image
# chunks or of journal batches (keys of up to ~1 MiB), and every value read is kept anyway; etcd's own
# server sends answers of any size. Pages of image chunks are kept small (image()).
ETCD_GRPC_OPTIONS = [("grpc.max_receive_message_length", -1)]
RETRY_ENDPOINT_S = 2.0  # a member that failed is tried again after this long
# No answer, or one that says nothing of the outcome: UNKNOWN is etcd's "context deadline exceeded"
# when the member's own deadline ran out first (seen while etcd elects a new leader).
UNANSWERED = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "INTERNAL", "UNKNOWN")
MARKER = "commit"       # the key each batch Txn of an active puts: which batch etcd has last (etcd_commit.py)
# A watch stream that is quiet this long asks its member for progress; one that stays silent longer
# (a frozen member: its TCP connection lives, nothing comes) is given up and re-opened on another.
WATCH_PROBE_S, WATCH_SILENT_S = 1.0, 5.0


class MetaError(RuntimeError):
    """etcd could not do what was asked."""


class MetaUnavailable(MetaError):
    """No etcd member answered in time (a write's outcome is then unknown)."""


class Fenced(MetaError):
    """The guard failed: this NameNode's epoch is no longer the leader key's."""


class Compacted(MetaError):
    """A watch asked for revisions etcd has compacted away: reload from a snapshot."""


@dataclasses.dataclass(frozen=True)
class EtcdTLS:
    """The files a NameNode shows etcd over TLS (security/material.py's DIR/etcd/)."""

    ca: str
    cert: str
    key: str


@dataclasses.dataclass(frozen=True)
class MetaURL:
    scheme: str                      # "sqlite" or "etcd"
    path: str = ""                   # sqlite: the database file ("" = the data dir's default)
    endpoints: tuple[tuple[str, int], ...] = ()
    prefix: str = ""
    secure: bool = False             # etcds://: TLS, with a client certificate (``tls``)
    tls: EtcdTLS | None = None       # not in the URL: the NameNode's --etcd-tls

    def __str__(self) -> str:
        if self.scheme == "sqlite":
            return f"sqlite://{self.path}"
        return ("etcds://" if self.secure else "etcd://") + ",".join(f"{h}:{p}" for h, p in self.endpoints) \
            + "/" + self.prefix


def parse_meta_url(url: str) -> MetaURL:
    """``sqlite:///PATH``, ``etcd://HOST:PORT[,HOST:PORT...]/PREFIX`` or ``etcds://...`` (the same
    over TLS, with a client certificate); ValueError (one line) else."""
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):]
        if path and not path.startswith("/"):
            raise ValueError(f"bad --meta {url!r}: an SQLite URL is sqlite:///ABSOLUTE/PATH")
        return MetaURL("sqlite", path=path)
    secure = url.startswith("etcds://")
    if not url.startswith("etcd://") and not secure:
        raise ValueError(f"bad --meta {url!r}: expected sqlite:///PATH or etcd[s]://HOST:PORT[,HOST:PORT...]/PREFIX")
    rest = url.partition("://")[2]
    hosts, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    if not prefix or any(c in prefix for c in " \n\t"):
        raise ValueError(f"bad --meta {url!r}: an etcd URL needs a key prefix (etcd://HOST:PORT/PREFIX)")
    endpoints = []
    for item in hosts.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad --meta {url!r}: {item!r} is not HOST:PORT")
        endpoints.append((host.strip("[]"), int(port)))
    return MetaURL("etcd", endpoints=tuple(endpoints), prefix=prefix, secure=secure)


def _range_end(prefix: bytes) -> bytes:
    """The end of the range of every key starting with ``prefix``."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return b"\0"


@dataclasses.dataclass(frozen=True)
class Event:
    rel: str            # the key without the prefix
    value: bytes | None  # None: deleted
    create_revision: int
    lease: int = 0


def _channel_credentials(url: MetaURL) -> grpc.ChannelCredentials:
    """TLS to etcd: the cluster CA checks the members (their certificates name their addresses), the
    client certificate shows etcd this is a NameNode (etcd's --client-cert-auth)."""
    if url.tls is None:
        raise MetaError(f"--meta {url} needs etcd's client certificate (--etcd-tls DIR)")
    try:
        with open(url.tls.ca, "rb") as ca, open(url.tls.key, "rb") as key, open(url.tls.cert, "rb") as cert:
            return grpc.ssl_channel_credentials(root_certificates=ca.read(), private_key=key.read(),
                                                certificate_chain=cert.read())
    except OSError as err:
        raise MetaError(f"cannot read etcd's TLS file {err.filename}: {err.strerror}") from None


class EtcdMeta:
    """A client of one etcd cluster, for the keys under one prefix."""

    def __init__(self, url: MetaURL, timeout_s: float = 2.0):
        global pyetcd, etcdrpc
        import pyetcd                  # here, not at the top: a NameNode on SQLite never loads it
        from pyetcd import etcdrpc
        self.url = url
        self.root = f"/{url.prefix}/".encode()
        self.timeout_s = timeout_s
        creds = _channel_credentials(url) if url.secure else None
        self._client = pyetcd.MultiEndpointEtcd3Client(
            endpoints=[pyetcd.Endpoint(h, p, secure=url.secure, creds=creds, time_retry=RETRY_ENDPOINT_S,
                                       opts=ETCD_GRPC_OPTIONS)
                       for h, p in url.endpoints],
            timeout=timeout_s, failover=True)
        self._lock = threading.Lock()   # the client's endpoint choice is not thread-safe

    def key(self, rel: str) -> bytes:
        return self.root + rel.encode()

    def close(self) -> None:
        try:
            self._client.close()
        except Exception:   # closing a channel that already failed
            pass

    def _call(self, stub_name: str, method: str, request, timeout: float | None = None, retry: bool = False):
        """One call on the current member; a member that fails is set aside for a while. ``retry``
        (reads, renewals: safe to repeat): on another member, once per member, before giving up."""
        attempts = len(self.url.endpoints) if retry else 1
        for attempt in range(attempts):
            try:
                return self._call_once(stub_name, method, request, timeout)
            except MetaUnavailable:
                if attempt == attempts - 1:
                    raise

    def _call_once(self, stub_name: str, method: str, request, timeout: float | None):
        with self._lock:
            try:
                stub = getattr(self._client, stub_name)
            except pyetcd.exceptions.NoServerAvailableError:
                for ep in self._client.endpoints.values():   # every one failed lately: try them all again
                    ep.last_failed = 0
                stub = getattr(self._client, stub_name)
            endpoint = self._client.endpoint_in_use
        try:
            return getattr(stub, method)(request, timeout or self.timeout_s)
        except grpc.RpcError as err:
            code = err.code()
            if code.name in UNANSWERED:
                with self._lock:
                    endpoint.fail()
                    self._client._clear_old_stubs()
                raise MetaUnavailable(f"etcd {endpoint.netloc}: {code.name.lower()}: "
                                      f"{(err.details() or '').splitlines()[0] if err.details() else ''}") from None
            raise MetaError(f"etcd {endpoint.netloc}: {code.name}: {err.details()}") from None

    def channel(self) -> grpc.Channel:
        with self._lock:
            return self._client.channel

    # ------------------------------------------------------------------ reads

    def status(self) -> int:
        """The cluster's current revision (a linearizable read: a quorum answered)."""
        r = self._call("kvstub", "Range", etcdrpc.RangeRequest(key=self.key("leader"), count_only=True), retry=True)
        return r.header.revision

    def get(self, rel: str) -> tuple[bytes, int, int] | None:
        """(value, create_revision, lease) of one key, or None."""
        r = self._call("kvstub", "Range", etcdrpc.RangeRequest(key=self.key(rel)), retry=True)
        return (r.kvs[0].value, r.kvs[0].create_revision, r.kvs[0].lease) if r.kvs else None

    def snapshot(self) -> tuple[int, list[tuple[str, bytes]]]:
        """Every (rel, value) under the prefix at one revision, and that revision."""
        start, end = self.root, _range_end(self.root)
        revision, out = 0, []
        while True:
            r = self._call("kvstub", "Range", etcdrpc.RangeRequest(key=start, range_end=end, limit=page,
                                                                 revision=revision), timeout=self.timeout_s * 5,
                           retry=True)
            revision = revision or r.header.revision
            out.extend((kv.key[len(self.root):].decode(), kv.value) for kv in r.kvs)
            if not r.more or not r.kvs:
                return revision, out
            start = r.kvs[-1].key + b"\0"

    def range(self, rel_prefix: str, revision: int = 0, keys_only: bool = False,
              start_after: str = "", page: int = PAGE) -> tuple[int, list[tuple[str, bytes]]]:
        """Every (rel, value) whose key starts with ``rel_prefix``, at ``revision`` (0: now, the
        revision then returned: read the rest at it), in key order, paged."""
        prefix = self.key(rel_prefix)
        start, end = (self.key(start_after) + b"\0" if start_after else prefix), _range_end(prefix)
        out: list[tuple[str, bytes]] = []
        while True:
            r = self._call("kvstub", "Range", etcdrpc.RangeRequest(key=start, range_end=end, limit=page,
                                                                 revision=revision, keys_only=keys_only),
                           timeout=self.timeout_s * 5, retry=True)
            revision = revision or r.header.revision
            out.extend((kv.key[len(self.root):].decode(), kv.value) for kv in r.kvs)
            if not r.more or not r.kvs:
                return revision, out
            start = r.kvs[-1].key + b"\0"

    def txn(self, puts: dict[str, bytes], delete_ranges: list[tuple[str, str]] = (), epoch: int = 0,
            absent: str = "", timeout_s: float | None = None) -> int | None:
        """One Txn of puts and range deletes ([start, end) of rel keys; end "" = the key alone),
        guarded by ``epoch`` (0: no guard) and by ``absent`` not existing ("" : no such guard).
        Its revision, or None when a guard failed."""
        ops = [etcdrpc.RequestOp(request_put=etcdrpc.PutRequest(key=self.key(k), value=v)) for k, v in puts.items()]
        ops += [etcdrpc.RequestOp(request_delete_range=etcdrpc.DeleteRangeRequest(
            key=self.key(a), range_end=self.key(b) if b else b"")) for a, b in delete_ranges]
        guards = []
        if epoch:
            guards.append(etcdrpc.Compare(result=etcdrpc.Compare.EQUAL, target=etcdrpc.Compare.CREATE,
                                          key=self.key("leader"), create_revision=epoch))
        if absent:
            guards.append(etcdrpc.Compare(result=etcdrpc.Compare.EQUAL, target=etcdrpc.Compare.CREATE,
                                          key=self.key(absent), create_revision=0))
        r = self._call("kvstub", "Txn", etcdrpc.TxnRequest(compare=guards, success=ops), timeout=timeout_s)
        return r.header.revision if r.succeeded else None

    def watch(self, from_revision: int, stop: threading.Event) -> Iterator[tuple[int, list[Event]]]:
        """(revision, its events) for every revision from ``from_revision`` on, in order, until
        ``stop`` is set (then it returns). MetaUnavailable when the stream breaks, Compacted."""
        requests: queue.Queue = queue.Queue()
        requests.put(etcdrpc.WatchRequest(create_request=etcdrpc.WatchCreateRequest(
            key=self.root, range_end=_range_end(self.root), start_revision=from_revision, progress_notify=True)))

        def outgoing():
            while True:
                item = requests.get()
                if item is None:
                    return
                yield item

        with self._lock:
            try:
                channel = self._client.channel
            except pyetcd.exceptions.NoServerAvailableError:
                for ep in self._client.endpoints.values():   # every one failed lately: try them all again
                    ep.last_failed = 0
                channel = self._client.channel
            endpoint = self._client.endpoint_in_use
        stream = etcdrpc.WatchStub(channel).Watch(outgoing())
        ended = threading.Event()   # this stream's end (``stop`` is the caller's, and stays theirs)
        heard, silent = [time.monotonic()], threading.Event()

        def stopper() -> None:   # and the liveness probe: a quiet stream is asked for progress
            probed = heard[0]
            while not ended.is_set():
                if stop.wait(0.2):
                    stream.cancel()
                    return
                now = time.monotonic()
                if now - heard[0] >= WATCH_SILENT_S:
                    silent.set()
                    stream.cancel()
                    return
                if now - max(heard[0], probed) >= WATCH_PROBE_S:
                    probed = now
                    requests.put(etcdrpc.WatchRequest(progress_request=etcdrpc.WatchProgressRequest()))
        threading.Thread(target=stopper, daemon=True, name="etcd-watch-stop").start()
        try:
            for response in stream:
                heard[0] = time.monotonic()
                if response.watch_id == -1:   # a probe's answer: its revision may be ahead of this watch's events
                    continue
                if response.compact_revision:
                    raise Compacted(f"etcd compacted revisions up to {response.compact_revision}")
                if response.canceled:
                    raise MetaUnavailable(f"etcd cancelled the watch: {response.cancel_reason}")
                batch: list[Event] = []
                revision = 0
                for ev in response.events:
                    rev = ev.kv.mod_revision
                    if batch and rev != revision:
                        yield revision, batch
                        batch = []
                    revision = rev
                    value = None if ev.type == ev.DELETE else ev.kv.value
                    batch.append(Event(ev.kv.key[len(self.root):].decode(), value, ev.kv.create_revision, ev.kv.lease))
                if batch:
                    yield revision, batch
                elif not response.created and response.header.revision:
                    yield response.header.revision, []   # progress: nothing under the prefix changed
        except grpc.RpcError as err:
            if stop.is_set():
                return
            if silent.is_set():
                with self._lock:
                    endpoint.fail()
                    self._client._clear_old_stubs()
                raise MetaUnavailable(f"etcd watch on {endpoint.netloc}: no answer for {WATCH_SILENT_S:.0f} s") from None
            # The member went away: set it aside, so the watch re-opens on another one.
            if err.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.INTERNAL):
                with self._lock:
                    endpoint.fail()
                    self._client._clear_old_stubs()
            raise MetaUnavailable(f"etcd watch on {endpoint.netloc} broke: {err.code().name.lower()}") from None
        finally:
            requests.put(None)
            ended.set()

    # ------------------------------------------------------------------ writes

    def commit(self, epoch: int, puts: dict[str, bytes], deletes: list[str],
               marker: tuple[bytes, int] | None = None, timeout_s: float | None = None) -> int:
        """One Txn of puts and deletes, guarded by ``epoch``; returns its revision. ``marker``
        (value, mod revision): the Txn also puts the ``commit`` key to value, guarded by the key's
        mod revision being the one given (0: absent), the chain etcd_commit.py settles on."""
        ops = [etcdrpc.RequestOp(request_put=etcdrpc.PutRequest(key=self.key(k), value=v)) for k, v in puts.items()]
        ops += [etcdrpc.RequestOp(request_delete_range=etcdrpc.DeleteRangeRequest(key=self.key(k))) for k in deletes]
        guards = [etcdrpc.Compare(result=etcdrpc.Compare.EQUAL, target=etcdrpc.Compare.CREATE,
                                  key=self.key("leader"), create_revision=epoch)]
        if marker is not None:
            ops.append(etcdrpc.RequestOp(request_put=etcdrpc.PutRequest(key=self.key(MARKER), value=marker[0])))
            guards.append(etcdrpc.Compare(result=etcdrpc.Compare.EQUAL, target=etcdrpc.Compare.MOD,
                                          key=self.key(MARKER), mod_revision=marker[1]))
        r = self._call("kvstub", "Txn", etcdrpc.TxnRequest(compare=guards, success=ops), timeout=timeout_s)
        if not r.succeeded:
            raise Fenced(f"epoch {epoch} is no longer the leader's: this NameNode was deposed")
        return r.header.revision

    def marker(self, timeout_s: float | None = None) -> tuple[bytes | None, int]:
        """The ``commit`` key's (value, mod revision), (None, 0) when absent: a linearizable read,
        tried on each member once."""
        r = self._call("kvstub", "Range", etcdrpc.RangeRequest(key=self.key(MARKER)), timeout=timeout_s, retry=True)
        return (r.kvs[0].value, r.kvs[0].mod_revision) if r.kvs else (None, 0)

    def put_if_absent(self, rel: str, value: bytes) -> bool:
        """Put ``rel`` unless it exists (no guard): True if this call put it."""
        absent = etcdrpc.Compare(result=etcdrpc.Compare.EQUAL, target=etcdrpc.Compare.CREATE,
                                 key=self.key(rel), create_revision=0)
        r = self._call("kvstub", "Txn", etcdrpc.TxnRequest(
            compare=[absent], success=[etcdrpc.RequestOp(request_put=etcdrpc.PutRequest(key=self.key(rel),
                                                                                         value=value))]))
        return r.succeeded

    # ------------------------------------------------------------------ election

    def grant(self, ttl_s: int) -> int:
        return self._call("leasestub", "LeaseGrant", etcdrpc.LeaseGrantRequest(TTL=ttl_s), retry=True).ID

    def keepalive(self, lease_id: int, timeout_s: float | None = None) -> int:
        """Renew the lease once; its TTL left (0: it is gone, expired or revoked)."""
        request = etcdrpc.LeaseKeepAliveRequest(ID=lease_id)
        stream = self._call("leasestub", "LeaseKeepAlive", iter([request]), timeout=timeout_s)
        ttl = 0
        try:
            for response in stream:
                ttl = response.TTL
                break
        except grpc.RpcError as err:
            with self._lock:
                self._client.endpoint_in_use.fail()
                self._client._clear_old_stubs()
            raise MetaUnavailable(f"etcd: lease renewal failed: {err.code().name.lower()}") from None
        if ttl > 0:
            # etcd 3.4 renews a lease on its leader's word alone: a leader cut off from its quorum (or
            # frozen, then back before it hears of the next term) acknowledges renewals the cluster
            # never saw, while the others let the lease expire and elect another active (chaos seed
            # 4747002 --ha: a dual active for 0.36 s). A linearizable read on the same member after
            # the renewal shows that member still led a quorum then, so the renewal counts.
            self._call_once("kvstub", "Range", etcdrpc.RangeRequest(key=self.key("leader"), count_only=True),
                            timeout_s)
        return ttl

    def revoke(self, lease_id: int, timeout_s: float | None = None) -> None:
        self._call("leasestub", "LeaseRevoke", etcdrpc.LeaseRevokeRequest(ID=lease_id), timeout=timeout_s)

    def campaign(self, value: bytes, lease_id: int) -> tuple[int, bytes | None]:
        """Try to become the leader: (epoch, None) when this call created the leader key on
        ``lease_id`` (epoch = its create revision), else (0, the current leader's value)."""
        leader = self.key("leader")
        absent = etcdrpc.Compare(result=etcdrpc.Compare.EQUAL, target=etcdrpc.Compare.CREATE, key=leader,
                                 create_revision=0)
        r = self._call("kvstub", "Txn", etcdrpc.TxnRequest(
            compare=[absent],
            success=[etcdrpc.RequestOp(request_put=etcdrpc.PutRequest(key=leader, value=value, lease=lease_id))],
            failure=[etcdrpc.RequestOp(request_range=etcdrpc.RangeRequest(key=leader))]))
        if r.succeeded:
            return r.header.revision, None
        kvs = r.responses[0].response_range.kvs
        return 0, (kvs[0].value if kvs else None)


def with_tls(url: MetaURL, directory: str) -> MetaURL:
    """``url`` with the etcd TLS files of ``directory`` (ca.pem, client.pem, client-key.pem: what
    ``hedgefs admin init-security`` writes in DIR/etcd/); ValueError (one line) if one is missing."""
    if not directory:
        raise ValueError(f"--meta {url} needs etcd's client certificate: --etcd-tls DIR "
                         f"(the etcd/ directory `hedgefs admin init-security` writes)")
    tls = EtcdTLS(*(os.path.join(directory, f) for f in ("ca.pem", "client.pem", "client-key.pem")))
    for path in (tls.ca, tls.cert, tls.key):
        if not os.path.isfile(path):
            raise ValueError(f"--etcd-tls {directory}: no {os.path.basename(path)} in it "
                             f"(`hedgefs admin init-security` writes DIR/etcd/)")
    return dataclasses.replace(url, tls=tls)


_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"   # + empty SETTINGS


def preflight(url: MetaURL, timeout_s: float = 2.0) -> str | None:
    """Why the first etcd member that answers would refuse this NameNode's connection (one line),
    or None: a plaintext URL to a member that speaks TLS, a member's certificate not from the
    cluster CA, or our client certificate refused. Checked with one TLS handshake before gRPC
    starts (gRPC would only say "unavailable"); members that do not answer are the caller's
    business (MetaUnavailable later)."""
    import socket
    import ssl

    for host, port in url.endpoints:
        where = f"etcd {host}:{port}"
        try:
            raw = socket.create_connection((host, port), timeout=timeout_s)
        except OSError:
            continue
        with raw:
            raw.settimeout(timeout_s)
            try:
                if not url.secure:
                    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
                    probe.check_hostname, probe.verify_mode = False, ssl.CERT_NONE
                    with probe.wrap_socket(raw, server_hostname=host):
                        pass
                    return f"{where} speaks TLS: use --meta {dataclasses.replace(url, secure=True)} (with --etcd-tls DIR)"
                context = ssl.create_default_context(cafile=url.tls.ca)
                context.load_cert_chain(url.tls.cert, url.tls.key)
                context.set_alpn_protocols(["h2"])
                with context.wrap_socket(raw, server_hostname=host) as tls:
                    tls.sendall(_H2_PREFACE)
                    if not tls.recv(9):
                        return f"{where} closed the TLS connection: it refused this NameNode's client certificate"
            except ssl.SSLCertVerificationError as err:
                return f"{where}: its certificate is not one of this cluster's CA ({url.tls.ca}): {err.verify_message}"
            except ssl.SSLError as err:
                if not url.secure:       # an alert is TLS (1.2 refusing us); anything else is no TLS, as asked
                    return f"{where} speaks TLS: use --meta {dataclasses.replace(url, secure=True)} " \
                           f"(with --etcd-tls DIR)" if "ALERT" in (err.reason or "").upper() else None
                reason = (err.reason or str(err)).lower().replace("_", " ")
                return f"{where} refused this NameNode's client certificate ({url.tls.cert}: {reason})"
            except (OSError, ValueError):
                return None
        return None
    return None
