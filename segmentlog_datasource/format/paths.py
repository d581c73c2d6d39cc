"""Paths the source and the writer take: plain local paths and `file:` URIs.

Logs are read and written through the local filesystem (or a shared one mounted there),
so a URI of any other scheme (`s3://`, `hdfs://`, `abfss://`, ...) is refused up front:
left alone it would name a local directory called `s3:`.
"""
import re
import urllib.parse

from ..errors import InvalidOptionError

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):")


def local_path(path, option: str = "path") -> str:
    """`path` as a local path: unchanged when plain, decoded when a `file:` URI."""
    text = str(path)
    match = _SCHEME.match(text)
    if match is None:
        return text
    scheme = match.group("scheme").lower()
    if scheme == "file":
        parsed = urllib.parse.urlparse(text)
        if parsed.netloc not in ("", "localhost") or not parsed.path:
            raise InvalidOptionError(
                f"option {option!r} is {text!r}: a file: URI must name a path on this "
                f"machine (file:/dir or file:///dir), not on host {parsed.netloc!r}", option)
        return urllib.parse.unquote(parsed.path)
    raise InvalidOptionError(
        f"option {option!r} is {text!r}: segmentlog reads and writes local (or mounted "
        f"shared) filesystem paths only, and the {scheme!r} scheme is not supported. Give a "
        f"plain path or a file: URI (a relative directory whose name holds ':' can be given "
        f"as ./{text})", option)
