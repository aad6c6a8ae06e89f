"""Start, inspect, fault and stop a local hedgefs cluster made of real processes.

Everything about a cluster lives in one directory:

    <dir>/cluster.json        what was started: RPC and HTTP ports, pids, options
    <dir>/namenode/           NameNode data (SQLite)      <dir>/logs/namenode.log
    <dir>/dn1/ ... <dir>/dnN/ DataNode data               <dir>/logs/dn1.log ...
    <dir>/security/           a secure cluster's CA, credentials and cluster key (security/material.py)
    --ha: <dir>/namenode-2/   the second NameNode; <dir>/etcd/etcd-1..3/ the etcd members holding
                              the namespace (cluster/etcd.py), their logs beside the others
                              admin.pem is the credential of the superuser, for this launcher and you

With --hosts N (root only) the DataNodes run on N hosts in R racks: a network namespace per host on
a bridge (cluster/network.py), each DataNode bound to its host's address and registered with its
host and rack; the NameNode(s) listen on the bridge's address in the root namespace, etcd and
clients stay there too. ``down`` removes every namespace, veth and the bridge.

Processes run in their own sessions, so `hedgefs cluster up` can return and leave them running;
`kill`, `freeze` and `thaw` are SIGKILL, SIGSTOP and SIGCONT from the OS.
"""

import contextlib
import dataclasses
import itertools
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import grpc

from hedgefs.cluster.commands import datanode_command, namenode_command
from hedgefs.cluster.etcd import binaries, free_ports, member_command
from hedgefs.cluster.etcd import wait_healthy as etcd_wait_healthy
from hedgefs.cluster.network import HostNetwork
from hedgefs.cluster.procs import last_line, proc_stat, wait_gone, wait_stopped
from hedgefs.plumbing import read_port_file
from hedgefs.proto import GRPC_OPTIONS, hedgefs_pb2_grpc
from hedgefs.proto import hedgefs_pb2 as pb
from hedgefs.security import material, tls

STATE_FILE = "cluster.json"
NAMENODES = ("namenode", "namenode-2")   # the second only in an --ha cluster
ETCD_MEMBERS = 3


class ClusterError(Exception):
    pass


class AlreadyRunning(ClusterError):
    pass


@dataclasses.dataclass
class Options:
    datanodes: int = 10
    namenode_port: int = 8020
    namenode_http_port: int = 0          # the status page; 0 picks a free port (DataNodes always do)
    policy: str | None = None
    block_size: int | None = None
    heartbeat_interval_s: float = 1.0
    dead_interval_s: float = 30.0
    repair_interval_s: float = 1.0
    lease_timeout_s: float = 600.0
    fsync: bool = True
    enable_faults: bool = True
    scrub_interval_s: float | None = None   # None: the DataNode's default
    secure: bool = False                     # credentials for every process: TLS, checked calls, tokens
    block_token_lifetime_s: float | None = None   # secure only; None: the NameNode's default
    # Extra `hedgefs datanode` flags for some DataNodes, e.g. {"dn3": ["--max-streams", "16"]}.
    datanode_args: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    ha: bool = False                         # 3 etcd members and 2 NameNodes on them (cluster/etcd.py)
    hosts: int = 0                           # >0: DataNodes on this many hosts (network namespaces; root)
    racks: int = 1                           # with hosts: in this many racks (contiguous runs of hosts)


