"""``python -m hedgefs.datanode``: run one DataNode without the full CLI (tests, debugging).

Same flags as ``hedgefs datanode``; errors are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from hedgefs.datanode.server import serve


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m hedgefs.datanode")
    p.add_argument("--id", required=True, dest="datanode_id")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--namenode", default=os.environ.get("HEDGEFS_NAMENODE", "127.0.0.1:8020"))
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--advertise-host")
    p.add_argument("--port-file")
    p.add_argument("--enable-faults", action="store_true")
    p.add_argument("--fault", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--token", default=os.environ.get("HEDGEFS_TOKEN") or None)
    p.add_argument("--heartbeat-interval", type=float, default=3.0, metavar="SECONDS")
    p.add_argument("--block-report-interval", type=float, default=60.0, metavar="SECONDS")
    p.add_argument("--no-fsync", action="store_true")
    p.add_argument("--max-repairs", type=int, default=2)
    p.add_argument("--log-level", default="INFO")
    a = p.parse_args(argv)
    logging.basicConfig(level=a.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        serve(datanode_id=a.datanode_id, port=a.port, data_dir=a.data_dir, namenode=a.namenode,
              host=a.host, advertise_host=a.advertise_host, port_file=a.port_file,
              enable_faults=a.enable_faults, fault_specs=a.fault, token=a.token,
              heartbeat_interval_s=a.heartbeat_interval,
              block_report_interval_s=a.block_report_interval, fsync=not a.no_fsync,
              max_repairs=a.max_repairs)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
