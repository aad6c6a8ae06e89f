"""Verbs for files that change: touch (setTimes), ln -s, getfattr/setfattr (extended attributes),
append and truncate. HDFS's `-touch`, `-setfattr`/`-getfattr`, `-appendToFile` and `-truncate`."""

import time
from datetime import datetime

import click

from hedgefs.cli.common import CONTEXT, namenode_option, open_fs, remote_path
from hedgefs.cli.local import open_local
from hedgefs.client.errors import NotFound, UsageError


def _parse_time(text: str) -> int:
    """ms since the epoch from an ISO time (2026-12-06T10:00:00, local time unless it says) or @SECONDS."""
    try:
        if text.startswith("@"):
            return int(float(text[1:]) * 1000)
        return int(datetime.fromisoformat(text).timestamp() * 1000)
    except ValueError:
        raise UsageError(f"bad time {text!r}: YYYY-MM-DDTHH:MM[:SS] or @SECONDS") from None


@click.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("-a", "access", is_flag=True, help="Change the access time only.")
@click.option("-m", "modification", is_flag=True, help="Change the modification time only.")
@click.option("-c", "no_create", is_flag=True, help="Do not create a PATH that does not exist.")
@click.option("-t", "when", metavar="TIME", help="This time (YYYY-MM-DDTHH:MM[:SS] or @SECONDS) instead of now.")
@namenode_option
def touch(paths: tuple[str, ...], access: bool, modification: bool, no_create: bool, when: str | None,
          namenode: str | None) -> None:
    """Set the times of each PATH to now (or -t TIME); a PATH that does not exist is created empty
    (unless -c), as touch(1) and `hdfs dfs -touch`.

    \b
    Examples:
      hedgefs touch /data/_SUCCESS
      hedgefs touch -m -t 2026-01-01T00:00 /data/report.csv
    """
    ms = _parse_time(when) if when else int(time.time() * 1000)
    both = not access and not modification
    with open_fs(namenode) as fs:
        for path in [remote_path(p) for p in paths]:
            try:
                fs.stat(path)
            except NotFound:
                if no_create:
                    continue
                fs.write_bytes(path, b"")
            fs.set_times(path, mtime_ms=ms if both or modification else None,
                         atime_ms=ms if both or access else None)


@click.command(context_settings=CONTEXT)
@click.argument("target")
@click.argument("link")
@click.option("-s", "symbolic", is_flag=True, required=True, help="A symbolic link (the only kind: hard links "
                                                                  "are refused, as HDFS refuses them).")
@namenode_option
def ln(target: str, link: str, symbolic: bool, namenode: str | None) -> None:
    """Make LINK a symbolic link to TARGET (kept as given: relative targets are resolved from
    LINK's directory when followed). `cat`, `get` and the mount follow it; `ls` shows it.

    \b
    Examples:
      hedgefs ln -s /data/2026-12-06 /data/latest
      hedgefs ln -s ../shared/conf /apps/web/conf
    """
    with open_fs(namenode) as fs:
        fs.symlink(target, remote_path(link))


@click.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("-n", "name", metavar="NAME", help="This attribute only (user.NAME).")
@click.option("-d", "dump", is_flag=True, help="Every attribute with its value (the default).")
@namenode_option
def getfattr(path: str, name: str | None, dump: bool, namenode: str | None) -> None:
    """Print the extended attributes of PATH (user.NAME="value"), as `hdfs dfs -getfattr -d`.
    Values that are not text are shown as 0x... hex.

    \b
    Examples:
      hedgefs getfattr /data/report.csv
      hedgefs getfattr -n user.origin /data/report.csv
    """
    with open_fs(namenode) as fs:
        path = remote_path(path)
        xattrs = {name: fs.get_xattr(path, name)} if name else fs.get_xattrs(path)
        click.echo(f"# file: {path}")
        for key in sorted(xattrs):
            click.echo(f"{key}={_show(xattrs[key])}")


