"""The client's Batcher: concurrent operations coalesced into batched calls, answers fanned back."""

import threading

import pytest
from conftest import wait_until

from hedgefs.client.batching import Batcher
from hedgefs.client.errors import NotFound, Unavailable


class Server:
    """A batched call whose answers are computed from the items; ``gate`` holds every call until set."""

    def __init__(self, hold: bool = False):
        self.calls: list[list] = []
        self.gate = threading.Event()
        if not hold:
            self.gate.set()
        self.running = 0
        self.most_running = 0
        self._lock = threading.Lock()

    def send(self, items):
        with self._lock:
            self.calls.append(list(items))
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            self.gate.wait(30)
            return [NotFound(f"no such file: {i}") if str(i).startswith("bad") else f"status of {i}" for i in items]
        finally:
            with self._lock:
                self.running -= 1


def run_threads(batcher, items):
    results, errors = {}, {}

    def one(item):
        try:
            results[item] = batcher.call(item)
        except Exception as err:   # noqa: BLE001
            errors[item] = err

    threads = [threading.Thread(target=one, args=(i,)) for i in items]
    for t in threads:
        t.start()
    return threads, results, errors


def test_a_lone_call_goes_at_once_alone():
    server = Server()
    b = Batcher(server.send)
    assert b.call("/a") == "status of /a"
    assert server.calls == [["/a"]]


def test_calls_made_while_a_batch_is_in_flight_go_together_and_each_gets_its_own_answer():
    server = Server(hold=True)
    b = Batcher(server.send, max_in_flight=1)
    first, results, errors = run_threads(b, ["/first"])
    wait_until(lambda: server.running == 1, 10, "the first call to be in flight")
    threads, results2, errors2 = run_threads(b, [f"/f{i}" for i in range(40)])
    wait_until(lambda: len(b._queue) == 40, 10, "40 calls queued behind it")
    server.gate.set()
    for t in first + threads:
        t.join(30)
    assert server.calls[0] == ["/first"]
    assert sorted(server.calls[1]) == sorted(f"/f{i}" for i in range(40))   # one call for the 40
    assert len(server.calls) == 2 and b.largest == 40 and b.items == 41
    assert results2 == {f"/f{i}": f"status of /f{i}" for i in range(40)} and not errors2


def test_one_bad_item_fails_alone_and_a_failed_call_fails_every_item():
    server = Server(hold=True)
    b = Batcher(server.send, max_in_flight=1)
    head, _, _ = run_threads(b, ["/head"])
    wait_until(lambda: server.running == 1, 10, "the head call in flight")
    threads, results, errors = run_threads(b, ["/ok1", "bad/x", "/ok2"])
    wait_until(lambda: len(b._queue) == 3, 10, "three queued")
    server.gate.set()
    for t in head + threads:
        t.join(30)
    assert results == {"/ok1": "status of /ok1", "/ok2": "status of /ok2"}
    assert list(errors) == ["bad/x"] and isinstance(errors["bad/x"], NotFound) and "bad/x" in str(errors["bad/x"])

    def down(items):
        raise Unavailable("NameNode 127.0.0.1:1 unreachable")

    with pytest.raises(Unavailable):
        Batcher(down).call("/x")


def test_in_flight_and_batch_size_are_bounded():
    server = Server(hold=True)
    b = Batcher(server.send, max_batch=8, max_in_flight=2)
    threads, results, _ = run_threads(b, [f"/p{i}" for i in range(50)])
    wait_until(lambda: server.running == 2, 10, "two batches in flight")
    assert server.most_running == 2
    server.gate.set()
    for t in threads:
        t.join(30)
    assert server.most_running == 2
    assert len(results) == 50 and all(len(c) <= 8 for c in server.calls)
    assert sum(len(c) for c in server.calls) == 50


def test_a_wrong_number_of_answers_is_every_items_error():
    b = Batcher(lambda items: ["only one"])
    assert b.call("/a") == "only one"
    server = Server(hold=True)
    short = Batcher(lambda items: server.send(items)[:1], max_in_flight=1)
    head, _, _ = run_threads(short, ["/h"])
    wait_until(lambda: server.running == 1, 10, "the head call in flight")
    threads, results, errors = run_threads(short, ["/a", "/b"])
    wait_until(lambda: len(short._queue) == 2, 10, "two queued")
    server.gate.set()
    for t in head + threads:
        t.join(30)
    assert not results and set(errors) == {"/a", "/b"} and "2 got 1 answers" in str(errors["/a"])


def test_no_place_is_lost_when_a_queued_caller_is_handed_one_and_answered_by_another_leader():
    # A queued caller may be handed a place by one leader and answered by another before it looks:
    # it must use (or pass on) that place, or every later batch goes one at a time. A fast answer and
    # a short switch interval make the interleaving common (the review's reproduction leaked within
    # a second this way).
    import sys

    batcher = Batcher(lambda items: list(items), max_batch=256, max_in_flight=2)
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        def many(n):
            for i in range(2000):
                assert batcher.call((n, i)) == (n, i)

        threads = [threading.Thread(target=many, args=(n,)) for n in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        sys.setswitchinterval(before)
    assert not any(t.is_alive() for t in threads)
    assert batcher.items == 16 * 2000
    assert batcher._in_flight == 0 and not batcher._queue


def test_a_caller_interrupted_while_queued_leaves_no_place_behind():
    # Ctrl-C in a caller waiting for its turn: the place a leader hands it must not be lost; twice
    # (both places) and no later call would ever be answered.
    import signal

    server = Server(hold=True)
    batcher = Batcher(server.send, max_batch=256, max_in_flight=2)

    def interrupt(*_):
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        for _ in range(2):
            server.gate.clear()
            threads, results, errors = run_threads(batcher, [f"lead{_}a", f"lead{_}b"])
            wait_until(lambda: server.running == 2, 10, "two leaders sending")
            signal.setitimer(signal.ITIMER_REAL, 0.2)
            with pytest.raises(KeyboardInterrupt):
                batcher.call("main")   # queued behind the two leaders, interrupted while it waits
            server.gate.set()
            for t in threads:
                t.join(10)
            assert len(results) == 2 and not errors
            wait_until(lambda: batcher._in_flight == 0, 10, "every place given back")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert batcher.call("fresh") == "status of fresh"
    assert not batcher._queue
