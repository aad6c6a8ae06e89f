"""Noticing a client's hang-up while a read waits on a fault knob (the data server's helper)."""

from __future__ import annotations

import os
import select
import socket
import threading
from collections.abc import Callable


class HangupWatcher:
    """One thread that notices when watched connections are closed (FIN or RST) by their client.

    ``watch``/``unwatch`` are called from the serving threads (epoll is safe to change while
    another thread waits on it); ``unwatch`` returns before the connection can be closed, so a
    file descriptor number is never confused with a later connection's."""

    def __init__(self):
        self._epoll = select.epoll()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._epoll.register(self._wake_r, select.EPOLLIN)
        self._thread = threading.Thread(target=self._run, name="dn-data-hangup", daemon=True)
        self._thread.start()

    def watch(self, sock: socket.socket, on_hangup: Callable[[], None]) -> None:
        with self._lock:
            self._callbacks[sock.fileno()] = on_hangup
            self._epoll.register(sock.fileno(), select.EPOLLRDHUP | select.EPOLLHUP | select.EPOLLERR)

    def unwatch(self, sock: socket.socket) -> None:
        with self._lock:
            if self._callbacks.pop(sock.fileno(), None) is not None:
                self._epoll.unregister(sock.fileno())

    def _run(self) -> None:
        while True:
            for fd, _ in self._epoll.poll():
                if fd == self._wake_r:
                    return
                with self._lock:
                    callback = self._callbacks.pop(fd, None)
                    if callback is not None:
                        self._epoll.unregister(fd)
                if callback is not None:
                    callback()

    def stop(self) -> None:
        os.write(self._wake_w, b"x")
        self._thread.join(timeout=5)
        self._epoll.close()
        os.close(self._wake_r)
        os.close(self._wake_w)
