"""Trash, as HDFS's: with $HEDGEFS_TRASH_MINUTES > 0, `rm` moves PATH to
/user/USER/.Trash/Current/PATH instead of deleting it (`-skipTrash` deletes at once). `hedgefs
expunge` turns Current into a checkpoint named by the time (yyMMddHHmm) and deletes checkpoints
older than the interval; every `rm` to the trash expires old checkpoints too. Off (0) by
default, as HDFS's fs.trash.interval.
"""

from __future__ import annotations

import os
import time

import click

from hedgefs.cli.common import CONTEXT, client_credentials, namenode_option, open_fs
from hedgefs.client.errors import NotFound, UsageError

ENV = "HEDGEFS_TRASH_MINUTES"
CHECKPOINT_FORMAT = "%y%m%d%H%M"


def interval_minutes() -> float:
    text = os.environ.get(ENV, "0") or "0"
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{ENV}={text!r}: expected minutes (0 = no trash)") from None
    if value < 0:
        raise UsageError(f"{ENV}={text!r}: expected minutes >= 0 (0 = no trash)")
    return value


def user() -> str:
    credential = client_credentials()
    return credential.identity.name if credential is not None else "hedgefs"


def trash_root() -> str:
    return f"/user/{user()}/.Trash"


def in_trash(path: str) -> bool:
    return path == trash_root() or path.startswith(trash_root() + "/")


def move_to_trash(fs, path: str) -> str:
    """Move ``path`` into Current (a name already there gets a time suffix); returns where it went."""
    if path == "/":
        raise UsageError("cannot delete the root directory '/'")
    fs.stat(path)   # NotFound before anything is made
    expire(fs)
    target = f"{trash_root()}/Current{path}"
    parent = target.rsplit("/", 1)[0]
    fs.mkdir(parent, parents=True)
    try:
        fs.stat(target)
        target = f"{target}.{int(time.time() * 1000)}"
    except NotFound:
        pass
    fs.rename(path, target)
    return target


def expire(fs, now: float | None = None) -> list[str]:
    """Delete checkpoints older than the interval; returns their paths."""
    now = time.time() if now is None else now
    gone = []
    try:
        entries = fs.list(trash_root())
    except NotFound:
        return gone
    for e in entries:
        name = e.path.rsplit("/", 1)[-1]
        try:
            made = time.mktime(time.strptime(name, CHECKPOINT_FORMAT))
        except ValueError:
            continue   # Current, or not ours
        if now - made >= interval_minutes() * 60:
            fs.delete(e.path, recursive=True)
            gone.append(e.path)
    return gone


@click.command(context_settings=CONTEXT)
@namenode_option
def expunge(namenode: str | None) -> None:
    """Checkpoint your trash (Current becomes a directory named by the time) and delete the
    checkpoints older than $HEDGEFS_TRASH_MINUTES, as `hdfs dfs -expunge`.

    \b
    Examples:
      HEDGEFS_TRASH_MINUTES=1440 hedgefs rm /data/old.csv    # into /user/$USER/.Trash/Current
      hedgefs expunge
    """
    with open_fs(namenode) as fs:
        current = f"{trash_root()}/Current"
        try:
            fs.stat(current)
            checkpoint = f"{trash_root()}/{time.strftime(CHECKPOINT_FORMAT)}"
            try:
                fs.stat(checkpoint)
                checkpoint += f".{int(time.time() * 1000)}"
            except NotFound:
                pass
            fs.rename(current, checkpoint)
            click.echo(f"checkpoint {checkpoint}", err=True)
        except NotFound:
            pass
        for path in expire(fs):
            click.echo(f"deleted {path}", err=True)

