"""The DataNode's fault knobs as a plain object: parsing, stall/delay waits, counters, pacing."""

import random
import threading
import time

import pytest

from conftest import wait_until
from hedgefs.datanode.faults import FaultConfig, Faults, parse_fault_specs


def test_specs_parse_to_field_names():
    got = parse_fault_specs(["read-delay-ms=2000", "probability=0.01", "jitter-ms=50",
                             "stall=false", "error-probability=0.5", "corrupt-probability=1",
                             "bandwidth=10M"], environ={})
    assert got == {"read_delay_ms": 2000, "probability": 0.01, "jitter_ms": 50, "stall": False,
                   "error_probability": 0.5, "corrupt_probability": 1.0,
                   "bandwidth_bps": 10 * 1024 * 1024}
    assert parse_fault_specs(["stall"], environ={}) == {"stall": True}
    assert parse_fault_specs([], environ={}) == {}


@pytest.mark.parametrize("text,bps", [("1048576", 1048576), ("512k", 512 * 1024),
                                      ("1GiB", 1024**3), ("10MB/s", 10 * 1024**2), ("0", 0)])
def test_bandwidth_units(text, bps):
    assert parse_fault_specs([f"bandwidth={text}"], environ={}) == {"bandwidth_bps": bps}


def test_environment_then_specs_win():
    env = {"HEDGEFS_FAULT_READ_DELAY_MS": "100", "HEDGEFS_FAULT_STALL": "true",
           "HEDGEFS_FAULT_PROBABILITY": "0.5", "HEDGEFS_FAULT_BANDWIDTH": "",
           "HEDGEFS_FAULT_ERROR_PROBABILITY": "0.25", "HEDGEFS_FAULT_JITTER_MS": "3",
           "HEDGEFS_FAULT_CORRUPT_PROBABILITY": "0.125"}
    got = parse_fault_specs(["read-delay-ms=7"], environ=env)
    assert got == {"read_delay_ms": 7, "stall": True, "probability": 0.5, "jitter_ms": 3,
                   "error_probability": 0.25, "corrupt_probability": 0.125}


@pytest.mark.parametrize("spec", ["read-delay-ms=-1", "probability=1.5", "probability=x",
                                  "stall=maybe", "bogus=1", "read-delay-ms", "bandwidth=fast",
                                  "jitter-ms=99999999999"])
def test_bad_specs_raise_one_line(spec):
    with pytest.raises(ValueError) as e:
        parse_fault_specs([spec], environ={})
    assert "\n" not in str(e.value) and spec in str(e.value)


def test_bad_environment_is_named():
    with pytest.raises(ValueError, match="HEDGEFS_FAULT_PROBABILITY"):
        parse_fault_specs([], environ={"HEDGEFS_FAULT_PROBABILITY": "2"})


def test_set_changes_only_given_fields_and_clear_resets():
    f = Faults("dn3", True, {"read_delay_ms": 5, "jitter_ms": 2})
    f.set(probability=0.5)
    assert f.config() == FaultConfig(read_delay_ms=5, jitter_ms=2, probability=0.5)
    f.clear()
    assert f.config() == FaultConfig()
    with pytest.raises(ValueError):
        f.set(nonsense=1)


def test_stall_holds_until_cleared():
    f = Faults("dn3", True, {"stall": True})
    g = f.guard()
    result = []
    t = threading.Thread(target=lambda: result.append(f.hold_if_stalled(g)))
    t.start()
    wait_until(lambda: f.state()["stalled_reads"] == 1, 5, "the read to stall", interval=0.005)
    f.set(read_delay_ms=1)           # other knobs do not release a stall
    t.join(0.05)
    assert t.is_alive()
    f.set(stall=False)
    t.join(2)
    assert result == [False] and f.state()["stalled_reads"] == 0
    assert f.state()["cancelled_reads"] == 0


