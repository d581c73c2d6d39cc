"""Paths a local write takes: plain local paths and `file:` URIs.

Writes into stores go through writer/objectstore.py (or are refused there); any other
URI reaching a local write is refused up front: left alone it would name a local
directory called `gs:`. Reads resolve paths through the storage layer.
"""
from ..errors import InvalidOptionError
from ..storage.resolve import _SCHEME, file_uri_path


def local_path(path, option: str = "path") -> str:
    """`path` as a local path: unchanged when plain, decoded when a `file:` URI."""
    text = str(path)
    match = _SCHEME.match(text)
    if match is None:
        return text
    scheme = match.group("scheme").lower()
    if scheme == "file":
        return file_uri_path(text, option)
    raise InvalidOptionError(
        f"option {option!r} is {text!r}: a local write takes a plain path or a file: URI, "
        f"and the {scheme!r} scheme is not one (a relative directory whose name holds ':' "
        f"can be given as ./{text})", option)
