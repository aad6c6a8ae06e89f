"""A DataNode's host and rack (hedgefs/topology.py) and the flags that set them.

Racks are paths (/dc1/r2, HDFS's network location). The DataNode's refusal of a bad one (exit 2)
is in tests/integration/test_cli_errors.py.
"""

import pytest

from hedgefs.topology import DEFAULT_RACK, Location, host_of, parse_host_id, parse_rack


@pytest.mark.parametrize("text, rack", [("/r1", "/r1"), ("/dc1/r2", "/dc1/r2"), ("/dc1/r2/", "/dc1/r2"),
                                        ("/default-rack", DEFAULT_RACK), ("/a.b/c_d/E-9", "/a.b/c_d/E-9")])
def test_a_rack_is_a_path_of_names(text, rack):
    assert parse_rack(text) == rack


@pytest.mark.parametrize("text, why", [("r2", "starts with /"), ("", "starts with /"), ("/", "at least one level"),
                                       ("/dc1//r2", "is not a name"), ("/dc 1", "is not a name"),
                                       ("/-x", "is not a name"), ("/a/b/c/d/e", "at most 4 levels"),
                                       ("/" + "x" * 64, "at most 63")])
def test_a_bad_rack_says_why(text, why):
    with pytest.raises(ValueError, match=why):
        parse_rack(text)


def test_host_ids():
    assert parse_host_id("node-7.example.org") == "node-7.example.org"
    assert parse_host_id("fd00::7") == "fd00::7"
    for bad in ("", "a b", "-x", "x/y"):
        with pytest.raises(ValueError, match="bad host id"):
            parse_host_id(bad)


def test_a_location_defaults_to_the_address_host_and_the_default_rack():
    assert host_of("10.0.0.7:9866") == "10.0.0.7"
    assert host_of("[fd00::7]:9866") == "fd00::7"
    assert host_of("node7") == "node7"
    assert Location.of("", "", "10.0.0.7:9866") == Location("10.0.0.7", DEFAULT_RACK)
    assert Location.of("node7", "/dc1/r2", "10.0.0.7:9866").path == "/dc1/r2/node7"
