"""segmentlog: read and write Apache Kafka segment logs as a PySpark data source."""
import hashlib
import os
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Build the compiled decoder when a C compiler is there; the pure-Python twin otherwise."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # no compiler: the package still works, only slower
            sys.stderr.write(f"segmentlog: compiled fast path not built ({exc}); using pure Python\n")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:
            sys.stderr.write(f"segmentlog: could not build {ext.name} ({exc}); using pure Python\n")


FAST_SOURCE = os.path.join("segmentlog_datasource", "format", "_fastrecords.c")
ext_modules = []
if os.path.exists(FAST_SOURCE) and not os.environ.get("SEGMENTLOG_PURE_PYTHON"):
    with open(FAST_SOURCE, "rb") as source:
        source_sha256 = hashlib.sha256(source.read()).hexdigest()
    ext_modules.append(
        Extension(
            "segmentlog_datasource.format._fastrecords",
            sources=[FAST_SOURCE],
            # The module carries the hash of its source: fast.py, run from a checkout, loads
            # another copy's build only when it was built from the checkout's _fastrecords.c.
            define_macros=[("SEGMENTLOG_SOURCE_SHA256", f'"{source_sha256}"')],
            extra_compile_args=["-O3"],
        )
    )

setup(
    name="segmentlog",
    version="0.1.0",
    description="Read and write Apache Kafka segment-log directories with Spark, no broker needed",
    long_description=open("README.md", encoding="utf-8").read() if os.path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["segmentlog_datasource", "segmentlog_datasource.*",
                                    "writer", "writer.*"]),
    # Spark discovers Python data sources from top-level modules named pyspark_*.
    py_modules=["pyspark_segmentlog"],
    ext_modules=ext_modules,
    cmdclass={"build_ext": OptionalBuildExt},
    install_requires=[
        "pyspark>=4.3",
        "pyarrow>=15",
        "numpy>=1.24",
        "pandas>=2.2,<3",  # PySpark 4.3 supports pandas 2 only; its Arrow paths import it
        "crcmod>=1.7",
        "lz4>=4.0",
    ],
    extras_require={
        "zstd": ["zstandard>=0.22"],
        "snappy": ["cramjam>=2.8"],
        # Hardware CRC32C, and libdeflate for gzip writes at twice zlib's speed.
        "fast": ["crc32c>=2.4", "deflate>=0.7"],
        "all": ["zstandard>=0.22", "cramjam>=2.8", "crc32c>=2.4", "deflate>=0.7"],
        "test": [
            "pytest>=8",
            "kafka-python>=2.0.2",
            "deflate>=0.7",
            "python-snappy>=0.7",  # kafka-python's snappy codec
            "xxhash>=3.0",  # kafka-python's lz4 for magic-0 messages
            "zstandard>=0.22",
            "cramjam>=2.8",
            "crc32c>=2.4",
        ],
    },
)
