"""The NameNode's HTTP side door: Prometheus text at /metrics and a probe at /health.

Read-only, served from a daemon thread; every scrape asks the NameNode core for its report and
an fsck of "/" (both under its lock), so what Prometheus sees is what `hedgefs admin report` and
`hedgefs fsck` print.
"""

import http.server
import logging
import threading

from hedgefs.namenode.model import ClusterReport, FsckReport

log = logging.getLogger("hedgefs.namenode")


def render_metrics(report: ClusterReport, fsck: FsckReport) -> str:
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        lines.extend(f"{name}{labels} {value:g}" for labels, value in samples)

    live = sum(d.state == "live" for d in report.datanodes)
    metric("hedgefs_datanodes", "gauge", "DataNodes known to the NameNode, by state.",
           [('{state="live"}', live), ('{state="dead"}', len(report.datanodes) - live)])
    per_dn = [(f'{{datanode="{d.id}"}}', d) for d in report.datanodes]
    metric("hedgefs_datanode_up", "gauge", "1 if the DataNode is live.", [(lb, d.state == "live") for lb, d in per_dn])
    metric("hedgefs_datanode_used_bytes", "gauge", "Bytes of units stored, from heartbeats.",
           [(lb, d.used_bytes) for lb, d in per_dn])
    metric("hedgefs_datanode_units", "gauge", "Units stored, from heartbeats.", [(lb, d.units) for lb, d in per_dn])
    metric("hedgefs_datanode_heartbeat_age_seconds", "gauge", "Seconds since the last heartbeat.",
           [(lb, d.last_heartbeat_age_ms / 1000) for lb, d in per_dn])
    metric("hedgefs_datanode_pending_repairs", "gauge", "Repairs handed to the DataNode, not yet done.",
           [(lb, d.pending_repairs) for lb, d in per_dn])
    metric("hedgefs_files", "gauge", "Complete files.", [("", fsck.files)])
    metric("hedgefs_block_groups", "gauge", "Block groups by health: healthy (all units live), degraded "
           "(readable, some units missing), missing (fewer than k live units: unreadable).",
           [('{state="healthy"}', fsck.healthy), ('{state="degraded"}', fsck.degraded),
            ('{state="missing"}', fsck.missing)])
    metric("hedgefs_groups_waiting_repair", "gauge", "Block groups with units to rebuild.",
           [("", report.groups_waiting_repair)])
    metric("hedgefs_repairs_done_total", "counter", "Units rebuilt since this NameNode started.",
           [("", report.repairs_done)])
    return "\n".join(lines) + "\n"


class MetricsServer:
    def __init__(self, namenode, host: str, port: int):
        core = namenode

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path == "/metrics":
                    body = render_metrics(core.report(), core.fsck("/")).encode()
                    self._send(200, body, "text/plain; version=0.0.4; charset=utf-8")
                elif self.path == "/health":
                    self._send(200, b"ok\n", "text/plain")
                else:
                    self._send(404, b"not found: try /metrics or /health\n", "text/plain")

            def _send(self, code: int, body: bytes, content_type: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:  # scrapes are not news
                pass

        self._server = http.server.ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="namenode-http", daemon=True)

    def start(self) -> int:
        self._thread.start()
        return self.port

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
