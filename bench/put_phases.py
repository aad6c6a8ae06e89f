"""Where a small put's time goes: sequential puts of one size through the client library, the
writer's steps timed (Create, encoding, sending the cells, the DataNodes' finish, Complete).

    python bench/put_phases.py NAMENODE COUNT SIZE POLICY [POLICY ...]

A probe, not a suite: it wraps ``StripedWriter``'s methods with timers in its own process, so it
measures whichever build's client it runs with (``PYTHONPATH`` of a baseline's shim, as
``hedgefs bench smallfiles`` makes one, runs main's); the cluster at NAMENODE is that build's.
"finish" is the DataNodes' commit of every unit of the group (fsync of the block, its checksums
and the directory), which a small file's put waits for. Run each side A B B A under the heavy lock.
"""

import collections
import statistics
import sys
import time

from hedgefs.client import writer as w
from hedgefs.client.fs import FileSystem

STEPS = (("create", "Create (NameNode)"), ("_send_stripe", "send cells (opens streams)"),
         ("_finish_all", "finish (DataNodes' commits)"), ("complete", "Complete (NameNode)"))


def main(namenode: str, count: int, size: int, policies: list[str]) -> None:
    times: dict[str, list[float]] = collections.defaultdict(list)

    def timed(label, fn):
        async def wrapper(*args, **kwargs):
            started = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                times[label].append(time.perf_counter() - started)
        return wrapper

    for name, label in STEPS:
        setattr(w.StripedWriter, name, timed(label, getattr(w.StripedWriter, name)))
    encode = w._encode

    def timed_encode(*args):
        started = time.perf_counter()
        try:
            return encode(*args)
        finally:
            times["encode"].append(time.perf_counter() - started)
    w._encode = timed_encode

    with FileSystem(namenode) as fs:
        for policy in policies:
            times.clear()
            fs.mkdir(f"/put-phases/{policy}", parents=True)
            began = time.perf_counter()
            for i in range(count):
                started = time.perf_counter()
                fs.write_bytes(f"/put-phases/{policy}/f{i}", b"x" * size, policy=policy, overwrite=True)
                times["put, in all"].append(time.perf_counter() - started)
            wall = time.perf_counter() - began
            print(f"{policy}: {count} puts of {size} B one after another: {count / wall:.1f}/s")
            for label, values in times.items():
                print(f"  {label:30s} median {statistics.median(values) * 1000:7.2f} ms  "
                      f"mean {statistics.mean(values) * 1000:7.2f} ms")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:])