def _show(value: bytes) -> str:
    try:
        text = value.decode("utf-8")
        if text.isprintable():
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    except UnicodeDecodeError:
        pass
    return "0x" + value.hex()


@click.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("-n", "name", metavar="NAME", required=True, help="The attribute (user.NAME).")
@click.option("-v", "value", metavar="VALUE", help="Its value (text, or 0x... hex); default empty.")
@click.option("-x", "remove", is_flag=True, help="Remove it instead.")
@namenode_option
def setfattr(path: str, name: str, value: str | None, remove: bool, namenode: str | None) -> None:
    """Set (or with -x remove) the extended attribute NAME of PATH, as `hdfs dfs -setfattr`. Only
    the user namespace (user.NAME) is kept; at most 32 a file, 16 KiB with the name.

    \b
    Examples:
      hedgefs setfattr -n user.origin -v "sensor 7" /data/report.csv
      hedgefs setfattr -x -n user.origin /data/report.csv
    """
    if remove and value is not None:
        raise UsageError("setfattr: -x takes no -v")
    with open_fs(namenode) as fs:
        path = remote_path(path)
        if remove:
            fs.remove_xattr(path, name)
            return
        raw = value or ""
        if raw.startswith("0x"):
            try:
                data = bytes.fromhex(raw[2:])
            except ValueError:
                raise UsageError(f"bad hex value {raw!r}") from None
        else:
            data = raw.encode("utf-8")
        fs.set_xattr(path, name, data)


@click.command(context_settings=CONTEXT)
@click.argument("local")
@click.argument("remote")
@namenode_option
def append(local: str, remote: str, namenode: str | None) -> None:
    """Append LOCAL (a file, or - for stdin) to the file REMOTE, as `hdfs dfs -appendToFile`; a
    REMOTE that does not exist is created. The new bytes appear when the append ends, all of them
    or none (a failure leaves REMOTE as it was). Copy-on-write: REMOTE's last, partial block group
    is rewritten with the new bytes after it; its other groups stay as they are. A REMOTE another
    client is writing is refused at once (exit 2).

    \b
    Examples:
      hedgefs append today.log /logs/app.log
      echo "done $(date)" | hedgefs append - /logs/app.log
    """
    remote = remote_path(remote)
    source, _ = open_local(local)
    with open_fs(namenode) as fs, source:
        try:
            writer = fs.append(remote)
        except NotFound:
            fs.write(remote, source)
            return
        with writer:
            while chunk := source.read(1 << 20):
                writer.write(chunk)


@click.command(context_settings=CONTEXT)
@click.argument("length", type=click.IntRange(0))
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@namenode_option
def truncate(length: int, paths: tuple[str, ...], namenode: str | None) -> None:
    """Cut each file PATH to its first LENGTH bytes, as `hdfs dfs -truncate`. Longer than the file
    is refused (exit 2), as HDFS refuses it. On a block group boundary it is one NameNode call;
    elsewhere the group the cut falls in is rewritten (copy-on-write), and the file changes when
    that is durable: readers see it whole before or whole after.

    \b
    Examples:
      hedgefs truncate 0 /logs/app.log
      hedgefs truncate 1048576 /data/a.bin /data/b.bin
    """
    with open_fs(namenode) as fs:
        for path in [remote_path(p) for p in paths]:
            fs.truncate(path, length)


@click.command(name="recover-lease", context_settings=CONTEXT)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@namenode_option
def recover_lease(paths: tuple[str, ...], namenode: str | None) -> None:
    """End the write in progress at each PATH now (a crashed writer's, whose lease would expire
    only after the NameNode's --lease-timeout-s), as `hdfs debug recoverLease`: a new file being
    written never appears; an append, truncate or write in place leaves the file at its last
    committed version (every byte an hflush committed). Says for each whether there was one.

    \b
    Examples:
      hedgefs recover-lease /logs/app.log
    """
    with open_fs(namenode) as fs:
        for path in [remote_path(p) for p in paths]:
            done = fs.recover_lease(path)
            click.echo(f"{path}: {'write abandoned' if done else 'no write in progress'}")
