"""HDFS shell basics: cp (inside a cluster), touchz, head, tail."""

import signal
import sys

import click

from hedgefs.cli.common import (
    CONTEXT,
    hedge_config,
    hedge_options,
    namenode_option,
    open_fs,
    remote_path,
    threads_option,
)
from hedgefs.client.errors import AlreadyExists, IsADirectory, NotFound, UsageError


@click.command(context_settings=CONTEXT)
@click.argument("sources", nargs=-1, required=True, metavar="SRC...")
@click.argument("dst")
@click.option("-f", "--force", is_flag=True, help="Overwrite DST if it exists.")
@click.option("--policy", metavar="NAME", help="Policy of the copies (default: inherited at DST).")
@click.option("-r", "-R", "recursive", is_flag=True, help="Copy directory trees (a SRC that is a directory).")
@threads_option
@hedge_options
@namenode_option
def cp(sources: tuple[str, ...], dst: str, force: bool, policy: str | None, recursive: bool, threads: int,
       namenode: str | None, stats: bool, **hedge) -> None:
    """Copy files inside the cluster: SRC to DST, or into DST if it is a directory (several SRC:
    it must be). Each copy appears only when complete. With -r, a SRC directory is copied as a
    tree, in parallel. Between clusters (or resumable, for huge trees): distcp.

    \b
    Examples:
      hedgefs cp /data/a.csv /backup/a.csv
      hedgefs cp /data/a.csv /data/b.csv /backup/
      hedgefs cp -r /data/2026 /backup/          # -> /backup/2026/...
    """
    from hedgefs.cli.common import check_policy

    if policy:
        check_policy(policy)
    srcs = [remote_path(p) for p in sources]
    target = remote_path(dst)
    with open_fs(namenode, hedge_config(hedge)) as fs:
        try:
            st = fs.stat(target)
        except NotFound:
            st = None
        into = st is not None and st.is_dir
        if len(srcs) > 1 and not into:
            raise UsageError(f"cp: several sources need an existing directory as the target: {target}")
        for src in srcs:
            dest = (target.rstrip("/") + "/" + src.rsplit("/", 1)[-1]) if into else target
            if dest == src:
                raise UsageError(f"cp: {src} and {dest} are the same file")
            try:
                f = fs.open(src)
            except IsADirectory:
                if not recursive:
                    raise IsADirectory(f"is a directory: {src} (cp -r copies trees)") from None
                from hedgefs.cli.trees import cp_tree

                cp_tree(fs, src, target, force=force, policy=policy, threads=threads)
                continue
            with f, f.stream() as source:
                f.check_available()
                fs.write(dest, source, overwrite=force, policy=policy)


@click.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@namenode_option
def touchz(paths: tuple[str, ...], namenode: str | None) -> None:
    """Create each PATH as a file of 0 bytes (an existing empty file is left as it is; a longer
    one is an error), as `hdfs dfs -touchz`.

    \b
    Examples:
      hedgefs touchz /data/_SUCCESS
    """
    with open_fs(namenode) as fs:
        for path in [remote_path(p) for p in paths]:
            try:
                fs.write_bytes(path, b"")
            except AlreadyExists:
                st = fs.stat(path)
                if st.is_dir or st.length:
                    raise AlreadyExists(f"touchz: {path} exists and is not an empty file") from None


def _edge(head: bool):
    @click.command(name="head" if head else "tail", context_settings=CONTEXT)
    @click.argument("path")
    @click.option("-c", "nbytes", type=click.IntRange(0), default=1024, show_default=True, metavar="N",
                  help="How many bytes.")
    @hedge_options
    @namenode_option
    def command(path: str, nbytes: int, namenode: str | None, stats: bool, **hedge) -> None:
        with open_fs(namenode, hedge_config(hedge)) as fs, fs.open(remote_path(path)) as f:
            length = f.length
            offset = 0 if head else max(0, length - nbytes)
            data = f.pread(offset, min(nbytes, length - offset))
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()

    which = "first" if head else "last"
    command.help = (f"Write the {which} N bytes (1 KiB by default) of PATH to stdout, as `hdfs dfs -{command.name}`."
                    f"\n\n\b\nExamples:\n  hedgefs {command.name} /logs/app.log\n"
                    f"  hedgefs {command.name} -c 100 /data/big.bin | xxd")
    return command


head = _edge(True)
tail = _edge(False)
