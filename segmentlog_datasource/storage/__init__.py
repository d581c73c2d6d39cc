"""Where logs live: the local filesystem, or an object store or HDFS through pyarrow.

A path is a plain local path, a `file:` URI, or a URI of a store pyarrow has a
filesystem for (`s3://`, `gs://`, `abfs://`, `abfss://`, `hdfs://`; or one an installed
fsspec package knows). Code above this layer names files by these strings and asks the
store that `resolve` gives for one for what it needs: a snapshot listing of a tree, the
bytes of a small file, a header reader, and the bytes of a segment range to decode.
A path may also be a glob of directories (`/backup/broker-*`): `expand_glob` lists what
it matches (see globs.py).

Local files are mapped; remote ones are read in ranges (see remote.py).
"""
from .base import Chunk, FileEntry, LogBytes, Store, TreeView
from .config import STORE_OPTIONS, StoreConfig, parse_store_config
from .local import LOCAL, LocalStore
from .resolve import is_remote_uri, resolve, resolve_all
from .globs import expand_glob, expand_paths, is_glob, refuse_glob

__all__ = [
    "Chunk", "FileEntry", "LogBytes", "Store", "TreeView", "STORE_OPTIONS", "StoreConfig",
    "parse_store_config", "LOCAL", "LocalStore", "is_remote_uri", "resolve", "resolve_all",
    "expand_glob", "expand_paths", "is_glob", "refuse_glob",
]
