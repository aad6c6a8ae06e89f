"""Words and numbers for people: sizes, plurals, and names with their control characters shown.

A file name may hold any character but NUL and '/': an escape sequence in a name printed raw
recolours (or retitles, or worse) the terminal of whoever lists it, and a newline splits one
entry in two. ``visible`` quotes such a name as GNU ls does (``$'a\\nb'``); JSON output stays exact.
"""

from __future__ import annotations

import unicodedata


def human_size(n: float) -> str:
    """1536 -> '1.5K', as `ls -h` / `du -h` / `hdfs dfs -du -h` print sizes (powers of 1024)."""
    for unit in ("", "K", "M", "G", "T", "P"):
        if abs(n) < 1024 or unit == "P":
            if unit == "":
                return f"{int(n)}"
            return f"{n:.1f}{unit}" if abs(n) < 10 else f"{n:.0f}{unit}"
        n /= 1024
    return str(n)


def plural(n: int, one: str, many: str | None = None) -> str:
    """'1 file', '2 files'."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _needs_quoting(ch: str) -> bool:
    if ch == "\\" or ch == "'":
        return False
    category = unicodedata.category(ch)
    return category in ("Cc", "Cf", "Zl", "Zp", "Cs") or (0xDC80 <= ord(ch) <= 0xDCFF)


def visible(name: str) -> str:
    """``name`` unchanged if it holds nothing a terminal would act on; else a ``$'...'`` form with
    every control, format or undecodable character escaped (\\n, \\t, \\e, \\xNN, \\uNNNN)."""
    if not any(_needs_quoting(ch) for ch in name):
        return name
    out = []
    for ch in name:
        code = ord(ch)
        if ch == "'":
            out.append("\\'")
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\n\t\r":
            out.append({"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch])
        elif ch == "\x1b":
            out.append("\\e")
        elif 0xDC80 <= code <= 0xDCFF:   # a byte that was not UTF-8 (surrogateescape)
            out.append(f"\\x{code - 0xDC00:02x}")
        elif _needs_quoting(ch):
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"
