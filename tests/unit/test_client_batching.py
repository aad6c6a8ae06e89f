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
