"""The NameNode process: the namesystem, its gRPC server, the monitor thread and the web pages.

``serve`` is what ``hedgefs namenode`` runs: it locks the data dir, opens the namesystem, serves
until SIGTERM or SIGINT and shuts everything down in order.

Given a credential (a secure cluster) every port speaks TLS with it, every RPC is checked
(servicer.AUTHORIZATION), block tokens are signed with its cluster key and the namespace must be
of its cluster. Without one, the NameNode is as open as before and says so once when it binds
an address other machines can reach.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
from concurrent.futures import ThreadPoolExecutor

import grpc

from hedgefs import httpserver
from hedgefs.namenode.ha.election import DEFAULT_TTL_S
from hedgefs.namenode.journal.etcd_meta import MetaURL, parse_meta_url, with_tls
from hedgefs.namenode.ha.roles import HA, Single
from hedgefs.namenode.journal.sqlite import SqliteEngine
from hedgefs.namenode.monitor import Monitor
from hedgefs.namenode.namesystem import CHECKPOINT_EVERY, DB_FILE, Namesystem
from hedgefs.namenode.rpc.servicer import NameNodeServicer, authorizer
from hedgefs.namenode.web import handler as web
from hedgefs.plumbing import hostport, serve_until, stop_on_signal, warn_if_open, write_port_file
from hedgefs.proto import GRPC_OPTIONS, NAMENODE_MAX_MESSAGE_BYTES, hedgefs_pb2_grpc
from hedgefs.security import tls
from hedgefs.security.identity import NAMENODE, Credential, Refused
from hedgefs.security.tokens import DEFAULT_LIFETIME_S, BlockTokens

log = logging.getLogger("hedgefs.namenode")

_SERVER_OPTIONS = [*((k, v) for k, v in GRPC_OPTIONS if "message_length" not in k),
                   ("grpc.max_send_message_length", NAMENODE_MAX_MESSAGE_BYTES),
                   ("grpc.max_receive_message_length", NAMENODE_MAX_MESSAGE_BYTES),
                   ("grpc.so_reuseport", 0)]


def _lock_data_dir(data_dir: str):
    """One NameNode per data dir: two writers of one SQLite namespace would not end well."""
    handle = open(os.path.join(data_dir, "namenode.lock"), "w")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise RuntimeError(f"another NameNode is using {data_dir}") from None
    return handle


def serve(*, port: int, data_dir: str, host: str = "127.0.0.1", port_file: str | None = None,
          dead_interval_s: float = 30.0, default_block_size: int = 128 * 1024 * 1024,
          default_policy: str = "RS-6-3-1024k", repair_interval_s: float = 1.0,
          lease_timeout_s: float = 600.0, http_port: int | None = None, min_replicas: int = 2,
          credential: Credential | None = None, cluster_id: str | None = None,
          block_token_lifetime_s: float = DEFAULT_LIFETIME_S, meta: str = "",
          lease_ttl_s: int = DEFAULT_TTL_S, safe_mode_share: float = 0.9, etcd_max_txn_ops: int = 1024,
          etcd_tls: str = "", safe_mode_deadline_s: float = 60.0, checkpoint_every: int = CHECKPOINT_EVERY) -> None:
    """Run a NameNode until SIGTERM or SIGINT (signals are handled only from the main thread).

    Raises RuntimeError / ValueError with a one-line message if it cannot start (port taken,
    data dir in use by another NameNode, bad default policy, a credential that is not a
    NameNode's, a namespace of another cluster).

    ``meta``: ``sqlite:///PATH`` (default: namenode.db in the data dir) or
    ``etcd://HOST:PORT[,...]/PREFIX`` (HA, ha/roles.py: this NameNode is the active or a
    standby; MetaUnavailable when no etcd member answers at start), or ``etcds://...`` (TLS, with
    the client certificate of the directory ``etcd_tls``). A journal or image that does not check
    raises CorruptStore (one line naming it and the txid).
    """
    url = parse_meta_url(meta) if meta else MetaURL("sqlite")
    if url.secure:
        url = with_tls(url, etcd_tls)   # etcds://: TLS with the client certificate in etcd_tls
    tokens = None
    if credential is not None:
        if credential.identity.role != NAMENODE or credential.cluster_key is None:
            raise Refused(f"{credential.path} is not a NameNode's credential ({credential.identity})")
        if cluster_id and cluster_id != credential.cluster_id:
            raise Refused(f"--cluster-id {cluster_id} but the credential is of cluster {credential.cluster_id}")
        cluster_id = credential.cluster_id
        tokens = BlockTokens(credential.cluster_key, block_token_lifetime_s)
    else:
        warn_if_open("namenode", host)
    os.makedirs(data_dir, exist_ok=True)
    dir_lock = _lock_data_dir(data_dir)
    namenode = server = http = role = None
    monitors: list[Monitor] = []
    address = hostport(host, port)

    def open_namesystem(engine=None, standby=False):
        if engine is None:
            engine = SqliteEngine(url.path or os.path.join(data_dir, DB_FILE))
        return Namesystem(data_dir, default_policy=default_policy, default_block_size=default_block_size,
                          dead_interval_s=dead_interval_s, lease_timeout_s=lease_timeout_s,
                          min_replicas=min_replicas, cluster_id=cluster_id, tokens=tokens, engine=engine,
                          standby=standby, safe_mode_share=safe_mode_share,
                          safe_mode_deadline_s=safe_mode_deadline_s if url.scheme == "sqlite" else None,
                          checkpoint_every=checkpoint_every)

    def on_active(nn):
        started = [Monitor(nn, repair_interval_s), nn.checkpointer]
        for m in started:
            m.start()
        monitors.extend(started)

    def on_standby():
        while monitors:
            monitors.pop().stop()

    try:
        with stop_on_signal() as stop:
            if url.scheme == "sqlite":
                namenode = open_namesystem()
                role = Single(namenode)
            else:
                role = HA(url, data_dir, rpc_address="", open_namesystem=open_namesystem, on_active=on_active,
                          on_standby=on_standby, ttl_s=lease_ttl_s, cluster_id=cluster_id,
                          max_txn_ops=etcd_max_txn_ops)
            # SO_REUSEPORT (gRPC's default on Linux) would let a second NameNode share the port silently.
            server = grpc.server(ThreadPoolExecutor(max_workers=32, thread_name_prefix="namenode-rpc"),
                                 options=_SERVER_OPTIONS, interceptors=[authorizer(secure=credential is not None)])
            hedgefs_pb2_grpc.add_NameNodeServicer_to_server(NameNodeServicer(namenode, credential, role), server)
            try:
                if credential is None:
                    bound = server.add_insecure_port(address)
                else:
                    bound = server.add_secure_port(address, tls.grpc_server_credentials(credential))
            except RuntimeError:
                bound = 0
            if bound == 0:
                raise RuntimeError(f"namenode: cannot listen on {address} (address in use?)")
            server.start()
            if namenode is not None:
                on_active(namenode)
            if http_port is not None:
                http = httpserver.open_server(
                    host, http_port, web.handler(namenode or Current(role), secure=credential is not None), "namenode",
                    tls=tls.server_context(credential, client_cert="optional") if credential else None)
                http.start()
                log.info("namenode status page on %s (metrics at %smetrics)", http.url, http.url)
            if isinstance(role, HA):
                role.rpc_address = hostport(_advertised(host), bound)
                role.http_address = hostport(_advertised(host), http.port) if http else ""
                role.start()
            if port_file:
                write_port_file(port_file, bound, **({"http": http.port} if http else {}))
            log.info("namenode listening on %s (%s, %s)", hostport(host, bound),
                     f"cluster {namenode.cluster_id}" if namenode else f"metadata on {url}",
                     "secure: TLS, every call checked" if credential else "insecure")
            serve_until(stop)
            log.info("namenode stopping")
    finally:
        if http is not None:
            http.stop()
        if server is not None:
            server.stop(grace=2.0).wait()
        on_standby()
        if isinstance(role, HA):
            role.close()      # an active gives its lease up: a standby takes over at once
        elif namenode is not None:
            namenode.close()
        dir_lock.close()


def _advertised(host: str) -> str:
    """The host other processes reach this one at (a wildcard bind advertises the host name)."""
    return socket.gethostname() if host in ("0.0.0.0", "::", "") else host


class Current:
    """The status pages' namesystem on etcd: whichever this NameNode runs at the time of each call
    (ha.py; the pages call only methods: status, browse, datanode_units)."""

    def __init__(self, role):
        self._role = role

    def __getattr__(self, name):
        return lambda *args, **kwargs: getattr(self._role.reader(), name)(*args, **kwargs)
