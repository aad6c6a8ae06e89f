"""The stall arithmetic of `hedgefs bench failover --mode etcd-leader | cpu-hog` (bench/failover_faults.py):
pure functions of acknowledgement times, no cluster."""

from hedgefs.bench.failover_faults import gaps, longest_gap


def test_the_longest_gap_is_the_largest_distance_between_acks_in_the_window():
    assert longest_gap([0.0, 0.1, 0.2, 2.7, 2.8], 0.0, 3.0) == 2.5


def test_a_stall_that_outlasts_the_window_is_measured_whole():
    # acks stop at 1.0 and resume at 9.0, after the window's end: the stall is 8 s, not 5
    assert longest_gap([0.5, 1.0, 9.0, 9.1], 0.0, 6.0) == 8.0


def test_a_stall_begun_before_the_window_counts_from_the_last_ack_before_it():
    assert longest_gap([-3.0, 1.0, 1.1], 0.0, 2.0) == 4.0


def test_no_ack_at_all_is_a_stall_of_the_whole_window():
    assert longest_gap([], 0.0, 6.0) == 6.0


def test_gaps_are_between_consecutive_acks_inside_the_window_in_time_order():
    assert [round(g, 3) for g in gaps([0.3, 0.1, 0.6, 5.0], 0.0, 1.0)] == [0.2, 0.3]
