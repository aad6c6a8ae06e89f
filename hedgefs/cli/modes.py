"""chmod modes: octal (644, 1777) or symbolic as chmod(1) and `hdfs dfs -chmod` take them."""

from __future__ import annotations

import re

from hedgefs.client.errors import UsageError

_CLAUSE = re.compile(r"^([ugoa]*)([-+=])([rwxXt]*)$")


def parse_mode(text: str) -> int | list[tuple[str, str, str]]:
    """An octal mode as an int, or the clauses of a symbolic one; UsageError (exit 2) if neither."""
    if re.fullmatch(r"[0-7]{1,4}", text):
        value = int(text, 8)
        if value <= 0o1777:
            return value
    clauses = []
    for part in text.split(","):
        m = _CLAUSE.match(part)
        if not m:
            raise UsageError(f"bad mode {text!r}: octal (644, 750, 1777) or symbolic (u+x, go-w, a=rX)")
        clauses.append(m.groups())
    return clauses


def apply_mode(change: int | list[tuple[str, str, str]], current: int, is_dir: bool) -> int:
    """The new permission bits for a file (or directory) whose bits are ``current``."""
    if isinstance(change, int):
        return change
    mode = current & 0o1777
    for who, op, perms in change:
        classes = who.replace("a", "ugo") or "ugo"
        bits = 0
        for c in classes:
            shift = {"u": 6, "g": 3, "o": 0}[c]
            for p in perms:
                if p == "r":
                    bits |= 4 << shift
                elif p == "w":
                    bits |= 2 << shift
                elif p == "x" or (p == "X" and (is_dir or mode & 0o111)):
                    bits |= 1 << shift
            if "t" in perms and c == "o":
                bits |= 0o1000
        if "t" in perms and not who:
            bits |= 0o1000
        if op == "+":
            mode |= bits
        elif op == "-":
            mode &= ~bits
        else:
            span = 0
            for c in classes:
                span |= 0o7 << {"u": 6, "g": 3, "o": 0}[c]
            if "o" in classes:
                span |= 0o1000
            mode = (mode & ~span) | bits
    return mode & 0o1777
