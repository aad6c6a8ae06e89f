"""The NameNode's HTTP side: the status pages, their JSON twins, /metrics and /health.

    /                      overview, DataNode table, read-p99 heat map      (JSON: /api/ or ?format=json)
    /files/<path>          a directory (paged: ?after=NAME) or a file's units (JSON: /api/files/<path>)
    /datanodes/<id>        one DataNode and the units it holds               (JSON: /api/datanodes/<id>)
    /metrics, /health      Prometheus text; a probe

Each page makes one call to the namesystem (one short read under its lock: ``status``,
``browse`` or ``datanode_units``) and renders the answer after the lock is released. Anything
else is a 404 page.

In a secure cluster the server speaks HTTPS (the NameNode's certificate) and the pages, which
show the whole namespace whatever its permissions, answer only a client with an admin's
certificate (HTTP 403 otherwise). /metrics and /health answer anyone: counts, DataNode ids and
addresses, never a path, a token or a key, so Prometheus needs only the CA certificate.
"""

from __future__ import annotations

import dataclasses
import json

from hedgefs import httpserver
from hedgefs.httpserver import Request, Response
from hedgefs.namenode import metrics
from hedgefs.namenode.web import pages
from hedgefs.namenode.errors import NameNodeError
from hedgefs.namenode.model import FilePage

HTML = "text/html; charset=utf-8"
JSON = "application/json"


def _json(status: int, data) -> Response:
    return Response(status, (json.dumps(_public(data), indent=1) + "\n").encode(), JSON)


def _public(data):
    """What a page may show: unit locations lose their block tokens (secrets, and no page's)."""
    if isinstance(data, dict):
        return {k: _public(v) for k, v in data.items() if k != "token"}
    if isinstance(data, list):
        return [_public(v) for v in data]
    return data


def _not_found(as_json: bool, what: str) -> Response:
    if as_json:
        return _json(404, {"error": what})
    return Response(404, pages.not_found(what).encode(), HTML)


def handler(nn, *, secure: bool = False):
    registry = metrics.registry(nn.status)

    def handle(request: Request) -> Response:
        path = request.path
        if secure and path not in ("/metrics", "/health") and (request.peer or ("", ""))[0] != "admin":
            who = f"{request.peer[0]} {request.peer[1]}" if request.peer else "a client without a certificate"
            return httpserver.text(403, f"forbidden: the status pages of a secure cluster need an admin credential "
                                        f"(a client certificate); this is {who}\n")
        as_json = path == "/api" or path.startswith("/api/") or request.query.get("format") == "json"
        if path == "/api" or path.startswith("/api/"):
            path = path[len("/api"):] or "/"
        elif path == "/metrics":
            return httpserver.metrics(registry)
        elif path == "/health":
            return httpserver.health()
        if path in ("/", "/overview"):
            status = nn.status()
            if as_json:
                return _json(200, dict(dataclasses.asdict(status), slow_datanodes=sorted(pages.slow_datanodes(status))))
            return Response(200, pages.overview(status).encode(), HTML)
        if path.startswith("/datanodes/"):
            datanode_id = path[len("/datanodes/"):]
            found = nn.datanode_units(datanode_id)
            if found is None:
                return _not_found(as_json, f"no DataNode {datanode_id!r}")
            if as_json:
                return _json(200, dataclasses.asdict(found))
            return Response(200, pages.datanode_page(found).encode(), HTML)
        if path == "/files" or path.startswith("/files/"):
            target = path[len("/files"):] or "/"
            if len(target) > 1:
                target = target.rstrip("/")
            try:
                found = nn.browse(target, request.query.get("after", ""))
            except NameNodeError as err:
                return _not_found(as_json, str(err))
            if as_json:
                return _json(200, dataclasses.asdict(found))
            html = pages.file_page(found) if isinstance(found, FilePage) else pages.listing(found)
            return Response(200, html.encode(), HTML)
        return _not_found(as_json, f"no page at {request.path}")

    return handle