def test_stalled_read_cancelled_counts_once():
    f = Faults("dn3", True, {"stall": True})
    g = f.guard()
    result = []
    t = threading.Thread(target=lambda: result.append(f.hold_if_stalled(g)))
    t.start()
    wait_until(lambda: f.state()["stalled_reads"] == 1, 5, "the read to stall", interval=0.005)
    g.cancel()
    g.cancel()
    t.join(2)
    g.finish()
    assert result == [True]
    assert f.state()["cancelled_reads"] == 1 and f.state()["stalled_reads"] == 0


def test_finished_read_is_not_a_cancellation():
    f = Faults("dn3", True)
    g = f.guard()
    g.finish()
    g.cancel()        # gRPC calls the termination callback on normal completion too
    assert f.state()["cancelled_reads"] == 0


def test_delay_wakes_at_once_on_cancel():
    f = Faults("dn3", True, {"read_delay_ms": 60_000})
    g = f.guard()
    delay = f.read_delay_s()
    assert delay == 60.0
    threading.Timer(0.05, g.cancel).start()
    t0 = time.monotonic()
    assert g.wait(delay) is True
    assert time.monotonic() - t0 < 5


def test_delay_probability_and_jitter():
    f = Faults("dn3", True, {"read_delay_ms": 100, "jitter_ms": 20, "probability": 0.5},
               rng=random.Random(1))
    delays = [f.read_delay_s() for _ in range(400)]
    hit = [d for d in delays if d]
    assert 120 < len(hit) < 280
    assert all(0.08 <= d <= 0.12 for d in hit)
    assert f.state()["calls"]["fault:delay"] == len(hit)


def test_error_and_corrupt_draws():
    f = Faults("dn3", True, {"error_probability": 1.0})
    assert f.draw_error() and not f.draw_corrupt()
    f.set(error_probability=0.0, corrupt_probability=1.0)
    assert not f.draw_error() and f.draw_corrupt()
    assert f.state()["calls"] == {"fault:error": 1, "fault:corrupt": 1}


def test_corrupter_flips_one_byte_of_the_first_buffer_only():
    f = Faults("dn3", True)
    tamper = f.corrupter()
    a, b = bytearray(1000), bytearray(1000)
    tamper(memoryview(a), 0)
    tamper(memoryview(b), 1000)
    assert sum(1 for x in a if x) == 1 and not any(b)


def test_bandwidth_paces_and_cancel_stops_pacing():
    f = Faults("dn3", True, {"bandwidth_bps": 1_000_000})
    g = f.guard()
    t0 = time.monotonic()
    for _ in range(5):
        assert f.pace(g, 50_000) is False
    elapsed = time.monotonic() - t0
    assert 0.15 < elapsed < 2.0
    threading.Timer(0.05, g.cancel).start()
    t0 = time.monotonic()
    assert f.pace(g, 100_000_000) is True     # 100 s worth, cancelled after 50 ms
    assert time.monotonic() - t0 < 5


def test_a_cancelled_read_gives_its_paced_bytes_back():
    # Chaos 4242041 step 207: hedging clients cancel most of their reads of a 512 KiB/s DataNode,
    # and each cancelled read's bytes stayed reserved: its reads waited 30 s and more.
    f = Faults("dn5", True, {"bandwidth_bps": 1_000_000})
    hedged = f.guard()
    threading.Timer(0.05, hedged.cancel).start()
    assert f.pace(hedged, 5_000_000) is True        # 5 s reserved, cancelled after 50 ms
    t0 = time.monotonic()
    assert f.pace(f.guard(), 50_000) is False       # the next read: 50 ms, not 5 s
    assert time.monotonic() - t0 < 2.0


def test_counters():
    f = Faults("dn3", False)
    f.count("ReadUnit")
    f.count("ReadUnit")
    f.count("WriteUnit")
    s = f.state()
    assert s["calls"] == {"ReadUnit": 2, "WriteUnit": 1} and s["enabled"] is False
