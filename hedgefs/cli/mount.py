"""`hedgefs mount`: the filesystem at a local directory, through FUSE 3 (mount/)."""

import click

from hedgefs.cli.common import (
    CONTEXT,
    hedge_config,
    hedge_options,
    metrics_port_option,
    namenode_option,
    open_fs,
    serving_client_metrics,
)
from hedgefs.client.errors import HedgefsError


@click.command(context_settings=CONTEXT)
@click.argument("mountpoint")
@click.option("-f", "--foreground", is_flag=True, help="Stay in the foreground (logs to stderr); "
              "without it the mount runs in the background once mounted.")
@click.option("--log-file", metavar="FILE", help="In the background: append logs here (default: none).")
@click.option("--attr-timeout", "timeout_s", type=click.FloatRange(0, 3600), default=1.0, show_default=True,
              metavar="S", help="How long the kernel trusts names and attributes (size, mtime) it was given.")
@click.option("--allow-other", is_flag=True, help="Let other local users use the mount (needs user_allow_other "
              "in /etc/fuse.conf unless root); the kernel checks modes against the mapped owners.")
@metrics_port_option
@hedge_options
@namenode_option
def mount(mountpoint: str, foreground: bool, log_file: str | None, timeout_s: float, allow_other: bool,
          metrics_port: str | None, namenode: str | None, stats: bool, **hedge) -> None:
    """Mount the cluster at MOUNTPOINT (FUSE 3) until `fusermount3 -u MOUNTPOINT` or SIGTERM.

    One client serves every program that uses the mount: reads are hedged preads with read-ahead
    on sequential access; files written in order appear when closed (close(2) returns a failed
    commit as its error), appends (O_APPEND) and truncates are copy-on-write of the last block
    group, writes in place go to a working copy committed at fsync or close; symlinks, utimes and
    user.* xattrs are the NameNode's. Refused: hard links (EPERM), other xattr namespaces
    (ENOTSUP). Manual: docs/mount.md.

    \b
    Examples:
      hedgefs mount /mnt/hedgefs                # in the background once mounted
      cp big.bin /mnt/hedgefs/data/ && sha256sum /mnt/hedgefs/data/big.bin
      hedgefs mount -f --metrics-port 9464 /mnt/hedgefs
      fusermount3 -u /mnt/hedgefs
    """
    from hedgefs.cli.common import setup_logging
    from hedgefs.mount.run import Daemon, MountOptions, check_fuse, check_mountpoint, serve

    config = hedge_config(hedge)
    path = check_mountpoint(mountpoint)
    check_fuse()
    daemon = None if foreground else Daemon(log_file)
    if daemon is not None:
        setup_logging(False)   # stderr is the log file (or nothing) now
    try:
        with open_fs(namenode, config) as fs:
            fs.stat("/")   # the NameNode answers, and takes our credential, before we mount
            with serving_client_metrics(metrics_port):
                options = MountOptions(timeout_s=timeout_s, allow_other=allow_other)
                serve(fs, path, options, ready=daemon.mounted if daemon else None)
            if stats:
                from hedgefs.cli.common import print_stats

                print_stats(fs)
    except HedgefsError as err:
        if daemon is None:
            raise
        daemon.failed(err.exit_code, str(err))
        raise SystemExit(err.exit_code) from None
    except BaseException as err:
        if daemon is not None:
            daemon.failed(1, f"cannot mount: {err}")
        raise
