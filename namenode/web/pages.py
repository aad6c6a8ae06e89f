"""The status pages as HTML: the overview (with the read-p99 heat map), a directory, a file, a DataNode.

Pure functions from the plain data of ``model.py`` to a string; no lock, no I/O. Every value that
comes from the cluster (DataNode ids, addresses, paths, policy names, fault knobs) goes through
``h`` (HTML escape) or ``url`` (percent-encoding), so a DataNode called ``<script>`` is text.
"""

from __future__ import annotations

import html
import math
import statistics
import time
import urllib.parse

from hedgefs.ec.layout import zero_units
from hedgefs.ec.policy import parse_policy
from hedgefs.namenode.model import ClusterStatus, DataNodeStatus, FilePage, Listing, UnitsPage
from hedgefs.namenode.namespace.permissions import mode_string

SLOW_FACTOR = 4.0      # a DataNode is marked slow when its p99 is this many times the cluster's median
SLOW_FLOOR_MS = 50.0   # ... and at least this much (a 2 ms p99 among 0.4 ms ones is no news)
SLOW_WINDOW = 2        # ... judged on its last 60 s of reads, else the last this many wall-clock minutes


def h(value) -> str:
    return html.escape(str(value), quote=True)


def url(path: str, *, safe: str = "/") -> str:
    return urllib.parse.quote(path, safe=safe)


def datanode_link(datanode_id: str) -> str:
    return f'<a href="/datanodes/{h(url(datanode_id, safe=""))}">{h(datanode_id)}</a>'


def file_link(path: str, text: str | None = None) -> str:
    return f'<a href="/files{h(url(path))}">{h(path if text is None else text)}</a>'


