"""When a read finds too few units, it locates the file again only if a unit actually moved."""

import dataclasses

from hedgefs.client.file_reader import _new_locations
from hedgefs.client.locations import FileStatus
from hedgefs.client.locations import GroupLocation, UnitLocation


def status(units: dict[int, str], group_id: int = 7) -> FileStatus:
    locations = {i: UnitLocation(i, dn, f"127.0.0.1:{9000 + int(dn[2:])}") for i, dn in units.items()}
    return FileStatus("/f", False, 100, "RS-6-3-64k", 262144, 0, (GroupLocation(group_id, 100, locations, 1),))


CACHED = status({i: f"dn{i + 1}" for i in range(9)})


def test_a_unit_repaired_elsewhere_is_new():
    assert _new_locations(CACHED, status({**{i: f"dn{i + 1}" for i in range(9)}, 0: "dn10"}))


def test_units_only_gone_are_not_new():
    fewer = status({i: f"dn{i + 1}" for i in range(9) if i not in (1, 2)})
    assert not _new_locations(CACHED, fewer)
    assert not _new_locations(CACHED, CACHED)


def test_a_datanode_on_a_new_port_is_new():
    group = CACHED.groups[0]
    moved = dict(group.units)
    moved[3] = UnitLocation(3, "dn4", "127.0.0.1:1")
    assert _new_locations(CACHED, dataclasses.replace(CACHED, groups=(GroupLocation(group.id, group.length, moved, group.generation),)))


def test_another_file_at_the_path_is_never_mixed_in():
    assert not _new_locations(CACHED, status({i: f"dn{i + 2}" for i in range(9)}, group_id=8))
