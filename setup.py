"""segmentlog: read and write Apache Kafka segment logs as a PySpark data source."""
import os
import runpy
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """Build the compiled decoder when a C compiler is there; the pure-Python twin otherwise."""

    def finalize_options(self):
        super().finalize_options()
        # The extensions are independent: build them side by side (one each on a 2-core
        # machine halves the install's minute of compiling).
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

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


FASTPATH = os.path.join("segmentlog_datasource", "format", "fastpath")
FAST_SOURCE = os.path.join(FASTPATH, "_fastrecords.c")
ext_modules = []
if os.path.exists(FAST_SOURCE) and not os.environ.get("SEGMENTLOG_PURE_PYTHON"):
    # Run, not imported: the package's dependencies need not be installed yet.
    buildinfo = runpy.run_path(os.path.join(FASTPATH, "buildinfo.py"))
    ext_modules.append(
        Extension(
            "segmentlog_datasource.format.fastpath._fastrecords",
            sources=[FAST_SOURCE],
            # Kafka's layout and the run states as macros, read from the Python definitions,
            # and SEGMENTLOG_SOURCE_SHA256: compiled.py, run from a checkout, loads another
            # copy's build only when it was built from the checkout's source and values.
            define_macros=buildinfo["define_macros"](FASTPATH),
            depends=[os.path.normpath(os.path.join(FASTPATH, relative))
                     for relative in (*buildinfo["COMPILED_CONSTANTS"], *buildinfo["C_HEADERS"])],
            extra_compile_args=["-O3"],
        )
    )

ENCODER_SOURCE = os.path.join(FASTPATH, "_fastencode.c")
if os.path.exists(ENCODER_SOURCE) and not os.environ.get("SEGMENTLOG_PURE_PYTHON"):
    # The compiled record batch encoder (compiled_encode.py), built as the decoder is: the
    # layout values as macros, and the sha256 a checkout run checks before loading it.
    buildinfo = runpy.run_path(os.path.join(FASTPATH, "buildinfo.py"))
    encoder = buildinfo["ENCODER_C_SOURCE"]
    ext_modules.append(
        Extension(
            "segmentlog_datasource.format.fastpath._fastencode",
            sources=[ENCODER_SOURCE],
            define_macros=buildinfo["define_macros"](FASTPATH, encoder),
            depends=[os.path.normpath(os.path.join(FASTPATH, relative))
                     for relative in (*buildinfo["ENCODER_CONSTANTS"], *buildinfo["C_HEADERS"])],
            extra_compile_args=["-O3"],
        )
    )

# The compiled value decoders of decode/, each with its pure twin when it is not built:
#   _avrocolumns: valueFormat=avro (decode/avro_program.py); avro.py falls back to fastavro;
#   _jsoncolumns: valueFormat=json's columnar decoder (decode/json_program.py);
#     json_schema.py decodes row by row;
#   _protobufcolumns: valueFormat=protobuf (decode/protobuf_program.py); protobuf.py
#     decodes row by row through the protobuf runtime.
# SEGMENTLOG_SOURCE_SHA256: as for the record decoder, a checkout run loads an installed
# build only when it was built from the checkout's source (the .c and the columns.h it
# includes: buildinfo.PLAIN_C_HEADERS).
DECODE = os.path.join("segmentlog_datasource", "decode")
for name in ("_avrocolumns", "_jsoncolumns", "_protobufcolumns"):
    source = os.path.join(DECODE, name + ".c")
    if not os.path.exists(source) or os.environ.get("SEGMENTLOG_PURE_PYTHON"):
        continue
    buildinfo = runpy.run_path(os.path.join(FASTPATH, "buildinfo.py"))
    ext_modules.append(
        Extension(f"segmentlog_datasource.decode.{name}", sources=[source],
                  define_macros=buildinfo["plain_define_macros"](DECODE, name + ".c"),
                  depends=[os.path.join(DECODE, header)
                           for header in buildinfo["PLAIN_C_HEADERS"]],
                  extra_compile_args=["-O3"]))

