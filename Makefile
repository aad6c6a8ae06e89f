# Every target builds its own virtualenv from pyproject.toml; only python3.11 and make are needed.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: fuse etcd iptables demo test test-fast proto bench bench-replication bench-mount browser-test compose-test clean

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev,bench]'
	@$(MAKE) --no-print-directory fuse
	@$(MAKE) --no-print-directory etcd
	@$(MAKE) --no-print-directory iptables
	@touch $@

# `hedgefs mount` needs libfuse3 and pyfuse3: Debian's fuse3, libfuse3-dev and pkg-config (and rsync,
# which the mount tests use) when root and missing, then the `mount` extra. Never fatal: without
# them `hedgefs mount` says what is missing and its tests skip.
FUSE_DEBS := fuse3 libfuse3-dev pkg-config rsync
fuse:
	@{ command -v fusermount3 >/dev/null && pkg-config --exists fuse3 2>/dev/null && command -v rsync >/dev/null; } || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(FUSE_DEBS) >/dev/null; }; } || \
	  echo "note: cannot install $(FUSE_DEBS) (not root?): hedgefs mount and its tests are skipped" >&2
	@pkg-config --exists fuse3 2>/dev/null && { $(PY) -m pip install --quiet -e '.[mount]' || \
	  echo "note: pyfuse3 did not build: hedgefs mount and its tests are skipped" >&2; } || true

# The HA tests (`--meta etcd://...`) start their own 3-member etcd clusters: Debian's etcd-server and
# etcd-client when root and missing. The package's init script may start a system etcd on 2379: it
# is stopped and disabled (nothing here uses it; tests never assume 2379 is free). Never fatal:
# without etcd the HA tests skip, saying so.
ETCD_DEBS := etcd-server etcd-client
etcd:
	@{ command -v etcd >/dev/null && command -v etcdctl >/dev/null; } || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(ETCD_DEBS) >/dev/null; } && \
	    { { command -v systemctl >/dev/null && systemctl disable --now etcd >/dev/null 2>&1; } ; \
	      { [ -x /etc/init.d/etcd ] && /etc/init.d/etcd stop >/dev/null 2>&1; } ; \
	      { command -v update-rc.d >/dev/null && update-rc.d etcd disable >/dev/null 2>&1; } ; true; }; } || \
	  echo "note: cannot install $(ETCD_DEBS) (not root?): the HA tests (metadata on etcd) are skipped" >&2

# The etcd partition test (tests/integration/test_ha_partition.py) cuts one NameNode off from etcd with
# iptables on loopback: Debian's iptables when root and missing. Never fatal: without it (or
# without root) that test skips, saying so.
iptables:
	@command -v iptables >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	    { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q iptables >/dev/null; }; } || \
	  echo "note: cannot install iptables (not root?): the etcd partition test is skipped" >&2

demo: $(STAMP)
	$(VENV)/bin/hedgefs demo

# Three workers on two cores, a test module on one of them (its shared clusters stay with it): a
# test mostly waits on real processes and their timers (the whole run used 0.9 of 2 cores with two
# workers), so a third module at once fills the wait: 942 -> 778 s of wall, the same CPU
# (bench/results/2026-12-07-make-test-time.md; PYTEST_ARGS="-n 2" for the old way). The longest modules go first
# (tests/module_times.py; --no-loadscope-reorder keeps that order instead of xdist's "most tests
# first"), so no long module starts last. The 25 slowest steps close every log: where time went.
test: $(STAMP)
	$(PY) -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder --durations=25 $(PYTEST_ARGS)

# The tiers without processes (tests/unit: pure and in-process; tests/sim: virtual clocks, scripted
# peers): the check to run after every edit, in well under a minute. tests/integration starts real
# processes, tests/chaos runs seeded chaos, tests/replay replays recorded DataNode service times
# through the reader on a virtual clock (~30 s); `make test` runs all five.
test-fast: $(STAMP)
	$(PY) -m pytest -q -n 2 tests/unit tests/sim

# The status page in headless Chromium: Playwright into the venv, Debian's chromium if missing
# (as root; Playwright's own browser download is never used). Screenshots go to build/screenshots/.
browser-test: $(STAMP)
	$(PY) -m pip install --quiet -e '.[browser]'
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -q && apt-get install -y -q chromium; } || \
	  { echo "browser-test: no chromium, and cannot install it (run as root, or: apt-get install chromium)" >&2; exit 1; }
	HEDGEFS_SCREENSHOTS=build/screenshots $(PY) -m pytest -q -rs tests/integration/test_browser.py

# docker-compose.yml on a real Docker engine: default, secure, and the `ha` profile plain and with
# deploy/compose-ha-tls.yml (skips, saying why, where none answers). Not part of `make test`.
compose-test: $(STAMP)
	$(PY) -m pytest -q -rs -s tests/compose_engine.py

proto: $(STAMP)
	$(PY) -m hedgefs.proto.generate

bench: $(STAMP)
	$(PY) -m hedgefs.bench.scenarios

# EC (RS-6-3-1024k) vs replication (REPLICATE-3) under the same faults, on one cluster (~15 min).
bench-replication: $(STAMP)
	$(PY) -m hedgefs.bench.replication

# `hedgefs mount` beside a GlusterFS disperse 6+3 FUSE mount and the CLI (~7 min). GlusterFS is
# Debian's glusterfs-server, installed as root if missing; without it the GlusterFS rows say why not.
bench-mount: $(STAMP)
	@command -v glusterd >/dev/null || \
	  { [ "$$(id -u)" = 0 ] && apt-get update -q >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q glusterfs-server >/dev/null; } || \
	  echo "note: cannot install glusterfs-server (not root?): the GlusterFS rows are skipped" >&2
	$(PY) -m hedgefs bench mount

clean:
	rm -rf $(VENV) .pytest_cache
