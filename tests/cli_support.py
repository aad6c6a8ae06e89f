"""The CLI as a user runs it, without paying its imports in every call: a fork server.

A test's ``run_cli`` is a real ``hedgefs`` process: its own pid, exit status, file descriptors
0/1/2 on pipes, environment and working directory, signal dispositions as Python sets them,
threads that die with it, atexit and the interpreter's own shutdown. Only its start differs: it is
forked from a server process that has imported the CLI and the client library once (~0.3 s of CPU
a process otherwise, the numpy, gRPC, protobuf and cryptography imports; a few ms forked), so the
hundreds of CLI calls of ``make test`` cost what their commands do. The NameNodes and DataNodes
of the clusters the tests start (``conftest.start_cluster``) are forked the same way
(``ForkServer.spawn``, the launcher's ``spawn``): each in a session of its own, stdin on
/dev/null, stdout and stderr on its log, and the launcher sees its pid and exit status as a
Popen's: a 10-DataNode cluster is eleven processes, ~0.4 s of imports each when started afresh.

The server (``python tests/cli_support.py``) is started on first use by each pytest process and
ends when that process does (it watches its stdin, a pipe from the test process). It stays
single-threaded and never opens a channel, so forking it is safe. For each call it receives the
argv, environment and cwd, and the call's stdin/stdout/stderr as file descriptors over a Unix
socket; it forks, answers the child's pid, and the exit status when the child ends (a pidfd in its
selector). The child drops the server's descriptors, takes the call's as 0/1/2, its environment,
cwd and argv, then runs ``python -m hedgefs`` (runpy) and ends as the interpreter ends a program:
an uncaught exception prints its traceback and exits 1, SystemExit's code is the status, threads
are joined and atexit functions run, stdout and stderr are flushed (only the module teardown after
that is skipped).

What a forked process cannot show: the cost or the side effects of start-up itself (which
modules a verb imports, an environment variable read at import). No preloaded module reads the
environment when imported (``namenode.faults`` reads it at its first fault point); a test of
start-up runs ``python -m hedgefs`` itself (``run_cli(..., fresh=True)``).
"""

from __future__ import annotations

import atexit
import json
import os
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading

# Imported once in the server: the CLI's root and the verbs of everyday tests, with the client
# library they pull in. Servers, cluster, bench and chaos verbs are imported by their child.
PRELOAD = ("hedgefs.cli", "hedgefs.cli.common", "hedgefs.cli.files", "hedgefs.cli.listing", "hedgefs.cli.shell",
           "hedgefs.cli.changes", "hedgefs.cli.space", "hedgefs.cli.policies", "hedgefs.cli.trash",
           "hedgefs.cli.local", "hedgefs.cli.trees", "hedgefs.cli.admin", "hedgefs.client.fs",
           # The servers of the launcher's clusters (spawn): a DataNode and a NameNode on SQLite.
           "hedgefs.cli.servers", "hedgefs.cli.paths", "hedgefs.client.config", "hedgefs.datanode.faults",
           "hedgefs.datanode.server", "hedgefs.datanode.storage", "hedgefs.namenode.server",
           "hedgefs.namenode.journal.journal")

_HEADER = struct.Struct("!I")


# ---------------------------------------------------------------------------- the server


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        more = conn.recv(n - len(data))
        if not more:
            raise EOFError
        data += more
    return data


def _serve(listener: socket.socket) -> dict | None:
    """Answer calls until the test process goes (None); in a forked child, its call (a dict)."""
    selector = selectors.DefaultSelector()
    selector.register(sys.stdin.fileno(), selectors.EVENT_READ, "parent")
    selector.register(listener, selectors.EVENT_READ, "accept")
    children: dict[int, tuple[int, socket.socket]] = {}   # pidfd -> (pid, connection)
    while True:
        for key, _ in selector.select():
            if key.data == "parent":
                if not os.read(sys.stdin.fileno(), 4096):
                    return None
            elif key.data == "accept":
                conn, _ = listener.accept()
                try:
                    header, fds, _, _ = socket.recv_fds(conn, _HEADER.size, 3)
                    call = json.loads(_recv_exact(conn, _HEADER.unpack(header)[0]))
                except (EOFError, OSError, ValueError, struct.error):
                    conn.close()
                    continue
                pid = os.fork()
                if pid == 0:
                    for fd in [*children, sys.stdin.fileno()]:
                        os.close(fd)
                    for _, other in children.values():
                        other.close()
                    selector.close()
                    listener.close()
                    conn.close()
                    call["fds"] = fds
                    return call
                for fd in fds:
                    os.close(fd)
                pidfd = os.pidfd_open(pid)
                children[pidfd] = (pid, conn)
                selector.register(pidfd, selectors.EVENT_READ, "child")
                try:
                    conn.sendall(f"{pid}\n".encode())
                except OSError:
                    pass   # the test went away: the child is still reaped when it ends
            else:   # a child ended
                pid, conn = children.pop(key.fd)
                selector.unregister(key.fd)
                os.close(key.fd)
                _, status = os.waitpid(pid, 0)
                try:
                    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                except OSError:
                    pass   # the test gave up on it (a timeout)
                conn.close()


