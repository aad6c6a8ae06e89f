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


# ---------------------------------------------------------------- an interrupt at a chosen point
# Python raises a pending KeyboardInterrupt only between bytecodes: at a function's entry, a loop's
# backward jump, after a call. A trace function raising it at a chosen line (or a function's entry)
# in one caller's thread forces the timing the review reproduced, with no sleep.

def _line_of(function, text: str, nth: int = 1) -> int:
    import inspect

    lines, first = inspect.getsourcelines(function)
    hits = [first + i for i, line in enumerate(lines) if line.strip().startswith(text)]
    assert len(hits) >= nth, f"{text!r} not in {function.__qualname__}"
    return hits[nth - 1]


def _interrupting(code, line: int | None = None, hits: int = 1):
    """A trace function raising KeyboardInterrupt in the thread it is set in: at the entry of a
    frame running ``code`` (line None), or at the ``hits``-th time ``line`` of it starts."""
    import sys

    seen = [0]

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == line:
            seen[0] += 1
            if seen[0] == hits:
                sys.settrace(None)
                frame.f_trace = None
                raise KeyboardInterrupt
        return local

    def tracer(frame, event, arg):
        if event != "call" or frame.f_code is not code:
            return None
        if line is None:
            sys.settrace(None)
            raise KeyboardInterrupt
        return local

    return tracer


class Caller:
    """One call of ``batcher`` in a thread of its own (traced by ``trace`` if given): its answer,
    its error, or still waiting."""

    def __init__(self, batcher, item, trace=None):
        import sys

        self.value = self.error = None

        def run():
            if trace is not None:
                sys.settrace(trace)
            try:
                self.value = batcher.call(item)
            except BaseException as err:   # noqa: BLE001 - the test looks at which one
                self.error = err
            finally:
                sys.settrace(None)

        self.thread = threading.Thread(target=run, daemon=True)   # (one that hangs must not hang pytest)
        self.thread.start()

    def join(self) -> "Caller":
        self.thread.join(10)
        assert not self.thread.is_alive(), "a call never answered"
        return self


def _one_in_flight_then_queue(batcher, server, *items, trace=None):
    """A first call holds the only place (its send held by the server's gate); then ``items`` queue
    in that order, the first traced by ``trace``. Returns the first call and the queued ones."""
    server.gate.clear()
    first = Caller(batcher, "first")
    wait_until(lambda: server.running == 1, 10, "the first call sending")
    queued = []
    for i, item in enumerate(items):
        queued.append(Caller(batcher, item, trace if i == 0 else None))
        wait_until(lambda: len(batcher._queue) == i + 1, 10, f"{item} queued")
    return first, queued


def test_an_interrupt_as_a_caller_begins_to_lead_passes_its_place_on():
    # Handed the only place, the caller is interrupted on entering _lead (before any try of it):
    # the place goes to the next queued caller, not lost with every later call hanging.
    server = Server(hold=True)
    batcher = Batcher(server.send, max_in_flight=1)
    first, (interrupted, later) = _one_in_flight_then_queue(
        batcher, server, "interrupted", "later", trace=_interrupting(Batcher._lead.__code__))
    server.gate.set()
    assert first.join().value == "status of first"
    assert isinstance(interrupted.join().error, KeyboardInterrupt)
    assert later.join().value == "status of later"
    assert batcher.call("fresh") == "status of fresh"
    assert batcher._in_flight == 0 and not batcher._queue


def test_an_interrupt_after_the_leader_took_its_batch_answers_the_other_callers_cleanly():
    # The leader has popped its batch (its own call and another thread's) and is interrupted before
    # sending: the other caller gets a clean HedgefsError, not a wait without end.
    from hedgefs.client.errors import HedgefsError

    server = Server(hold=True)
    batcher = Batcher(server.send, max_in_flight=1)
    trace = _interrupting(Batcher._lead.__code__, _line_of(Batcher._lead, "if batch:"))
    first, (leader, other) = _one_in_flight_then_queue(batcher, server, "leader", "other", trace=trace)
    server.gate.set()
    assert first.join().value == "status of first"
    assert isinstance(leader.join().error, KeyboardInterrupt)
    other.join()
    assert type(other.error) is HedgefsError and "interrupted" in str(other.error), other.error
    assert ["leader", "other"] not in server.calls   # never sent
    assert batcher.call("fresh") == "status of fresh"
    assert batcher._in_flight == 0 and not batcher._queue


def test_an_interrupt_amid_the_pops_leaves_the_calls_not_taken_queued_for_the_next_leader():
    server = Server(hold=True)
    batcher = Batcher(server.send, max_in_flight=1)
    pop = _line_of(Batcher._lead, "self._queue.popleft()")
    first, (leader, other) = _one_in_flight_then_queue(batcher, server, "leader", "other",
                                                       trace=_interrupting(Batcher._lead.__code__, pop, hits=2))
    server.gate.set()
    assert first.join().value == "status of first"
    assert isinstance(leader.join().error, KeyboardInterrupt)
    assert other.join().value == "status of other"   # sent by the next leader: itself
    assert server.calls[-1] == ["other"]
    assert batcher._in_flight == 0 and not batcher._queue


def test_a_keyboard_interrupt_in_send_is_the_leaders_alone():
    # Ctrl-C lands in the leader's send: the leader's call raises it; the other callers of its batch
    # get a clean HedgefsError (not KeyboardInterrupt, which would stop their threads' programs).
    from hedgefs.client.errors import HedgefsError

    server = Server(hold=True)
    sent = threading.Event()

    def send(items):
        if "leader" in items:
            sent.set()
            raise KeyboardInterrupt
        return server.send(items)

    batcher = Batcher(send, max_in_flight=1)
    first, (leader, other) = _one_in_flight_then_queue(batcher, server, "leader", "other")
    server.gate.set()
    assert first.join().value == "status of first"
    assert isinstance(leader.join().error, KeyboardInterrupt)
    other.join()
    assert sent.is_set() and type(other.error) is HedgefsError and "interrupted" in str(other.error), other.error
    assert batcher.call("fresh") == "status of fresh"
    assert batcher._in_flight == 0 and not batcher._queue
