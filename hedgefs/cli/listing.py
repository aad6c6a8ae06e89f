"""Looking verbs: ls, stat, count, test.

Names are printed with control characters made visible (``$'a\\nb'``, as GNU ls quotes them): an
escape sequence in a file name must not rewrite the terminal of whoever lists it, nor a newline
split one entry in two. ``--json`` gives every name exactly.
"""

import json
import signal
from stat import S_IFDIR, S_IFLNK, S_IFREG, filemode
import sys
import time

import click

from hedgefs.cli.common import CONTEXT, CONTEXT_NO_SHORT_HELP, namenode_option, open_fs, remote_path
from hedgefs.cli.humanize import human_size, visible
from hedgefs.client.errors import NotFound


def _entry_doc(e) -> dict:
    doc = {"path": e.path, "type": "directory" if e.is_dir else "symlink" if e.is_link else "file",
           "length": 0 if e.is_dir else e.length, "policy": e.policy, "owner": e.owner, "group": e.group,
           "permission": f"{e.permission:04o}", "mtime_ms": e.mtime_ms, "block_size": e.block_size,
           "atime_ms": e.atime_ms}
    if e.is_link:
        doc["target"] = e.symlink
    return doc


def _mtime(mtime_ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(mtime_ms / 1000)) if mtime_ms else "-"


@click.command(name="ls", context_settings=CONTEXT_NO_SHORT_HELP)
@click.argument("paths", nargs=-1, metavar="[PATH]...")
@click.option("-R", "recursive", is_flag=True, help="List subdirectories recursively.")
@click.option("-l", "long", is_flag=True, help="Long format (the default; accepted as in ls and hdfs dfs -ls).")
@click.option("-h", "--human", "human", is_flag=True, help="Sizes in K, M, G (powers of 1024).")
@click.option("-d", "directory", is_flag=True, help="A directory itself, not its entries.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per entry (exact names, bytes, mtime in ms).")
@namenode_option
def ls_(paths: tuple[str, ...], recursive: bool, long: bool, human: bool, directory: bool, as_json: bool,
        namenode: str | None) -> None:
    """List each directory PATH (default /), or show a file.

    Columns: type and permissions, owner, group, length, policy, modification time, path.
    Entries are printed as they arrive (the NameNode sends a listing in pages), so `ls -R` of a
    large tree starts at once. A directory you may not list is shown but not entered. Help is
    --help only: -h is human-readable sizes, as in HDFS.

    \b
    Examples:
      hedgefs ls /data
      hedgefs ls -h /data/ /logs
      hedgefs ls -R / | wc -l
      hedgefs ls --json /data | jq -r 'select(.length > 1e9) | .path'
    """
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)   # `ls -R / | head` ends quietly
    targets = [remote_path(p) for p in paths or ("/",)]
    with open_fs(namenode) as fs:
        for path in targets:
            entries = [fs.stat(path)] if directory else fs.iter_list(path, recursive=recursive)
            for e in entries:
                if as_json:
                    click.echo(json.dumps(_entry_doc(e)))
                    continue
                length = "-" if e.is_dir else (human_size(e.length) if human else str(e.length))
                target = f" -> {visible(e.symlink)}" if e.is_link else ""
                click.echo(f"{_mode_string(e.is_dir, e.permission, e.is_link)} {visible(e.owner):<8} "
                           f"{visible(e.group):<10} {length:>12} {e.policy:<14} {_mtime(e.mtime_ms)}  "
                           f"{visible(e.path)}{target}")


@click.command(context_settings=CONTEXT)
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@namenode_option
def stat(path: str, as_json: bool, namenode: str | None) -> None:
    """Show size, policy, owner, mode, modification time, and where each unit (EC) or replica
    (REPLICATE-n) lives.

    An erasure-coded file lists its block groups and their units ("groups", "units"); a
    replicated file lists its blocks and their replicas ("blocks", "replicas"). Only live copies
    are listed.

    \b
    Examples:
      hedgefs stat /data/big.bin
      hedgefs stat --json /hbase/hot.hfile | jq '.blocks[].replicas | length'
    """
    from hedgefs.ec import layout
    from hedgefs.ec.policy import parse_policy

    with open_fs(namenode) as fs:
        st = fs.stat(remote_path(path))
    doc = {"path": st.path, "type": "directory" if st.is_dir else "symlink" if st.is_link else "file",
           "length": st.length, "policy": st.policy,
           "owner": st.owner, "group": st.group, "permission": f"{st.permission:04o}", "mtime_ms": st.mtime_ms,
           "mtime": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(st.mtime_ms / 1000)) if st.mtime_ms else None,
           "atime_ms": st.atime_ms}
    if st.is_link:
        doc["target"] = st.symlink
    policy = None if st.is_dir or st.is_link else parse_policy(st.policy)
    if policy is not None and policy.replicated:
        doc["replication"] = policy.units
        doc["blocks"] = [
            {"id": g.id, "length": g.length,
             "replicas": [{"index": u.index, "datanode": u.datanode_id} for _, u in sorted(g.units.items())]}
            for g in st.groups
        ]
    elif policy is not None:
        doc["groups"] = [
            {"id": g.id, "length": g.length, **({"policy": g.policy} if g.policy else {}),   # (an open tail)
             "units": [{"index": u.index, "datanode": u.datanode_id,
                        "length": layout.unit_length(g.code(policy), g.length, u.index)}
                       for _, u in sorted(g.units.items())]}
            for g in st.groups
        ]
    if as_json:
        click.echo(json.dumps(doc))
        return
    click.echo(f"path:    {visible(doc['path'])}\ntype:    {doc['type']}\nlength:  {doc['length']}\n"
               f"policy:  {doc['policy']}\nowner:   {visible(doc['owner'])}:{visible(doc['group'])} {doc['permission']}\n"
               f"mtime:   {doc['mtime'] or '-'}")
    if st.is_link:
        click.echo(f"target:  {visible(st.symlink)}")
    for g in doc.get("groups", []):
        units = " ".join(f"{u['index']}@{u['datanode']}" for u in g["units"])
        click.echo(f"group {g['id']}: {g['length']} bytes, units {units}")
    for b in doc.get("blocks", []):
        replicas = " ".join(r["datanode"] for r in b["replicas"])
        click.echo(f"block {b['id']}: {b['length']} bytes, {len(b['replicas'])} of {doc['replication']} "
                   f"replicas live: {replicas}")


