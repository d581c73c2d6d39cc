"""The `segmentlog` command line (describe, dump, verify, write); Spark-free."""
from .main import main

__all__ = ["main"]
