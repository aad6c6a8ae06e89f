"""Policy names: parsing, canonical names, and one-line errors for bad names."""

import pytest

from hedgefs.ec.policy import BUILTIN_POLICIES, DEFAULT_POLICY, Policy, parse_policy


@pytest.mark.parametrize(
    "name, k, m, cell_size",
    [
        ("RS-6-3-1024k", 6, 3, 1 << 20),
        ("RS-3-2-64k", 3, 2, 64 << 10),
        ("RS-10-4-1024k", 10, 4, 1 << 20),
        ("RS-1-1-1k", 1, 1, 1024),
        ("RS-16-16-4k", 16, 16, 4096),
        ("RS-6-3-65536k", 6, 3, 64 << 20),
    ],
)
def test_good_names_parse(name, k, m, cell_size):
    policy = parse_policy(name)
    assert (policy.k, policy.m, policy.cell_size) == (k, m, cell_size)
    assert policy.name == name
    assert policy.units == k + m
    assert policy.stripe_data_size == k * cell_size


@pytest.mark.parametrize(
    "name, canonical",
    [
        ("RS-6-3-1m", "RS-6-3-1024k"),
        ("RS-6-3-1M", "RS-6-3-1024k"),
        ("rs-3-2-64K", "RS-3-2-64k"),
        ("  RS-6-3-1024k\n", "RS-6-3-1024k"),
        ("RS-06-03-0064k", "RS-6-3-64k"),
    ],
)
def test_other_spellings_give_the_canonical_name(name, canonical):
    assert parse_policy(name).name == canonical


def test_builtin_policies_round_trip_and_include_the_default():
    assert DEFAULT_POLICY in BUILTIN_POLICIES
    assert parse_policy(DEFAULT_POLICY) == Policy(6, 3, 1 << 20)
    for name in BUILTIN_POLICIES:
        assert parse_policy(name).name == name
        assert parse_policy(parse_policy(name).name) == parse_policy(name)


def test_policy_is_frozen_and_hashable():
    policy = parse_policy("RS-6-3-64k")
    with pytest.raises(AttributeError):
        policy.k = 4
    assert {policy: 1}[Policy(6, 3, 65536)] == 1
    assert str(policy) == "RS-6-3-64k"


@pytest.mark.parametrize(
    "name",
    [
        "",
        "RS-6-3",
        "RS-6-3-1024",
        "RS-6-3-1024kb",
        "RS-6-3-1024b",
        "RS-6-3-1.5m",
        "XOR-2-1-64k",
        "REPLICATION-3",
        "RS-6--3-64k",
        "RS--6-3-64k",
        "RS-0-3-1024k",
        "RS-6-0-1024k",
        "RS-30-3-1024k",
        "RS-6-3-0k",
        "RS-6-3-65537k",
        "RS-6-3-1024m",
        "RS 6 3 1024k",
        "RS-6-3-1024k-extra",
    ],
)
def test_bad_names_raise_a_one_line_value_error(name):
    with pytest.raises(ValueError) as info:
        parse_policy(name)
    message = str(info.value)
    assert "\n" not in message
    assert repr(name) in message
    assert "e.g. RS-6-3-1024k" in message or "REPLICATE-<n> keeps 1 to 5 replicas" in message


def test_unknown_policy_message_is_the_documented_one():
    with pytest.raises(ValueError, match=r"^unknown policy 'RS-6-3': expected RS-<k>-<m>-<cell>k "
                                         r"\(e\.g\. RS-6-3-1024k\), LRC-<k>-<l>-<g>-<cell>k \(e\.g\. LRC-6-2-2-64k\) "
                                         r"or REPLICATE-<n> \(n = 1\.\.5\)$"):
        parse_policy("RS-6-3")


@pytest.mark.parametrize("name, n", [("REPLICATE-1", 1), ("REPLICATE-3", 3), ("replicate-05", 5), (" REPLICATE-2\n", 2)])
def test_replication_is_one_data_unit_and_copies(name, n):
    policy = parse_policy(name)
    assert policy.name == f"REPLICATE-{n}" and policy.replicated
    assert (policy.k, policy.m, policy.units) == (1, n - 1, n)
    assert policy.overhead == n
    assert policy.min_stored(2) == min(n, 2)   # --min-replicas, at most n
    assert parse_policy(policy.name) == policy