@click.command(context_settings=CONTEXT_NO_SHORT_HELP)
@click.argument("paths", nargs=-1, required=True, metavar="PATH...")
@click.option("-h", "--human", "human", is_flag=True, help="Sizes in K, M, G (powers of 1024).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@namenode_option
def count(paths: tuple[str, ...], human: bool, as_json: bool, namenode: str | None) -> None:
    """Directories, files and bytes under each PATH, as `hdfs dfs -count`
    (DIR_COUNT FILE_COUNT CONTENT_SIZE PATHNAME; the directory itself counts).

    \b
    Examples:
      hedgefs count /data
      hedgefs count -h /data /logs
    """
    rows = []
    with open_fs(namenode) as fs:
        for path in [remote_path(p) for p in paths]:
            top = fs.stat(path)
            dirs, files, size = (1, 0, 0) if top.is_dir else (0, 1, top.length)
            if top.is_dir:
                for e in fs.iter_list(path, recursive=True):
                    if e.is_dir:
                        dirs += 1
                    else:
                        files, size = files + 1, size + e.length
            rows.append({"path": path, "directories": dirs, "files": files, "bytes": size})
    for row in rows:
        if as_json:
            click.echo(json.dumps(row))
        else:
            size = human_size(row["bytes"]) if human else row["bytes"]
            click.echo(f"{row['directories']:>12} {row['files']:>12} {size:>18} {visible(row['path'])}")


@click.command(name="test", context_settings=CONTEXT)
@click.option("-e", "exists", is_flag=True, help="PATH exists.")
@click.option("-d", "is_dir", is_flag=True, help="PATH is a directory.")
@click.option("-f", "is_file", is_flag=True, help="PATH is a file.")
@click.option("-s", "non_empty", is_flag=True, help="PATH is a file longer than 0 bytes (or a non-empty directory).")
@click.option("-z", "empty", is_flag=True, help="PATH is a file of 0 bytes.")
@click.argument("path")
@namenode_option
def test_(exists: bool, is_dir: bool, is_file: bool, non_empty: bool, empty: bool, path: str,
          namenode: str | None) -> None:
    """Exit 0 if PATH passes the check, 1 if not (nothing printed), as `hdfs dfs -test`;
    any other trouble is an error line and its exit code.

    \b
    Examples:
      hedgefs test -e /data/report.csv && echo there
      hedgefs test -d /data || hedgefs mkdir -p /data
    """
    from hedgefs.client.errors import UsageError

    if sum((exists, is_dir, is_file, non_empty, empty)) != 1:
        raise UsageError("test: give exactly one of -e, -d, -f, -s, -z")
    with open_fs(namenode) as fs:
        try:
            st = fs.stat(remote_path(path))
        except NotFound:
            sys.exit(1)
        if is_dir:
            ok = st.is_dir
        elif is_file:
            ok = not st.is_dir
        elif non_empty:
            ok = (not st.is_dir and st.length > 0) or (st.is_dir and bool(next(iter(fs.iter_list(st.path)), None)))
        elif empty:
            ok = not st.is_dir and st.length == 0
        else:
            ok = True
    if not ok:
        sys.exit(1)



@click.command(context_settings=CONTEXT)
@click.argument("path", default="/")
@click.option("-name", "--name", "pattern", metavar="GLOB", help="Only entries whose last component matches GLOB.")
@click.option("-type", "--type", "kind", type=click.Choice(["f", "d"]), help="Only files (f) or directories (d).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per entry.")
@namenode_option
def find(path: str, pattern: str | None, kind: str | None, as_json: bool, namenode: str | None) -> None:
    """Every entry under PATH (itself included), as `hdfs dfs -find`: one path per line.

    \b
    Examples:
      hedgefs find /data -name '*.csv'
      hedgefs find / -type d | wc -l
    """
    import fnmatch

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    with open_fs(namenode) as fs:
        top = fs.stat(remote_path(path))
        entries = [top] if not top.is_dir else [top, *fs.iter_list(top.path, recursive=True)]
        for e in entries:
            if kind and (kind == "d") != e.is_dir:
                continue
            if pattern and not fnmatch.fnmatchcase(e.path.rsplit("/", 1)[-1] or "/", pattern):
                continue
            click.echo(json.dumps(_entry_doc(e)) if as_json else visible(e.path))


def _mode_string(is_dir: bool, permission: int, is_link: bool = False) -> str:
    """``drwxr-xr-x`` as ls prints it (``t``/``T`` for the sticky bit, the only one hedgefs has)."""
    return filemode((S_IFDIR if is_dir else S_IFLNK if is_link else S_IFREG) | permission & 0o1777)