class LocalCluster:
    def __init__(self, root: str | os.PathLike, spawn=None):
        """``spawn(args, log_fd)``, if given, starts ``hedgefs ARGS`` (a NameNode or DataNode) in a
        session of its own with stdin on /dev/null and stdout/stderr on ``log_fd``, and returns an
        object with ``pid``, ``returncode`` and ``poll()`` as subprocess.Popen's; the tests pass one
        that forks the process from an interpreter with the servers' imports done (tests/cli_support.py).
        Without it (and always inside a --hosts cluster's network namespaces): ``python -m hedgefs``."""
        self.root = pathlib.Path(root).resolve()
        self.state: dict = {}
        self._spawn = spawn
        self._children: dict[int, subprocess.Popen] = {}  # kept so exited children are reaped
        if (self.root / STATE_FILE).exists():
            self.state = json.loads((self.root / STATE_FILE).read_text())

    # ------------------------------------------------------------------ queries

    @property
    def namenode_names(self) -> list[str]:
        return [n for n in NAMENODES if n in self.state]

    @property
    def etcd_names(self) -> list[str]:
        return list(self.state.get("etcd", {}))

    @property
    def namenode(self) -> str:
        """The NameNode's address; with --ha, both, comma-separated (what clients and DataNodes take)."""
        return ",".join(f"{self.namenode_host}:{self.state[n]['port']}" for n in self.namenode_names)

    @property
    def network(self) -> HostNetwork | None:
        """The hosts' namespaces and bridge of a --hosts cluster (None: every process on loopback)."""
        return HostNetwork(self.state["network"]) if self.state.get("network") else None

    @property
    def namenode_host(self) -> str:
        """Where the NameNodes listen: loopback, or the bridge's address (hosts reach it there)."""
        return self.network.gateway if self.network else "127.0.0.1"

    def datanode_host(self, name: str) -> str | None:
        """The host a DataNode runs on (None without --hosts)."""
        return self._entry(name).get("host")

    def members(self, target: str) -> list[str]:
        """The processes a target names: a process itself, or the DataNodes of a host (``host3``) or
        of a rack (``rack2``) of a --hosts cluster."""
        net = self.network
        hosts = net.hosts_of(target) if net else []
        if hosts:
            return [d for d in self.datanode_ids if self.datanode_host(d) in hosts]
        try:
            self._entry(target)
        except ClusterError as err:
            raise ClusterError(f"{err}; hosts: {', '.join(net.hosts)}; racks: {', '.join(net.racks)}") \
                if net else err from None
        return [target]

    @property
    def secure(self) -> bool:
        return bool(self.state.get("options", {}).get("secure"))

    @property
    def security_dir(self) -> pathlib.Path:
        return self.root / "security"

    @property
    def credentials(self) -> str | None:
        """The admin's credential file of a secure cluster (None: insecure)."""
        return str(self.security_dir / "admin.pem") if self.secure else None

    def _admin(self) -> "material.Credential | None":
        return material.load_credential(self.credentials) if self.secure else None

    @property
    def http_url(self) -> str:
        """The NameNode's status page."""
        port = self.state["namenode"].get("http_port")
        return f"{'https' if self.secure else 'http'}://{self.namenode_host}:{port}/" if port else ""

    @property
    def datanode_ids(self) -> list[str]:
        return list(self.state.get("datanodes", {}))

    def datanode_address(self, name: str) -> str:
        """The DataNode's gRPC address (fault knobs)."""
        host = self.datanode_host(name)
        return f"{self.network.host(host)['address'] if host else '127.0.0.1'}:{self._entry(name)['port']}"

    def datanode_rpc(self, name: str, method: str, request, timeout: float = 10.0):
        """Call a DataNode's RPC by name: SetFaults, ClearFaults, GetFaults (what tests and tools
        use to inject faults into the processes of this cluster)."""
        name_checked = material.server_name(material.DATANODE, name)
        with tls.channel(self.datanode_address(name), self._admin(), name_checked, GRPC_OPTIONS) as channel:
            return getattr(hedgefs_pb2_grpc.DataNodeStub(channel), method)(request, timeout=timeout)

    def namenode_rpc(self, name: str, method: str, request, timeout: float = 10.0):
        """Call one NameNode's RPC by name ("namenode", "namenode-2"), without failover: what it
        answers itself (a standby's Report included: its role, epoch and applied revision)."""
        address = f"{self.namenode_host}:{self._entry(name)['port']}"
        with tls.channel(address, self._admin(), material.NAMENODE_NAME, GRPC_OPTIONS) as channel:
            return getattr(hedgefs_pb2_grpc.NameNodeStub(channel), method)(request, timeout=timeout)

    def pid(self, name: str) -> int | None:
        entry = self._entry(name)
        return entry.get("pid")

    def is_running(self, name: str) -> bool:
        """Is the process we started still there? A pid alone is not enough: after a reboot or in
        a new container it may belong to someone else, so its start time must match too."""
        entry = self._entry(name)
        pid = entry.get("pid")
        if not pid:
            return False
        try:
            waited, _ = os.waitpid(pid, os.WNOHANG)
            if waited == pid:
                return False
        except ChildProcessError:
            pass
        stat = proc_stat(pid)   # Z: exited, not reaped; X: being reaped (kill's ``gone`` says so)
        return stat is not None and stat[0] not in ("Z", "X") and stat[1] == entry.get("started")

    def exit_code(self, name: str) -> int | None:
        """How a process started by this launcher ended (None: running, or not ours)."""
        proc = self._children.get(self._entry(name).get("pid") or -1)
        return proc.poll() if proc is not None else None

    def process_state(self, name: str) -> str:
        """running | frozen | stopped"""
        if not self.is_running(name):
            return "stopped"
        return "frozen" if proc_stat(self.pid(name))[0] == "T" else "running"

    # ------------------------------------------------------------------ lifecycle

    def up(self, options: Options | None = None, timeout_s: float = 60.0) -> None:
        options = options or Options()
        if self.state and any(self.is_running(n) for n in [*self.namenode_names, *self.datanode_ids, *self.etcd_names]):
            raise AlreadyRunning(f"a cluster is already running in {self.root} (hedgefs cluster down --dir {self.root})")
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        if self.network:
            self.network.destroy()   # what a crashed run left (a cluster that went down has nothing left)
        network = HostNetwork.plan(options.hosts, options.racks) if options.hosts else None
        self.state = {"options": dataclasses.asdict(options), "datanodes": {},
                      "namenode": {"port": options.namenode_port, "http_port": options.namenode_http_port}}
        for i in range(1, options.datanodes + 1):
            self.state["datanodes"][f"dn{i}"] = {"port": 0, "data_port": 0, "http_port": 0}
            if network:   # dealt round-robin: dn1 on host1, ..., dnN+1 on host1 again
                self.state["datanodes"][f"dn{i}"]["host"] = network.hosts[(i - 1) % len(network.hosts)]
        if network:
            self.state["network"] = network.state
        if options.ha:
            ports = free_ports(2 * ETCD_MEMBERS)
            self.state["etcd"] = {f"etcd-{i + 1}": {"client_port": ports[2 * i], "peer_port": ports[2 * i + 1]}
                                  for i in range(ETCD_MEMBERS)}
            self.state["etcd_token"] = f"hedgefs-{os.urandom(6).hex()}"
            self.state["namenode-2"] = {"port": 0, "http_port": 0}
        if options.secure and not (self.security_dir / "ca.pem").exists():
            # An existing (insecure) namespace keeps its cluster id: the material is made for it.
            material.init_material(self.security_dir, self.datanode_ids, cluster_id=self._namespace_cluster_id())
        if options.secure and options.ha and not self.etcd_tls.exists():
            material.add_etcd_material(self.security_dir)   # material made before etcd's was
        try:
            if network:
                self._save()          # the names are on disk before anything is made: down() finds them
                network.create()
            for name in self.etcd_names:
                self.start(name)
            if self.etcd_names:
                etcd_wait_healthy(binaries()[1], self.etcd_endpoints, 30.0, self._check_etcd, self.etcd_tls_or_none)
            for name in self.namenode_names:
                self.start(name)
            self.start_many(self.datanode_ids)
            self.wait_live(self.datanode_ids, timeout_s)
        except BaseException:
            self.down()  # what did start must not outlive a failed `up`
            raise

    def _namespace_cluster_id(self) -> str | None:
        """The cluster id of the namespace in ROOT/namenode, if one was formatted there."""
        import sqlite3

        db = self.root / "namenode" / "namenode.db"   # namenode/namesystem.py's DB_FILE
        if not db.exists():
            return None
        row = None
        for table in ("journal_meta", "meta"):   # the journal's copy of it; the schema-5 format's
            try:
                with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
                    row = conn.execute(f"SELECT value FROM {table} WHERE key = 'cluster_id'").fetchone()
            except sqlite3.Error:
                continue
            if row:
                break
        return row[0] if row else None

    @property
    def etcd_endpoints(self) -> str:
        return ",".join(f"127.0.0.1:{e['client_port']}" for e in self.state.get("etcd", {}).values())

    @property
    def etcd_tls(self) -> "material.EtcdMaterial":
        return material.etcd_material(self.security_dir)

    @property
    def etcd_tls_or_none(self) -> "material.EtcdMaterial | None":
        """etcd's TLS files when the cluster is secure: its members then speak only TLS."""
        return self.etcd_tls if self.secure else None

    @property
    def meta(self) -> str:
        """``--meta`` of the NameNodes: "" (SQLite) or the etcd URL of an --ha cluster (etcds:// if secure)."""
        if not self.etcd_names:
            return ""
        return f"{'etcds' if self.secure else 'etcd'}://{self.etcd_endpoints}/hedgefs"

    def _check_etcd(self) -> None:
        for name in self.etcd_names:
            if not self.is_running(name):
                raise ClusterError(f"{name} exited: {last_line(self.root / 'logs' / (name + '.log'))}")

    def _start_etcd(self, name: str) -> None:
        etcd = self.state["etcd"]
        data_dir = self.root / "etcd" / name
        command = member_command(binaries()[0], name, str(data_dir), {n: e["client_port"] for n, e in etcd.items()},
                                 {n: e["peer_port"] for n, e in etcd.items()}, self.state["etcd_token"],
                                 "existing" if data_dir.exists() else "new", self.etcd_tls_or_none)
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.root / "logs" / f"{name}.log", "ab")
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        log.close()
        etcd[name]["pid"], etcd[name]["started"] = proc.pid, proc_stat(proc.pid)[1]
        self._children[proc.pid] = proc
        self._save()

    def down(self) -> None:
        # Another launcher (`hedgefs cluster restart dn5` while this object is held, say) may have
        # started processes since this one last read cluster.json, and every start is saved there
        # at once: stop what the file says, or they outlive `down` (a test's CLI-restarted DataNode
        # kept heartbeating into a deleted namespace for the rest of the run and after it).
        self._reload()
        names = [*self.datanode_ids, *self.namenode_names, *self.etcd_names] if self.state else []
        for name in names:
            if self.is_running(name):
                pid = self.pid(name)
                os.kill(pid, signal.SIGCONT)  # a frozen process cannot act on SIGTERM
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for name in names:
            while self.is_running(name) and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.is_running(name):
                os.kill(self.pid(name), signal.SIGKILL)
                wait_gone(self.pid(name))   # a namespace outlives its name while a process is in it
            self._entry(name)["pid"] = None
        if self.network:
            self.network.destroy()
        if self.state:
            self._save()

    def _reload(self) -> None:
        """Read cluster.json again: every start is saved there at once, by whichever launcher made it."""
        if (self.root / STATE_FILE).exists():
            self.state = json.loads((self.root / STATE_FILE).read_text())

    def start(self, name: str) -> None:
        """Start (or start again) one process with its data directory and last ports."""
        self.start_many([name])

    def start_many(self, names: list[str]) -> None:
        """Start (or start again) several processes side by side; return once each listens. A
        cluster's DataNodes start in about the time of the slowest rather than of all of them one
        after another: each is an interpreter importing gRPC, protobuf and cryptography (~0.5 s
        of CPU), and ten in a row left a core idle on a 2-core host for most of a cluster's start."""
        for name in names:
            if self.is_running(name):
                raise ClusterError(f"{name} is already running (pid {self.pid(name)})")
        launched = []
        for name in names:
            if name in self.etcd_names:
                (self.root / "logs").mkdir(parents=True, exist_ok=True)
                self._start_etcd(name)
                continue
            entry = self._entry(name)
            command, port_file = self._command(name)
            rpc_port, http_port = entry["port"], entry.get("http_port", 0)
            launched.append((name, command, port_file, rpc_port, http_port,
                             self._launch(name, command(rpc_port), port_file, http_port)))
        for name, command, port_file, rpc_port, http_port, proc in launched:
            entry = self._entry(name)
            # Every process keeps its HTTP (status, metrics) port across restarts, so a bookmark or a
            # static Prometheus target still finds it; if some other process took it meanwhile (a
            # port from bind(0) may be any client's outgoing one by then: a chaos run's NameNode
            # could not restart), it starts on a free one instead and says so in its log. A DataNode
            # does the same with its RPC port (it registers its new address: a test's restart of a
            # DataNode failed on a port some client had been given meanwhile). A NameNode's RPC port is
            # kept at all costs (clients and DataNodes know it). The data port is fresh each start.
            try:
                ports = self._wait_port(name, proc, port_file)
            except ClusterError as err:
                if http_port and "cannot serve HTTP" in str(err):
                    taken, http_port = f"HTTP port {http_port}", 0
                elif name not in NAMENODES and "cannot listen on" in str(err) and "data port" not in str(err):
                    taken, rpc_port = f"RPC port {rpc_port}", 0
                else:
                    raise
                with open(self.root / "logs" / f"{name}.log", "a") as log:
                    log.write(f"launcher: {name}'s {taken} is taken: starting it on a free one\n")
                ports = self._wait_port(name, self._launch(name, command(rpc_port), port_file, http_port), port_file)
            entry["port"], entry["http_port"] = ports["rpc"], ports.get("http", 0)
            if name not in NAMENODES:
                entry["data_port"] = ports["data"]
            self._save()

    def _command(self, name: str):
        """The command line of a NameNode or DataNode as a function of its RPC port, and its port file."""
        options = self.state["options"]
        port_file = self.root / f"{name}.port"
        port_file.unlink(missing_ok=True)
        data_dir = self.root / name
        data_dir.mkdir(parents=True, exist_ok=True)
        if name in NAMENODES:
            secure = options.get("secure")
            credential = self.security_dir / "namenode.pem" if secure else None
            etcd_tls = self.etcd_tls.directory if secure and self.meta else None

            def command(port: int) -> list[str]:
                return namenode_command(port, data_dir, options, self.meta, credential, etcd_tls, self.namenode_host)
        else:
            credential = self.security_dir / f"{name}.pem" if options.get("secure") else None
            if credential is not None and not credential.exists():
                material.add_datanode(self.security_dir, name)

            host = self.datanode_host(name)
            place = None if host is None else {"host_id": host, "address": self.network.host(host)["address"],
                                               "rack": "/" + self.network.host(host)["rack"]}

            def command(port: int) -> list[str]:
                return datanode_command(name, port, data_dir, self.namenode, options, credential, place)
        return command, port_file

    def _launch(self, name: str, args: list[str], port_file: pathlib.Path, http_port: int) -> subprocess.Popen:
        entry = self._entry(name)
        port_file.unlink(missing_ok=True)
        log = open(self.root / "logs" / f"{name}.log", "ab")
        host = self.datanode_host(name) if name in self.datanode_ids else None
        prefix = self.network.exec_prefix(host) if host else []
        args = [*args, "--http-port", str(http_port), "--port-file", str(port_file)]
        try:
            if self._spawn is not None and not prefix:
                proc = self._spawn(args, log.fileno())
            else:
                proc = subprocess.Popen([*prefix, sys.executable, "-m", "hedgefs", *args], stdout=log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        entry["pid"] = proc.pid
        entry["started"] = proc_stat(proc.pid)[1]
        self._children[proc.pid] = proc
        self._save()   # on disk at once: a failed start's down() reads the file
        return proc

    def add_datanode(self, timeout_s: float = 30.0) -> str:
        """Start one more DataNode (the next dnN) and wait until it is live; returns its name."""
        n = max((int(d[2:]) for d in self.datanode_ids if d[2:].isdigit()), default=0) + 1
        name = f"dn{n}"
        self.state["datanodes"][name] = {"port": 0}
        if self.network:
            self.state["datanodes"][name]["host"] = self.network.hosts[(n - 1) % len(self.network.hosts)]
        self.start(name)
        self.wait_live([name], timeout_s)
        return name

    def kill(self, name: str) -> None:
        """SIGKILL, and return once the process has let go of its files and ports (a restart
        must find its data dir's lock free)."""
        self._signal(name, signal.SIGKILL)
        pid = self.pid(name)
        if not wait_gone(pid):
            raise ClusterError(f"{name} (pid {pid}) is still exiting 30 s after SIGKILL")

    def freeze(self, name: str) -> None:
        """SIGSTOP, and return once every thread of the process is stopped: kill() returns
        before a thread running on another core has stopped, and a fault test's next read could
        still be answered (a fresh-clone run's frozen DataNode served one read in 0.00 s)."""
        self._signal(name, signal.SIGSTOP)
        if self.pid(name):
            wait_stopped(self.pid(name))

    def thaw(self, name: str) -> None:
        self._signal(name, signal.SIGCONT)

    def restart(self, name: str, timeout_s: float = 30.0) -> None:
        if self.is_running(name):
            self.kill(name)
        self.start(name)
        if name in self.datanode_ids:
            self.wait_live([name], timeout_s)

    def partition(self, target: str) -> list[str]:
        """Cut a host or a rack off from everything outside it (iptables in its namespaces); returns
        the hosts cut."""
        hosts = self._hosts(target)
        self.network.partition(target)
        self._save()
        return hosts

    def heal(self, target: str | None = None) -> list[str]:
        """Undo the partitions of a host or rack (all: None); returns the hosts healed."""
        if target is not None:
            self._hosts(target)
        healed = self.network.heal(target) if self.network else []
        self._save()
        return healed

    def _hosts(self, target: str) -> list[str]:
        net = self.network
        if net is None:
            raise ClusterError(f"{target}: this cluster has no hosts (cluster up --hosts N)")
        hosts = net.hosts_of(target)
        if not hosts:
            raise ClusterError(f"no host or rack {target!r}; hosts: {', '.join(net.hosts)}; racks: {', '.join(net.racks)}")
        return hosts

    def wait_live(self, names: list[str], timeout_s: float = 60.0) -> None:
        """Block until the NameNode reports every one of `names` live."""
        deadline = time.monotonic() + timeout_s
        # Any NameNode that answers (active or standby: DataNodes report to both, and both answer
        # Report): with --ha the first may be down or frozen (chaos), so each is asked in turn.
        live: set[str] = set()
        for turn in itertools.count():
            if time.monotonic() >= deadline:
                break
            name = self.namenode_names[turn % len(self.namenode_names)]
            try:
                report = self.namenode_rpc(name, "Report", pb.Empty(), timeout=2)
                live = {d.id for d in report.datanodes if d.state != "dead"}   # live or stale
                if set(names) <= live:
                    return
            except grpc.RpcError:
                pass
            if not all(self.is_running(dn) for dn in names):
                self._reload()   # another launcher (`hedgefs cluster restart`) may have started it since
                for dn in names:
                    if not self.is_running(dn):
                        raise ClusterError(f"{dn} exited; see {self.root / 'logs' / (dn + '.log')}")
            time.sleep(0.1)
        missing = sorted(set(names) - live)
        raise ClusterError(f"DataNodes not registered after {timeout_s:.0f} s: {', '.join(missing)}")

    # ------------------------------------------------------------------ internals

    def _entry(self, name: str) -> dict:
        if name in NAMENODES and name in self.state:
            return self.state[name]
        if name in self.state.get("etcd", {}):
            return self.state["etcd"][name]
        try:
            return self.state["datanodes"][name]
        except KeyError:
            known = ", ".join([*self.namenode_names, *self.datanode_ids, *self.etcd_names]) or \
                "none (is the cluster up?)"
            raise ClusterError(f"no such process {name!r} in {self.root}; known: {known}") from None

    def _signal(self, name: str, sig: int) -> None:
        if not self.is_running(name):
            raise ClusterError(f"{name} is not running")
        os.kill(self.pid(name), sig)

    def _wait_port(self, name: str, proc: subprocess.Popen, port_file: pathlib.Path,
                   timeout_s: float = 30.0) -> dict[str, int]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if port_file.exists():
                return read_port_file(port_file)
            if proc.poll() is not None:
                tail = last_line(self.root / "logs" / f"{name}.log")
                raise ClusterError(f"{name} failed to start (exit {proc.returncode}): {tail}")
            time.sleep(0.02)
        raise ClusterError(f"{name} did not start within {timeout_s:.0f} s")

    def _save(self) -> None:
        tmp = self.root / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(self.state, indent=2))
        tmp.replace(self.root / STATE_FILE)
