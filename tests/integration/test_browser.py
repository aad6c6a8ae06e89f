"""The status page in a real browser: headless Chromium (Debian's `chromium`) driven by Playwright
loads the page of a running local cluster with one DataNode slowed, and the test checks the DOM
and takes screenshots.

Skips, saying why, where Playwright or Chromium is missing: `make test` installs nothing
system-wide; `make browser-test` installs both and runs this. HEDGEFS_SCREENSHOTS=DIR keeps the
screenshots there (the ones in docs/ come from such a run); otherwise they go to a temp dir.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import urllib.request

import pytest

from conftest import pattern, start_cluster, wait_until

CHROMIUM = next((p for p in (os.environ.get("HEDGEFS_CHROMIUM"), shutil.which("chromium"),
                             shutil.which("chromium-browser"), shutil.which("google-chrome")) if p), None)


def browser_or_skip():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("no browser test: Playwright is not installed (make browser-test installs it)")
    if CHROMIUM is None:
        pytest.skip("no browser test: no chromium on PATH (make browser-test installs Debian's chromium)")
    return sync_playwright


def api(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def test_status_page_in_chromium(tmp_path):
    sync_playwright = browser_or_skip()
    shots = pathlib.Path(os.environ.get("HEDGEFS_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    c = start_cluster(tmp_path / "c", heartbeat_interval_s=0.2)
    try:
        from hedgefs.client.fs import FileSystem
        from hedgefs.proto import hedgefs_pb2 as pb

        data = pattern(3 * 1024 * 1024, seed=11)
        from hedgefs.client.config import HedgeConfig

        # Without hedging every read of the slowed DataNode waits out its whole delay (1 s): its
        # p99 is far above anything a busy machine gives the others.
        with FileSystem(c.namenode, hedge=HedgeConfig(enabled=False)) as fs:
            fs.mkdir("/web")
            fs.write_bytes("/web/data.bin", data)
            slow = fs.stat("/web/data.bin").groups[0].units[0].datanode_id
            c.datanode_rpc(slow, "SetFaults", pb.FaultConfig(read_delay_ms=1000))
            for _ in range(3):
                assert fs.read_bytes("/web/data.bin") == data
        # heartbeats carry the reads to the NameNode
        wait_until(lambda: slow in api(c.http_url + "api/")["slow_datanodes"], 30,
                   f"the NameNode to list {slow} as slow")
        rows = api(c.http_url + "api/")["datanodes"]
        assert max(rows, key=lambda d: d["read_p99_ms"])["id"] == slow   # the worst p99 is the slowed one

        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=["--no-sandbox", "--disable-gpu"])
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(c.http_url)
                assert page.title() == "overview · hedgefs"
                assert page.locator("#datanodes tr.dn").count() == 10
                assert page.locator('#datanodes tr.dn[data-state="live"]').count() == 10
                # (on a busy machine another DataNode may cross the line too; the slowed one must)
                marked = page.locator(f'#heatmap g.heat-row.slow[data-datanode="{slow}"]')
                assert marked.count() == 1
                assert "▲" in marked.locator("text").first.text_content()
                assert page.locator(f'#datanodes tr.dn.slow[data-datanode="{slow}"] .faults').inner_text() \
                    == "read_delay_ms=1000"
                assert page.locator("#groups-healthy").inner_text() == "2"   # 3 MiB = two 1.5 MiB groups
                page.screenshot(path=str(shots / "status-overview.png"), full_page=True)

                page.click('a[href="/files/"]')
                page.click('a[href="/files/web"]')
                page.click('a[href="/files/web/data.bin"]')
                assert page.locator("table.units").count() == 2
                units = page.locator("table.units").first.locator("tr.unit")
                assert units.count() == 9
                first = units.first
                assert first.get_attribute("data-index") == "0" and first.get_attribute("data-datanode") == slow
                assert first.locator("td").nth(1).inner_text() == "data"
                assert [units.nth(i).locator("td").nth(1).inner_text() for i in range(9)].count("parity") == 3
                page.screenshot(path=str(shots / "status-file.png"), full_page=True)

                first.locator("a").click()          # the unit's DataNode page
                assert page.locator("h1").inner_text() == f"DataNode {slow}"
                assert page.locator("#units tr.unit").count() >= 1
                page.goto(c.http_url + "no/such/page")
                assert page.locator("h1").inner_text() == "Not found"
            finally:
                browser.close()
        print(f"screenshots in {shots}")
    finally:
        c.down()
