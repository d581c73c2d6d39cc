"""Which store a path names, and the path in the form the store takes."""
import os
import re
import urllib.parse
from typing import List, Optional, Tuple

from ..errors import InvalidOptionError
from .base import Store
from .config import RETRY_FIELDS, STORE_OPTIONS, StoreConfig
from .local import LOCAL

_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):")
# Schemes pyarrow has a filesystem for; others are tried through fsspec.
ARROW_SCHEMES = ("s3", "s3a", "gs", "gcs", "abfs", "abfss", "hdfs", "viewfs")


def is_remote_uri(path) -> bool:
    match = _SCHEME.match(str(path))
    return match is not None and match.group("scheme").lower() != "file" and \
        len(match.group("scheme")) > 1  # not a Windows drive letter


def file_uri_path(text: str, option: str = "path") -> str:
    """The local path a file: URI names (on this machine only)."""
    parsed = urllib.parse.urlparse(text)
    if parsed.netloc not in ("", "localhost") or not parsed.path:
        raise InvalidOptionError(
            f"option {option!r} is {text!r}: a file: URI must name a path on this "
            f"machine (file:/dir or file:///dir), not on host {parsed.netloc!r}", option)
    return urllib.parse.unquote(parsed.path)


def resolve(path, config: Optional[StoreConfig] = None, option: str = "path"
            ) -> Tuple[Store, str]:
    """(store, path): plain paths and file: URIs are local (made absolute); others are
    URIs of a remote store, kept as URIs without a trailing '/'."""
    from .remote import ArrowStore

    text = str(path)
    match = _SCHEME.match(text)
    if match is None or len(match.group("scheme")) == 1:
        return LOCAL, os.path.abspath(text)
    scheme = match.group("scheme").lower()
    if scheme == "file":
        return LOCAL, os.path.abspath(file_uri_path(text, option))
    parsed = urllib.parse.urlparse(text)
    if parsed.username or parsed.password:
        raise InvalidOptionError(
            f"option {option!r}: a store URI must not carry credentials ({scheme}://"
            f"<user>:<secret>@...); give them through the environment or the store.* "
            f"options", option)
    if parsed.query or parsed.fragment:
        raise InvalidOptionError(
            f"option {option!r} is {text!r}: a store URI takes no ?query or #fragment; "
            f"give settings through the store.* options", option)
    if not parsed.netloc and scheme not in ("hdfs", "viewfs"):  # hdfs:/// is the default
        raise InvalidOptionError(
            f"option {option!r} is {text!r}: a {scheme}:// URI must name its bucket, "
            f"container or host ({scheme}://<bucket>/<path>); a local directory whose name "
            f"holds ':' can be given as ./{text}", option)
    config = config or StoreConfig()
    if scheme in ("s3", "s3a"):
        # s3a:// (Hadoop's name) is the same store.
        uri = "s3://" + text[len(match.group(0)) + 2:]
        uri = uri.rstrip("/") or uri
        return ArrowStore("s3", "s3://", "", config.settled("s3")), uri
    if config.has_retry_settings:
        given = next(name for name, field in STORE_OPTIONS.items()
                     if field in RETRY_FIELDS and getattr(config, field) is not None)
        raise InvalidOptionError(
            f"option {option!r} is {text!r}: the options store.maxAttempts, "
            f"store.retryTimeout, store.connectTimeout and store.readTimeout apply to s3:// "
            f"paths ({given} was given); {scheme}:// stores retry as their own client "
            f"library does", given)
    if scheme in ("gs", "gcs"):
        uri = "gs://" + text[len(match.group(0)) + 2:]
        return ArrowStore("gs", "gs://", "", config), uri.rstrip("/")
    if config.endpoint or config.region or config.access_key_id or config.anonymous:
        raise InvalidOptionError(
            f"option {option!r} is {text!r}: the store.* options apply to s3:// and gs:// "
            f"paths; {scheme}:// stores take their settings from the environment", option)
    uri = text.rstrip("/")
    base = f"{scheme}://{parsed.netloc}"
    rel = parsed.path.lstrip("/").rstrip("/")
    try:
        from pyarrow import fs as pafs

        _, fs_path = pafs.FileSystem.from_uri(uri)
    except Exception:
        fs_path = None  # no pyarrow filesystem for it: fsspec's paths are the URI's
    if fs_path is None:
        return ArrowStore(scheme, base + "/", parsed.netloc + "/", config, uri), uri
    fs_path = fs_path.rstrip("/")
    fs_prefix = fs_path[: len(fs_path) - len(rel)] if rel and fs_path.endswith(rel) else \
        fs_path + "/"
    return ArrowStore(scheme, base + "/", fs_prefix, config, base + "/"), uri


def resolve_all(paths, config: Optional[StoreConfig] = None, option: str = "path"
                ) -> List[Tuple[Store, str]]:
    return [resolve(path, config, option) for path in paths]