setup(
    name="segmentlog",
    version="0.1.0",
    description="Read and write Apache Kafka segment-log directories with Spark, no broker needed",
    long_description=open("README.md", encoding="utf-8").read() if os.path.exists("README.md") else "",
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    # writer/ is the engine's directory in the checkout; it installs as
    # segmentlog_datasource.writer (a bare `writer` would collide with a PyPI package).
    packages=find_packages(include=["segmentlog_datasource", "segmentlog_datasource.*"])
    + ["segmentlog_datasource.writer"],
    package_dir={"segmentlog_datasource.writer": "writer"},
    # Spark discovers Python data sources from top-level modules named pyspark_*.
    py_modules=["pyspark_segmentlog"],
    ext_modules=ext_modules,
    cmdclass={"build_ext": OptionalBuildExt},
    # The format core, the writer engine and the command line run without Spark; the data
    # source needs the `spark` extra, unless the environment brings its own PySpark.
    install_requires=[
        "pyarrow>=15",
        "numpy>=1.24",
        "crcmod>=1.7",
        "lz4>=4.0",
        "click>=8.1",  # the segmentlog command line
        "rich>=13",  # its tables and progress bar
    ],
    entry_points={"console_scripts": ["segmentlog = segmentlog_datasource.cli:main"]},
    extras_require={
        # PySpark 4.0 to 4.3 (the releases with the Python Data Source API; docs/install.md says
        # which feature needs which); they support pandas 2 only, which their Arrow paths import.
        "spark": ["pyspark>=4.0", "pandas>=2.2,<3"],
        "zstd": ["zstandard>=0.22"],
        # writing into s3:// (conditional PUTs); reading needs only pyarrow
        "s3": ["boto3>=1.35"],
        "snappy": ["cramjam>=2.8"],
        # valueFormat=avro / keyFormat=avro: Schema Registry framed Avro decoded
        "avro": ["fastavro>=1.9"],
        # valueFormat=protobuf: .proto schemas loaded into the protobuf runtime
        "protobuf": ["protobuf>=4.22"],
        # Hardware CRC32C, and libdeflate for gzip writes at twice zlib's speed.
        "fast": ["crc32c>=2.4", "deflate>=0.7"],
        "all": ["pyspark>=4.0", "pandas>=2.2,<3", "zstandard>=0.22", "cramjam>=2.8", "crc32c>=2.4", "deflate>=0.7", "boto3>=1.35", "fastavro>=1.9", "protobuf>=4.22"],
        "test": [
            "pyspark>=4.0",
            "pandas>=2.2,<3",
            # pytest-xdist 3.8 groups tests (--dist loadgroup) by renaming their node ids,
            # which pytest 9.2 no longer allows: the Spark tests would spread over workers.
            "pytest>=8,<9.2",
            "pytest-xdist>=3.5",  # the README's command: two workers (tests/conftest.py)
            "hypothesis>=6",  # tests/format/test_fuzz.py
            "kafka-python>=2.0.2",
            "deflate>=0.7",
            "python-snappy>=0.7",  # kafka-python's snappy codec
            "xxhash>=3.0",  # kafka-python's lz4 for magic-0 messages
            "zstandard>=0.22",
            "cramjam>=2.8",
            "crc32c>=2.4",
            # tests/support/s3server.py: moto's S3 (and IAM) on loopback, served by flask;
            # not moto[server], whose other services' dependencies double the install time
            "moto[s3]>=5.1",
            "flask>=2",
            "flask-cors>=4",
            "boto3>=1.34",
            "fsspec>=2023.1",  # tests/store/test_fsspec_read.py: a store only fsspec knows
            "fastavro>=1.9",  # valueFormat=avro
            "avro>=1.11",  # tests/decode/test_avro_values.py: Apache's encoder, independent
            "protobuf>=4.22",  # valueFormat=protobuf
            # tests/decode/test_protobuf_compiled.py: classes protoc compiles, decoded alike
            "grpcio-tools>=1.60",
            # tests/write/test_json_schema_format.py: payloads validated independently
            "jsonschema>=4",
            # tests/decode/test_json_columns.py: documents orjson writes, decoded both ways
            "orjson>=3.9",
            # tests/docs: the notebook executed through a kernel, its plots drawn
            "nbclient>=0.10",
            "nbformat>=5.9",
            "ipykernel>=6.29",
            "matplotlib>=3.8",
        ],
    },
)