def _become(call: dict) -> None:
    """Turn the forked child into `python -m hedgefs ARGS` with the call's environment."""
    stdin, stdout, stderr = call["fds"]
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
    for fd in {stdin, stdout, stderr} - {0, 1, 2}:
        os.close(fd)
    os.environ.clear()
    os.environ.update(call["env"])
    os.chdir(call["cwd"])
    if call.get("session"):
        os.setsid()
    import runpy

    import hedgefs

    sys.argv = [os.path.join(os.path.dirname(hedgefs.__file__), "__main__.py"), *call["argv"]]
    code = 0
    try:
        runpy.run_module("hedgefs", run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            code = stop.code or 0
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    _leave(code)


def _leave(code: int) -> None:
    """The interpreter's end (Py_FinalizeEx) up to the module teardown: non-daemon threads joined,
    atexit functions run, stdout and stderr flushed (a failed flush is exit 120). The teardown
    itself (~65 ms of a forked child with numpy and gRPC loaded, 2/3 of a call like `ls`) changes
    nothing a caller sees, and is skipped."""
    import atexit

    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            code = code or 120
    os._exit(code)


def _server_main(path: str) -> None:
    import importlib

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception:
            pass   # a broken module fails in each child as it would in a fresh process, traceback and all
    if threading.active_count() != 1:
        sys.exit(f"cli_support: cannot fork safely ({threading.active_count()} threads)")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    call = _serve(listener)
    if call is None:
        return
    _become(call)


# ---------------------------------------------------------------------------- the client


class Spawned:
    """A process forked for ``ForkServer.spawn``: ``pid``, ``returncode`` and ``poll()`` as
    subprocess.Popen's (the server reaps it and sends its exit status on the call's connection)."""

    def __init__(self, conn: socket.socket):
        self._conn, self._buffer, self.returncode = conn, b"", None
        while b"\n" not in self._buffer:
            more = conn.recv(64)
            if not more:
                conn.close()
                raise RuntimeError("cli_support: the fork server went away before it forked")
            self._buffer += more
        line, self._buffer = self._buffer.split(b"\n", 1)
        self.pid = int(line)

    def poll(self) -> int | None:
        if self.returncode is None and self._conn is not None:
            try:
                more = self._conn.recv(64, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return None
            self._buffer += more
            if b"\n" in self._buffer:
                self.returncode = int(self._buffer.split(b"\n", 1)[0])
            if more == b"" or self.returncode is not None:
                # Done; or the server ended with its test process, and the status is unknown.
                self._conn.close()
                self._conn = None
        return self.returncode


class ForkServer:
    """One server per test process, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._dir = tempfile.mkdtemp(prefix="hedgefs-cli-")
        self.path = os.path.join(self._dir, "fork.sock")
        atexit.register(self.close)

    def close(self) -> None:
        """Stop the server (its stdin closes: it returns) and remove its socket's directory."""
        with self._lock:
            if self._proc is not None:
                self._proc.stdin.close()
                try:
                    self._proc.wait(10)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                self._proc.stdout.close()
                self._proc = None
            shutil.rmtree(self._dir, ignore_errors=True)

    def _ensure(self) -> None:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return
            if os.path.exists(self.path):
                os.unlink(self.path)
            self._proc = subprocess.Popen([sys.executable, __file__, self.path], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE)
            if self._proc.stdout.readline() != b"ready\n":
                raise RuntimeError(f"cli_support: the fork server did not start (exit {self._proc.wait()})")

    def _call(self, call: dict, fds: list[int]) -> socket.socket:
        """Hand a call and its stdin/stdout/stderr to the server; the connection its answers come on."""
        self._ensure()
        payload = json.dumps(call).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            socket.send_fds(conn, [_HEADER.pack(len(payload))], fds)
            conn.sendall(payload)
        except BaseException:
            conn.close()
            raise
        return conn

    def spawn(self, argv: list[str], log_fd: int) -> Spawned:
        """``hedgefs ARGV`` (a NameNode or DataNode of the launcher's) in a session of its own, stdin
        on /dev/null, stdout and stderr on ``log_fd``, the caller's environment and cwd; returns
        once it is forked (cluster/launcher.py's ``spawn``)."""
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            conn = self._call({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "session": True},
                              [null, log_fd, log_fd])
        finally:
            os.close(null)
        return Spawned(conn)

    def run(self, argv: list[str], env: dict, input: bytes | None, timeout: float) -> tuple[int, bytes, bytes]:
        """(exit code, stdout, stderr) of `hedgefs ARGV`; subprocess.TimeoutExpired as subprocess.run."""
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            conn = self._call({"argv": argv, "env": env, "cwd": os.getcwd()}, [in_r, out_w, err_w])
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}

        def drain(fd: int) -> None:
            while data := os.read(fd, 1 << 16):
                chunks[fd].append(data)

        def feed() -> None:
            try:
                if input:
                    view = memoryview(input)
                    while view:
                        view = view[os.write(in_w, view[:1 << 16]):]
            except BrokenPipeError:
                pass   # the command did not read it all, as with subprocess.run
            finally:
                os.close(in_w)

        threads = [threading.Thread(target=drain, args=(fd,), daemon=True) for fd in (out_r, err_r)]
        threads.append(threading.Thread(target=feed, daemon=True))
        for t in threads:
            t.start()
        conn.settimeout(timeout)
        reply = conn.makefile("rb")
        pid = None
        try:
            pid = int(reply.readline())
            code = int(reply.readline())
        except (TimeoutError, socket.timeout):
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
            raise subprocess.TimeoutExpired(["hedgefs", *argv], timeout) from None
        finally:
            reply.close()
            conn.close()
            for t in threads:
                t.join(timeout)
            os.close(out_r)
            os.close(err_r)
        return code, b"".join(chunks[out_r]), b"".join(chunks[err_r])


if __name__ == "__main__":
    _server_main(sys.argv[1])
