"""Fixtures and helpers of the latency model's tests (test_latency_model.py, test_latency_view.py):
a hand-driven clock, and reads played one after another."""

import pytest

from hedgefs.client.latency import LatencyModel
from nn_support import FakeClock

CELL = 64 * 1024
PEERS = [f"dn{i}" for i in range(1, 11)]


@pytest.fixture
def clock():
    return FakeClock(start=1000.0)


@pytest.fixture
def changes():
    return []


@pytest.fixture
def model(clock, changes):
    return LatencyModel(clock, on_change=lambda dn, state: changes.append((dn, state)))


def read(model, clock, dn, ms, nbytes=CELL):
    token = model.started(dn)
    clock.advance(ms / 1000)
    return model.finished(token, nbytes)


def warm(model, clock, ms=2.0, rounds=20, nbytes=CELL, peers=PEERS):
    """Every DataNode reads ``rounds`` times at about ``ms`` (a little spread, as real reads)."""
    for r in range(rounds):
        for i, dn in enumerate(peers):
            read(model, clock, dn, ms * (0.8 + 0.04 * ((r * 7 + i * 3) % 11)), nbytes)
