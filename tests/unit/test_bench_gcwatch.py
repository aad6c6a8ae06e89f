"""bench/gcwatch.py: a bench run freezes the heap it starts with and lists its own collections."""

import gc

from hedgefs.bench import gcwatch


def test_a_run_freezes_what_was_alive_and_unfreezes_after():
    kept = [[i] for i in range(1000)]   # alive before the run: frozen during it
    watch = gcwatch.GcWatch().start()
    assert gc.get_freeze_count() >= len(kept)
    watch.stop()
    assert gc.get_freeze_count() == 0


def test_a_collection_during_the_run_is_counted_and_a_long_one_listed_with_its_generation():
    watch = gcwatch.GcWatch().start()
    garbage = []
    for _ in range(400_000):   # young cyclic garbage, walked by the run's own collection
        a = []
        a.append(a)
        garbage.append(a)
    del garbage, a
    gc.collect(2)
    watch.stop()
    summary = watch.summary()
    assert summary["collections"] >= 1
    assert any(generation == 2 for _, _, generation in watch.pauses), watch.pauses
    assert summary["max_ms"] >= gcwatch.RECORD_MS