def size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def duration(seconds: float) -> str:
    seconds = int(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 10 else f"{value:.1f} ms"


CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{background:#1d2330;color:#fff;padding:10px 20px;display:flex;gap:24px;align-items:baseline}
header a{color:#cfe0ff;text-decoration:none} header .brand{font-weight:600;font-size:16px;color:#fff}
header label{margin-left:auto;font-size:12px;color:#cfd3da}
main{padding:16px 20px;max-width:1400px}
h1{font-size:20px;margin:4px 0 12px} h2{font-size:16px;margin:22px 0 8px}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:8px 12px;min-width:120px}
.card .k{font-size:12px;color:#5b6475} .card .v{font-size:18px;font-weight:600}
table{border-collapse:collapse;background:#fff;border:1px solid #dde1e7;width:100%}
th,td{padding:4px 8px;border-bottom:1px solid #eceff3;text-align:left;white-space:nowrap}
th{background:#eef1f5;font-size:12px;color:#3a4252} td.n{text-align:right;font-variant-numeric:tabular-nums}
.state{border-radius:3px;padding:1px 6px;font-size:12px;font-weight:600}
.state-live,.state-healthy,.state-HEALTHY{background:#dff3e3;color:#1b6b2c}
.state-stale,.state-degraded,.state-DEGRADED{background:#fff1cc;color:#7a5300}
.state-dead,.state-missing,.state-MISSING{background:#fde0e0;color:#9b1c1c}
.state-decommissioning,.state-decommissioned,.state-safemode{background:#e3e8f8;color:#27408b}
tr.slow td{background:#fff4f4} .faults{color:#9b1c1c;font-size:12px}
.muted{color:#7a8291} .heat{background:#fff;border:1px solid #dde1e7;padding:8px}
.heat text{font:11px system-ui,sans-serif;fill:#1d2330} .heat .slow-mark{fill:#c62828;font-weight:700}
"""

REFRESH_JS = """
(function(){var box=document.getElementById('auto');var on=localStorage.getItem('hedgefs-refresh')!=='off';
box.checked=on;box.onchange=function(){localStorage.setItem('hedgefs-refresh',box.checked?'on':'off')};
setInterval(function(){if(box.checked)location.reload()},10000)})();
"""


def page(title: str, body: str, *, refresh: bool = False) -> str:
    toggle = '<label><input type="checkbox" id="auto"> refresh every 10 s</label>' if refresh else ""
    script = f"<script>{REFRESH_JS}</script>" if refresh else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{h(title)} · hedgefs</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{CSS}</style></head>'
            f'<body><header><span class="brand">hedgefs NameNode</span><a href="/">Overview</a>'
            f'<a href="/files/">Files</a><a href="/metrics">Metrics</a>{toggle}</header>'
            f'<main>{body}</main>{script}</body></html>')


def not_found(what: str) -> str:
    return page("not found", f"<h1>Not found</h1><p>{h(what)}</p><p><a href=\"/\">Back to the overview</a></p>")


def card(key: str, value: str, css: str = "") -> str:
    return f'<div class="card {css}"><div class="k">{h(key)}</div><div class="v">{value}</div></div>'


# ---------------------------------------------------------------------- overview


def slow_datanodes(status: ClusterStatus) -> set[str]:
    """DataNodes slow *now*: read p99 over SLOW_FACTOR x the median of every DataNode's, and over
    SLOW_FLOOR_MS. Each is judged on the reads of its last 60 s (as it reports them), else on the
    last SLOW_WINDOW wall-clock minutes; one with no reads in that time is not judged, so a DataNode
    slow minutes ago and not read since is not marked, and one that just became slow is."""
    recent = {}
    for d in status.datanodes:
        if d.state == "dead":
            continue
        if d.reads:
            recent[d.id] = d.read_p99_ms
            continue
        values = [v for v in d.p99_by_minute[-SLOW_WINDOW:] if v is not None]
        if values:
            recent[d.id] = max(values)
    if len(recent) < 3:
        return set()
    typical = statistics.median(recent.values())
    return {d for d, v in recent.items() if v >= SLOW_FLOOR_MS and v >= SLOW_FACTOR * typical}


def overview(status: ClusterStatus) -> str:
    slow = slow_datanodes(status)
    uptime = duration((status.now_ms - status.started_ms) / 1000)
    cards = []
    if status.cluster_id:
        cards.append(card("cluster id", h(status.cluster_id)))
    if status.safe_mode:
        cards.append(card("safe mode", f'<span class="state state-safemode" id="safe-mode">ON ({h(status.safe_mode)})'
                                       f'</span>'))
    cards += [
        card("uptime", h(uptime)),
        card("capacity", h(size(status.capacity_bytes))),
        card("remaining", h(size(status.remaining_bytes))),
        card("used", h(size(status.used_bytes))),
        card("files", h(status.files)),
        card("directories", h(status.directories)),
        card("groups healthy", f'<span class="state state-healthy" id="groups-healthy">{status.groups_healthy}</span>'),
        card("degraded", f'<span class="state state-degraded" id="groups-degraded">{status.groups_degraded}</span>'),
        card("missing", f'<span class="state state-missing" id="groups-missing">{status.groups_missing}</span>'),
        card("repairs queued / running", h(f"{status.repairs_queued} / {status.repairs_running}")),
        card("repairs done", h(status.repairs_done)),
    ]
    policies = ", ".join(f"{h(p)} ({n})" for p, n in status.policies.items()) or '<span class="muted">none yet</span>'
    live = sum(d.state == "live" for d in status.datanodes)
    body = (f'<h1>Overview</h1><div class="cards" id="overview">{"".join(cards)}</div>'
            f'<p>Policies in use: <span id="policies">{policies}</span></p>'
            f'<h2>DataNodes <span class="muted">({live} of {len(status.datanodes)} live)</span></h2>'
            f'{datanode_table(status.datanodes, slow)}'
            f'<p class="muted" id="low-space-threshold">⚠ low: under {status.low_space_pct:g} % of its capacity '
            f'free. No unit is placed on a DataNode without room for it.</p>'
            f'<h2>Read p99 by DataNode, per minute, last hour</h2>'
            f'<p class="muted">As each DataNode measures the reads it serves (request to last byte). '
            f'Marked ▲: p99 over {SLOW_FACTOR:g}× the cluster median and over {SLOW_FLOOR_MS:g} ms.</p>'
            f'<div class="heat">{heat_map(status, slow)}</div>')
    return page("overview", body, refresh=True)


def datanode_table(rows: list[DataNodeStatus], slow: set[str] = frozenset()) -> str:
    head = ("<tr><th>DataNode</th><th>state</th><th>address</th><th>rack / host</th><th>heartbeat</th><th>used</th>"
            "<th>capacity</th>"
            "<th>remaining</th>"
            "<th>units</th><th>repairs</th><th>deletes</th><th>faults</th><th>reads/60 s</th><th>p50</th>"
            "<th>p99</th><th>metrics</th></tr>")
    out = []
    for d in rows:
        faults = ", ".join(f"{k}={v}" for k, v in sorted(d.faults.items()))
        metrics = f'<a href="http://{h(d.http_address)}/metrics">{h(d.http_address)}</a>' if d.http_address else "–"
        latency = (f'<td class="n">{h(ms(d.read_p50_ms))}</td><td class="n">{h(ms(d.read_p99_ms))}</td>'
                   if d.reads else '<td class="n muted">–</td><td class="n muted">–</td>')
        out.append(
            f'<tr class="dn{" slow" if d.id in slow else ""}" data-datanode="{h(d.id)}" data-state="{h(d.state)}">'
            f'<td>{datanode_link(d.id)}</td><td><span class="state state-{h(d.state)}">{h(d.state)}</span>'
            f'{_admin_state(d)}</td>'
            f'<td>{h(d.address)}</td><td class="where" data-rack="{h(d.rack)}" data-host="{h(d.host_id)}">'
            f'{h(d.rack)} / {h(d.host_id)}</td><td class="n">{d.heartbeat_age_s:.1f} s</td>'
            f'<td class="n">{h(size(d.used_bytes))}</td><td class="n">{h(size(d.capacity_bytes))}</td>'
            f'<td class="n{" low-space" if d.low_space else ""}"'
            f'{_sharing_title(d)}>{h(size(d.remaining_bytes))}{" ⚠ low" if d.low_space else ""}</td>'
            f'<td class="n">{d.units}</td><td class="n" title="planned here / running there">'
            f'{d.repairs_running} / {d.repairs_active}</td><td class="n">{d.pending_deletes}</td>'
            f'<td class="faults">{h(faults)}</td><td class="n">{d.reads}</td>{latency}<td>{metrics}</td></tr>')
            # (a scrub column goes here when DataNodes report scrub progress)
    return f'<table id="datanodes">{head}{"".join(out)}</table>'


def _admin_state(d) -> str:
    """A decommissioning / decommissioned DataNode's badge beside its state."""
    if not d.admin_state:
        return ""
    return f' <span class="state state-{h(d.admin_state)}" data-admin-state="{h(d.admin_state)}">{h(d.admin_state)}</span>'


def _sharing_title(d: DataNodeStatus) -> str:
    if not d.shares_filesystem_with:
        return ""
    return f' title="one file system with {h(", ".join(d.shares_filesystem_with))}: counted once in the total"'


def color(p99_ms: float | None) -> str:
    """Green at 1 ms or less, through yellow (~45 ms), to red at 2 s or more, on a log scale."""
    if p99_ms is None:
        return "#eceff3"
    t = min(1.0, max(0.0, math.log10(max(p99_ms, 1.0)) / math.log10(2000.0)))
    if t < 0.5:
        r, g, b = int(76 + (253 - 76) * 2 * t), int(175 + (216 - 175) * 2 * t), int(80 - 27 * 2 * t)
    else:
        r, g, b = int(253 - (253 - 198) * (2 * t - 1)), int(216 - (216 - 40) * (2 * t - 1)), int(53 - 13 * (2 * t - 1))
    return f"#{r:02x}{g:02x}{b:02x}"


def heat_map(status: ClusterStatus, slow: set[str] = frozenset()) -> str:
    """Inline SVG: one row per DataNode, one cell per minute; gray = no reads that minute."""
    cell_w, cell_h, left, top = 14, 16, 90, 18
    minutes = len(status.datanodes[0].p99_by_minute) if status.datanodes else 0
    width, height = left + minutes * cell_w + 10, top + len(status.datanodes) * cell_h + 34
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" id="heatmap" width="{width}" height="{height}" '
             f'role="img" aria-label="read p99 per DataNode per minute">']
    for col in range(0, minutes, 10):
        stamp = time.strftime("%H:%M", time.gmtime((status.first_minute + col) * 60))
        parts.append(f'<text x="{left + col * cell_w}" y="12">{stamp}</text>')
    for row, d in enumerate(status.datanodes):
        y = top + row * cell_h
        is_slow = d.id in slow
        mark = '<tspan class="slow-mark">▲ </tspan>' if is_slow else ""
        parts.append(f'<g class="heat-row{" slow" if is_slow else ""}" data-datanode="{h(d.id)}">'
                     f'<text x="{left - 6}" y="{y + 12}" text-anchor="end">{mark}{h(d.id)}</text>')
        for col, value in enumerate(d.p99_by_minute):
            stamp = time.strftime("%H:%M", time.gmtime((status.first_minute + col) * 60))
            label = f"{d.id} {stamp} UTC: " + (f"p99 {ms(value)}" if value is not None else "no reads")
            data = f' data-p99-ms="{value:.1f}"' if value is not None else ""
            parts.append(f'<rect x="{left + col * cell_w}" y="{y}" width="{cell_w - 1}" height="{cell_h - 1}" '
                         f'fill="{color(value)}"{data}><title>{h(label)}</title></rect>')
        parts.append("</g>")
    y = top + len(status.datanodes) * cell_h + 8
    for i, (value, text) in enumerate([(1, "≤1 ms"), (10, "10 ms"), (100, "100 ms"), (1000, "1 s"), (2000, "≥2 s"),
                                       (None, "no reads")]):
        x = left + i * 70
        parts.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{color(value)}"/>'
                     f'<text x="{x + 16}" y="{y + 10}">{text}</text>')
    parts.append("</svg>")
    return "".join(parts)


# ---------------------------------------------------------------------- files and DataNodes


def breadcrumbs(path: str) -> str:
    parts = [p for p in path.split("/") if p]
    links = [file_link("/" + "/".join(parts[: i + 1]), name) for i, name in enumerate(parts)]
    return file_link("/", "/") + " " + " / ".join(links)


def mtime(ms_: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms_ / 1000)) if ms_ else "–"


def listing(data: Listing) -> str:
    rows = []
    for e in data.entries:
        name = e.path.rsplit("/", 1)[-1] + ("/" if e.is_dir else "")
        rows.append(f'<tr class="entry" data-path="{h(e.path)}"><td>{"dir" if e.is_dir else "file"}</td>'
                    f'<td>{file_link(e.path, name)}</td><td class="n">{"" if e.is_dir else h(size(e.length))}</td>'
                    f'<td>{h(e.policy)}</td><td>{h(mtime(e.mtime_ms))}</td>'
                    f'<td class="mono">{h(mode_string(e.is_dir, e.mode))}</td><td>{h(e.owner)}:{h(e.group)}</td></tr>')
    more = ""
    if data.more and data.entries:
        after = data.entries[-1].path.rsplit("/", 1)[-1]
        more = f'<p><a href="/files{h(url(data.path))}?after={h(url(after, safe=""))}">next page</a></p>'
    table = ('<table id="listing"><tr><th>type</th><th>name</th><th>length</th><th>policy</th><th>modified (UTC)</th>'
             '<th>mode</th><th>owner</th>'
             f'</tr>{"".join(rows)}</table>' if rows else '<p class="muted">empty directory</p>')
    return page(data.path, f"<h1>{breadcrumbs(data.path)}</h1>{table}{more}")


def file_page(data: FilePage) -> str:
    info, states = data.info, data.states
    e = info.entry
    policy = parse_policy(e.policy)
    # A replicated file's groups are blocks and its units replicas (ec/layout.py's glossary).
    group_word, unit_word = ("block", "replica") if policy.replicated else ("block group", "unit")
    meta = "".join([card("length", h(f"{size(e.length)} ({e.length} bytes)")), card("policy", h(e.policy)),
                    card("block size", h(size(e.block_size))), card(f"{group_word}s", h(len(info.groups))),
                    card("disk per byte", h(f"{policy.overhead:.2f}")), card("modified (UTC)", h(mtime(e.mtime_ms))),
                    card("owner", h(f"{e.owner}:{e.group} {mode_string(False, e.mode)}"))])
    sections = []
    for g in info.groups:
        rows = []
        code = parse_policy(g.policy) if g.policy else policy   # an EC file's open tail: replicas
        for u in g.units:
            state = states.get(u.datanode_id, "unknown")
            role = ("replica" if code.replicated else "data" if u.index < code.k else
                    "local parity" if u.index < code.k + code.local_groups else
                    "global parity" if code.local_groups else "parity")
            rows.append(f'<tr class="unit" data-index="{u.index}" data-datanode="{h(u.datanode_id)}">'
                        f'<td class="n">{u.index}</td><td>{role}</td>'
                        f'<td>{datanode_link(u.datanode_id)}</td><td>{h(u.address)}</td>'
                        f'<td><span class="state state-{h(state)}">{h(state)}</span></td></tr>')
        zeros = len(zero_units(code, g.length))   # a small file's: never stored
        sections.append(f'<h2>{group_word.capitalize()} {g.id} <span class="muted">({h(size(g.length))}, '
                        + (f'open tail, {h(g.policy)}: ' if g.policy else '')
                        + f'{len(g.units)} of {code.units - zeros} {"replica" if g.policy else unit_word}s'
                        + (f'; {zeros} hold only zeros, not stored' if zeros else '') + ')</span></h2>'
                        f'<table class="units" data-group="{g.id}">'
                        f'<tr><th>{unit_word}</th><th>role</th><th>DataNode</th><th>address</th><th>state</th></tr>'
                        f'{"".join(rows)}</table>')
    if not info.groups:
        sections.append(f'<p class="muted">no {group_word}s (an empty file)</p>')
    return page(e.path, f'<h1>{breadcrumbs(e.path)}</h1><div class="cards">{meta}</div>{"".join(sections)}')


def datanode_page(data: UnitsPage) -> str:
    d = data.datanode
    rows = "".join(f'<tr class="unit" data-group="{g}" data-index="{i}"><td class="n">{g}</td><td class="n">{i}</td>'
                   f'<td>{file_link(path)}</td></tr>' for g, i, path in data.units)
    more = f'<p class="muted">first {len(data.units)} units shown</p>' if data.more else ""
    units = (f'<table id="units"><tr><th>block group</th><th>unit</th><th>file</th></tr>{rows}</table>{more}'
             if rows else '<p class="muted">no units</p>')
    return page(d.id, f"<h1>DataNode {h(d.id)}</h1>{datanode_table([d])}<h2>Units</h2>{units}")
