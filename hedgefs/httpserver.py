"""A small threaded HTTP server: the side door every hedgefs process can open for people and Prometheus.

The owner passes one function, ``handle(Request) -> Response``; this module does the HTTP
(GET and HEAD only, one line of error for anything else) and offers the two answers every side
door has: ``metrics(registry)`` (Prometheus text, formatted and escaped by ``prometheus_client``)
and ``health()``. Requests are served on daemon threads, so a slow browser never blocks a scrape.

Given an ``ssl.SSLContext`` (a secure cluster) it serves HTTPS; the TLS handshake happens on the
request's own thread, and the client certificate, if the client showed one the context verified,
is in ``Request.peer`` as (role, name) for the handler to judge.
"""

from __future__ import annotations

import http.server
import logging
import ssl
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Callable

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, disable_created_metrics, generate_latest

from hedgefs.plumbing import hostport

log = logging.getLogger("hedgefs.http")

# A `_created` timestamp beside every counter and histogram doubles the text and no dashboard
# here reads it.
disable_created_metrics()


@dataclass(frozen=True)
class Request:
    path: str                                        # percent-decoded, without the query
    query: dict[str, str] = field(default_factory=dict)
    peer: tuple[str, str] | None = None              # HTTPS: (OU, CN) of a verified client certificate


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"


def text(status: int, body: str) -> Response:
    return Response(status, body.encode())


def metrics(registry: CollectorRegistry) -> Response:
    return Response(200, generate_latest(registry), CONTENT_TYPE_LATEST)


def health() -> Response:
    return text(200, "ok\n")


Handler = Callable[[Request], Response]


class HttpServer:
    """Binds at construction (so a taken port fails at once, with its OS reason); ``start`` serves."""

    def __init__(self, host: str, port: int, handle: Handler, name: str = "http", tls: ssl.SSLContext | None = None):
        class RequestHandler(http.server.BaseHTTPRequestHandler):
            server_version = "hedgefs"

            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                self._answer(send_body=True)

            def do_HEAD(self) -> None:  # noqa: N802
                self._answer(send_body=False)

            def _answer(self, send_body: bool) -> None:
                split = urllib.parse.urlsplit(self.path)
                request = Request(urllib.parse.unquote(split.path),
                                  dict(urllib.parse.parse_qsl(split.query, keep_blank_values=True)), _peer(self.connection))
                try:
                    response = handle(request)
                except Exception as err:  # one bad page must not take the server down
                    log.exception("%s %s failed", name, request.path)
                    response = text(500, f"error: {type(err).__name__}: {err}\n")
                self.send_response(response.status)
                self.send_header("Content-Type", response.content_type)
                self.send_header("Content-Length", str(len(response.body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if send_body:
                    self.wfile.write(response.body)

            def log_message(self, *args) -> None:  # page views and scrapes are not news
                pass

        self._server = (_TlsServer if tls else http.server.ThreadingHTTPServer)((host, port), RequestHandler)
        self._server.daemon_threads = True
        self._server.tls = tls
        self.host = host
        self.port = self._server.server_address[1]
        self.tls = tls is not None
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{hostport(self.host, self.port)}/"

    def start(self) -> int:
        self._thread.start()
        return self.port

    def stop(self) -> None:
        if self._thread.is_alive():   # shutdown() of a server that never served would wait forever
            self._server.shutdown()
        self._server.server_close()


class _TlsServer(http.server.ThreadingHTTPServer):
    """HTTPS: each connection's handshake on its own thread (a slow client holds only that one)."""

    tls: ssl.SSLContext

    def finish_request(self, request, client_address) -> None:
        request.settimeout(30)
        try:
            request = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as err:
            log.debug("TLS handshake with %s failed: %s", client_address, err)
            return
        super().finish_request(request, client_address)

    def handle_error(self, request, client_address) -> None:   # a client that went away: no traceback
        log.debug("connection from %s ended badly", client_address)


def _peer(connection) -> tuple[str, str] | None:
    if not isinstance(connection, ssl.SSLSocket):
        return None
    cert = connection.getpeercert()
    if not cert:
        return None
    fields = {k: v for rdn in cert.get("subject", ()) for k, v in rdn}
    return fields.get("organizationalUnitName", ""), fields.get("commonName", "")


def open_server(host: str, port: int, handle: Handler, what: str, tls: ssl.SSLContext | None = None) -> HttpServer:
    """An HttpServer, or RuntimeError with one line saying why the port cannot be used."""
    try:
        return HttpServer(host, port, handle, name=f"{what}-http", tls=tls)
    except OSError as err:
        raise RuntimeError(f"{what}: cannot serve HTTP on {hostport(host, port)} ({err.strerror or err})") from None
