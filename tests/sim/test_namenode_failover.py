"""A multi-NameNode call's tries on a virtual clock (client/namenodes.py), against scripted
NameNode stubs: the deadline decides whether a try starts; a try started has a call's timeout,
the last one too (review-final N1: it was cut to what was left of the deadline, ~50 ms)."""

import types

import grpc
import pytest

from hedgefs.client import namenodes
from hedgefs.client.config import FailoverConfig
from hedgefs.client.errors import Unavailable
from hedgefs.client.namenodes import NAMENODE_TIMEOUT_S, NameNodes

from nn_support import FakeClock

DOWN, STARTING = "127.0.0.1:1", "127.0.0.1:2"


class Refused(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode):
        self._code = code

    def code(self) -> grpc.StatusCode:
        return self._code

    def trailing_metadata(self):
        return ()


class Call:
    def trailing_metadata(self):
        return ()


class ScriptedStub:
    """A NameNode that refuses every try at once (DOWN), or one that is down until ``up_at`` and
    then takes ``answer_s`` to answer (STARTING: busy after its start); a try whose timeout is
    shorter ends DEADLINE_EXCEEDED when it runs out. Each try is recorded: (start, address, timeout)."""

    def __init__(self, address, clock, tries, up_at, answer_s):
        self.address, self.clock, self.tries, self.up_at, self.answer_s = address, clock, tries, up_at, answer_s

    def __getattr__(self, method):
        return types.SimpleNamespace(with_call=self._with_call)

    def _with_call(self, request, timeout, metadata=None):
        self.tries.append((self.clock(), self.address, timeout))
        if self.address == DOWN or self.clock() < self.up_at:
            raise Refused(grpc.StatusCode.UNAVAILABLE)
        if timeout < self.answer_s:
            self.clock.advance(timeout)
            raise Refused(grpc.StatusCode.DEADLINE_EXCEEDED)
        self.clock.advance(self.answer_s)
        return "the answer", Call()


def scripted(monkeypatch, up_after_s: float, answer_s: float, deadline_s: float = 15.0):
    clock = FakeClock()
    monkeypatch.setattr(namenodes, "time", types.SimpleNamespace(monotonic=clock, sleep=clock.advance))
    nodes = NameNodes((DOWN, STARTING), config=FailoverConfig(deadline_s=deadline_s))
    tries: list = []
    up_at = clock() + up_after_s
    monkeypatch.setattr(nodes, "_blocking_stub", lambda address: ScriptedStub(address, clock, tries, up_at, answer_s))
    monkeypatch.setattr(nodes, "_refusal", lambda address, err: None)
    return clock, nodes, tries


def test_the_last_try_of_a_failover_has_a_calls_timeout_and_is_answered(monkeypatch):
    """The NameNode comes up just before the 15 s deadline and takes 3 s to answer: the try at the
    deadline waits for it (was: 50 ms, then "cannot reach the NameNode at any of ...")."""
    clock, nodes, tries = scripted(monkeypatch, up_after_s=14.99, answer_s=3.0)
    start = clock()
    assert nodes.call("GetFileInfo", None) == "the answer"
    last_start, address, timeout = tries[-1]
    assert address == STARTING and timeout == NAMENODE_TIMEOUT_S
    assert last_start - start >= 14.99
    assert all(t == NAMENODE_TIMEOUT_S for _, _, t in tries)
    assert clock() - start <= 15.0 + NAMENODE_TIMEOUT_S   # the deadline plus one try


def test_no_try_starts_after_the_deadline(monkeypatch):
    """A NameNode that never comes up: tries (with pauses: no busy loop) until the deadline, then
    the one-line error; the call ends by the deadline plus one try."""
    clock, nodes, tries = scripted(monkeypatch, up_after_s=1e9, answer_s=0.0, deadline_s=4.0)
    start = clock()
    with pytest.raises(Unavailable, match="cannot reach the NameNode at any of 127.0.0.1:1, 127.0.0.1:2"):
        nodes.call("GetFileInfo", None)
    assert all(t - start <= 4.0 for t, _, _ in tries)
    assert tries[-1][0] - start == pytest.approx(4.0)   # one last try at the deadline
    assert 4 < len(tries) < 20


def test_a_slow_namenode_past_its_try_timeout_fails_over_at_the_deadline(monkeypatch):
    """A NameNode up but slower than any try's timeout: each try ends DEADLINE_EXCEEDED after a
    call's timeout; no try starts after the deadline, so the call ends within it plus one try."""
    clock, nodes, tries = scripted(monkeypatch, up_after_s=0.0, answer_s=NAMENODE_TIMEOUT_S + 1, deadline_s=15.0)
    start = clock()
    with pytest.raises(Unavailable, match="deadline_exceeded"):
        nodes.call("GetFileInfo", None)
    assert all(t - start <= 15.0 for t, _, _ in tries)
    assert clock() - start <= 15.0 + NAMENODE_TIMEOUT_S
