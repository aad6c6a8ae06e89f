"""The ``hedgefs`` command line of each process of a local cluster, from the cluster's options
(cluster.json's ``options``): what launcher.py starts, as etcd.py's ``member_command`` is for an
etcd member. The launcher adds ``--http-port`` and ``--port-file`` to each."""

from __future__ import annotations

import pathlib


def namenode_command(port: int, data_dir: pathlib.Path, options: dict, meta: str = "",
                     credential: pathlib.Path | None = None, etcd_tls: pathlib.Path | None = None,
                     host: str = "127.0.0.1") -> list[str]:
    """``meta``: the etcd URL of an --ha cluster ("" on SQLite); ``credential``: a secure cluster's
    NameNode credential, and ``etcd_tls`` the directory of its etcd client certificate; ``host``:
    the address it listens on (a --hosts cluster's bridge)."""
    args = ["namenode", "--port", str(port), "--data-dir", str(data_dir),
            "--dead-interval-s", str(options["dead_interval_s"]),
            "--repair-interval-s", str(options["repair_interval_s"]),
            "--lease-timeout-s", str(options.get("lease_timeout_s", 600.0))]
    if options.get("policy"):
        args += ["--default-policy", options["policy"]]
    if options.get("block_size"):
        args += ["--block-size", str(options["block_size"])]
    if host != "127.0.0.1":
        args += ["--host", host]
    if meta:
        args += ["--meta", meta]
    if credential is not None:
        args += ["--credentials", str(credential)]
        if etcd_tls is not None:
            args += ["--etcd-tls", str(etcd_tls)]
        if options.get("block_token_lifetime_s"):
            args += ["--block-token-lifetime-s", str(options["block_token_lifetime_s"])]
    return args


def datanode_command(name: str, port: int, data_dir: pathlib.Path, namenode: str, options: dict,
                     credential: pathlib.Path | None = None, place: dict | None = None) -> list[str]:
    """DataNode ``name`` (its own extra flags from ``options["datanode_args"]`` last); ``place``:
    its host's address, host id and rack in a --hosts cluster."""
    args = ["datanode", "--id", name, "--port", str(port), "--data-dir", str(data_dir),
            "--namenode", namenode, "--heartbeat-interval-s", str(options["heartbeat_interval_s"]),
            # A fresh data port each start (the NameNode hears it at registration, readers
            # relocate): the old one may be some client's ephemeral port by now.
            "--data-port", "0"]
    if options.get("enable_faults"):
        args.append("--enable-faults")
    if not options.get("fsync", True):
        args.append("--no-fsync")
    if options.get("scrub_interval_s") is not None:
        args += ["--scrub-interval-s", str(options["scrub_interval_s"]), "--scrub-bandwidth", "64M"]
    if credential is not None:
        args += ["--credentials", str(credential)]
    if place is not None:
        args += ["--host", place["address"], "--host-id", place["host_id"], "--rack", place["rack"]]
    return args + options.get("datanode_args", {}).get(name, [])
