"""S3's XML documents, written (and the few request bodies it sends, read)."""

from __future__ import annotations

import datetime
import email.utils
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

from hedgefs.s3.errors import S3Error

NS = "http://s3.amazonaws.com/doc/2006-03-01/"
HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n'


def iso(mtime_ms: int) -> str:
    when = datetime.datetime.fromtimestamp(mtime_ms / 1000, datetime.timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def http_date(mtime_ms: int) -> str:
    return email.utils.formatdate(mtime_ms / 1000, usegmt=True)


def element(name: str, value) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    return f"<{name}>{escape(str(value))}</{name}>"


def document(root: str, body: str) -> bytes:
    return (HEAD + f'<{root} xmlns="{NS}">{body}</{root}>').encode()


def parse(body: bytes, root: str) -> ET.Element:
    """A request body's XML (namespace or not), its root checked."""
    try:
        tree = ET.fromstring(body)
    except ET.ParseError:
        raise S3Error("MalformedXML", "The XML you provided was not well-formed or did not validate against our "
                      "published schema.") from None
    if strip(tree.tag) != root:
        raise S3Error("MalformedXML", f"expected a <{root}> document")
    return tree


def strip(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def children(node: ET.Element, name: str) -> list[ET.Element]:
    return [c for c in node if strip(c.tag) == name]


def text(node: ET.Element, name: str, default: str = "") -> str:
    found = children(node, name)
    return (found[0].text or "") if found else default