def test_disk_bytes_per_file_byte():
    assert parse_policy("RS-6-3-1024k").overhead == 1.5
    assert parse_policy("REPLICATE-3").overhead == 3.0
    assert parse_policy("RS-6-3-1024k").min_stored(2) == 6   # EC: k, whatever --min-replicas says


@pytest.mark.parametrize("name, n", [("REPLICATE-0", 0), ("REPLICATE-9", 9), ("REPLICATE-6", 6)])
def test_replica_counts_out_of_range_say_so(name, n):
    with pytest.raises(ValueError, match=rf"^bad policy '{name}': REPLICATE-<n> keeps 1 to 5 replicas \(got {n}\)$"):
        parse_policy(name)


@pytest.mark.parametrize("name", ["REPLICATE", "REPLICATE-", "REPLICATE-3x", "REPLICATE-1-1", "REPLICATION-3", "REP-3"])
def test_bad_replication_names(name):
    with pytest.raises(ValueError, match="^unknown policy"):
        parse_policy(name)


def test_non_string_raises_value_error():
    with pytest.raises(ValueError):
        parse_policy(None)


@pytest.mark.parametrize("k, m, cell_size", [(0, 3, 1024), (6, 0, 1024), (20, 13, 1024), (6, 3, 0)])
def test_bad_policy_objects_raise(k, m, cell_size):
    with pytest.raises(ValueError):
        Policy(k, m, cell_size)


def test_tiny_test_policy_has_a_byte_name():
    assert Policy(3, 2, 16).name == "RS-3-2-16b"


@pytest.mark.parametrize("name, k, l, g, cell_size", [
    ("LRC-6-2-2-1024k", 6, 2, 2, 1 << 20),
    ("LRC-6-2-2-64k", 6, 2, 2, 64 << 10),
    ("lrc-12-2-2-1m", 12, 2, 2, 1 << 20),
    ("LRC-6-3-1-4k", 6, 3, 1, 4096),
])
def test_lrc_names_parse(name, k, l, g, cell_size):
    policy = parse_policy(name)
    assert (policy.kind, policy.k, policy.local_groups, policy.global_parities, policy.cell_size) == \
        ("LRC", k, l, g, cell_size)
    assert (policy.m, policy.units) == (l + g, k + l + g)
    assert parse_policy(policy.name) == policy
    assert policy.name == name.upper().replace("-1M", "-1024k").replace("K", "k")


def test_lrc_overhead_tolerance_and_repair_reads_against_rs():
    lrc, rs = parse_policy("LRC-6-2-2-64k"), parse_policy("RS-6-3-64k")
    assert (round(lrc.overhead, 3), lrc.tolerance) == (1.667, 3)
    assert (rs.overhead, rs.tolerance, rs.kind) == (1.5, 3, "RS")
    assert [lrc.repair_reads(i) for i in range(10)] == [3] * 8 + [6] * 2
    assert rs.repair_reads(0) == 6 and parse_policy("REPLICATE-3").repair_reads(0) == 1
    assert lrc.decodable([3, 4, 5, 6, 7, 8, 9])   # group 0's data from L0, G0, G1
    assert not lrc.decodable([3, 4, 5, 7, 8, 9])   # and L0 too: 2 equations for 3 unknowns
    assert lrc.decodable([0, 3, 4, 5, 6, 8, 9]) and rs.decodable(range(3, 9))


@pytest.mark.parametrize("name, why", [
    ("LRC-6-4-2-64k", "l dividing k"),
    ("LRC-6-0-2-64k", "l dividing k"),
    ("LRC-6-2-0-64k", "l dividing k"),
    ("LRC-16-4-4-64k", "must be <= 20"),
    ("LRC-6-2-2-0k", "cell size"),
])
def test_bad_lrc_names_say_why_in_one_line(name, why):
    with pytest.raises(ValueError) as info:
        parse_policy(name)
    assert why in str(info.value) and repr(name) in str(info.value) and "\n" not in str(info.value)


def test_bad_lrc_objects_raise():
    with pytest.raises(ValueError):
        Policy(6, 2, 1024, local_groups=2)   # g = 0
    with pytest.raises(ValueError):
        Policy(6, 4, 1024, local_groups=4)   # 4 does not divide 6
