"""The files the gateway keeps open (their unit locations, asked for again per GET: the groups
of the range only): never a byte of another version, through S3 or outside it.

One cluster (RS-6-3-64k: stripe 384 KiB, groups of 1.5 MiB) and one `hedgefs s3` for the module.
"""

import io

import pytest
from botocore.exceptions import ClientError
from conftest import CELL, GROUP, STRIPE, pattern
from s3_support import boto3_client, stack_fixtures

from hedgefs.client.fs import FileSystem
from hedgefs.client.locations import FileStatus, GroupLocation
from hedgefs.s3.store import same_version

cluster, keys, gateway = stack_fixtures("s3-kept")


@pytest.fixture(scope="module")
def s3(gateway, keys):
    client = boto3_client(gateway.endpoint, *keys[1])
    client.create_bucket(Bucket="kept")
    return client


def code(err: pytest.ExceptionInfo) -> tuple[str, int]:
    return err.value.response["Error"]["Code"], err.value.response["ResponseMetadata"]["HTTPStatusCode"]


def test_a_ranged_answer_is_the_kept_version_only_if_its_groups_are_at_their_place():
    def status(groups, first=None, length=100, mtime=5, block_size=GROUP):
        located = tuple(GroupLocation(id=g, length=0, units={}, generation=1) for g in groups)
        return FileStatus("/b/k", False, length, "RS-6-3-64k", block_size, mtime, located,
                          ranged=first is not None, first_group=first or 0)

    kept = status([11, 12, 13])
    assert same_version(kept, status([11, 12, 13]))
    assert same_version(kept, status([12], first=1))
    assert same_version(kept, status([12, 13], first=1))
    assert not same_version(kept, status([12], first=0))                 # another group at that place
    assert not same_version(kept, status([13], first=3))                 # a group past the kept ones
    assert not same_version(kept, status([12], first=1, block_size=CELL))  # other groups: another layout
    assert not same_version(kept, status([12], first=1, mtime=6))
    assert not same_version(kept, status([12], first=1, length=99))
    assert not same_version(kept, status([21, 22, 23]))


# ---------------------------------------------------------------------------- open files kept

def test_ranged_gets_after_a_replace_serve_the_new_bytes(s3, cluster):
    """The gateway keeps the files it opened (their unit locations) and may start a small ranged
    GET with them before the NameNode answers: never with bytes of a version replaced meanwhile,
    through S3 or outside it, nor of a deleted one."""
    key, n = "kept/obj.bin", 4 * STRIPE
    versions = [pattern(n, seed=90 + v) for v in range(3)]

    def ranged(start, length):
        return s3.get_object(Bucket="kept", Key=key, Range=f"bytes={start}-{start + length - 1}")["Body"].read()

    s3.put_object(Bucket="kept", Key=key, Body=versions[0])
    for start in (0, CELL + 5, n - 100):
        assert ranged(start, 100) == versions[0][start:start + 100]
    s3.put_object(Bucket="kept", Key=key, Body=versions[1])
    assert ranged(CELL + 5, 100) == versions[1][CELL + 5:CELL + 105]
    with FileSystem(cluster.namenode, credentials=None) as fs:   # replaced outside S3 (insecure cluster)
        fs.write(f"/kept/{key}", io.BytesIO(versions[2][:n - 1]), overwrite=True)
    assert ranged(CELL + 5, 100) == versions[2][CELL + 5:CELL + 105]
    assert ranged(n - 100, 100) == versions[2][n - 100:n - 1]     # clamped to the new length
    s3.delete_object(Bucket="kept", Key=key)
    with pytest.raises(ClientError) as err:
        ranged(0, 100)
    assert code(err) == ("NoSuchKey", 404)


def test_a_kept_file_renamed_over_or_changed_outside_s3_is_never_served(s3, cluster):
    """The gateway keeps the readers of files it opened; a kept file deleted and another of the
    same length renamed into its place, rewritten at the same length, or chmod-ed outside S3:
    each GET right after returns the new bytes."""
    key, n = "kept/renamed.bin", 2 * STRIPE + 7
    old, new, again = pattern(n, seed=95), pattern(n, seed=96), pattern(n, seed=97)

    def ranged(start, length):
        return s3.get_object(Bucket="kept", Key=key, Range=f"bytes={start}-{start + length - 1}")["Body"].read()

    s3.put_object(Bucket="kept", Key=key, Body=old)
    for _ in range(3):   # opened, then kept
        assert ranged(CELL - 3, 64) == old[CELL - 3:CELL + 61]
    with FileSystem(cluster.namenode, credentials=None) as fs:
        fs.write("/kept/kept/other.bin", io.BytesIO(new))
        fs.delete(f"/kept/{key}")
        fs.rename("/kept/kept/other.bin", f"/kept/{key}")
        assert ranged(CELL - 3, 64) == new[CELL - 3:CELL + 61]
        assert ranged(n - 10, 10) == new[n - 10:]
        fs.write(f"/kept/{key}", io.BytesIO(again), overwrite=True)
        assert ranged(CELL - 3, 64) == again[CELL - 3:CELL + 61]
        fs.set_permission(f"/kept/{key}", 0o600)   # the same bytes, another mode: asked again, still served
        assert ranged(0, 64) == again[:64]


def test_ranged_gets_of_a_file_of_many_groups_after_a_replace(s3, cluster):
    """A kept file of several groups asked for by the groups of each range: a replacement of the
    same length, in any group and across a boundary, is seen at once."""
    key, n = "kept/groups.bin", 3 * GROUP - 11
    old, new = pattern(n, seed=80), pattern(n, seed=81)

    def ranged(start, length):
        return s3.get_object(Bucket="kept", Key=key, Range=f"bytes={start}-{start + length - 1}")["Body"].read()

    spans = [(5, 64), (GROUP + 3, 64), (2 * GROUP - 32, 64), (n - 64, 64)]
    s3.put_object(Bucket="kept", Key=key, Body=old)
    for _ in range(2):   # opened, then kept
        for start, length in spans:
            assert ranged(start, length) == old[start:start + length]
    with FileSystem(cluster.namenode, credentials=None) as fs:
        fs.write(f"/kept/{key}", io.BytesIO(new), overwrite=True)
    for start, length in reversed(spans):
        assert ranged(start, length) == new[start:start + length]
