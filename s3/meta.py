"""User metadata values (x-amz-meta-*) between HTTP headers and the object's xattrs, as S3 keeps them.

HTTP header values are bytes; S3's REST API takes US-ASCII, and what is not (UTF-8 sent raw, a
control character) it keeps as text and returns as an RFC 2047 encoded word, "mail-safe"
(``=?UTF-8?Q?caf=C3=A9?=``), which email.header.decode_header (or any MIME library) reads back.

    in:   the bytes as sent: UTF-8 if they are valid UTF-8, else Latin-1 (what http.client and
          some SDKs send for a str); printable ASCII, RFC 2047 words included, is kept verbatim,
          so boto3 and the AWS CLI (which send only ASCII: non-ASCII must be encoded by the
          caller) get back exactly the string they put
    out:  printable ASCII as kept; anything else one encoded word, Q-encoded UTF-8

aiohttp hands over header bytes decoded as UTF-8 with surrogateescape: ``raw()`` gets them back.
"""

from __future__ import annotations


def raw(value: str) -> bytes:
    """The bytes of a header value as they came on the wire."""
    return value.encode("utf-8", "surrogateescape")


def from_header(value: str) -> str:
    data = raw(value)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _printable(text: str) -> bool:
    return all(" " <= c <= "~" for c in text)


def to_header(text: str) -> str:
    if _printable(text):
        return text
    out = []
    for byte in text.encode("utf-8", "surrogatepass"):
        c = chr(byte)
        if c == " ":
            out.append("_")
        elif "!" <= c <= "~" and c not in "=?_":
            out.append(c)
        else:
            out.append(f"={byte:02X}")
    return "=?UTF-8?Q?" + "".join(out) + "?="
