"""What the compiled decoder and encoder are built from: their C sources and the Python
values compiled into each.

setup.py runs this file with runpy (it imports nothing from the package, and the files
it reads import nothing but struct), and compiled.py imports it: both compute the same
SOURCE_SHA256, so a checkout run loads a build only when it was made from the
checkout's own C source and values.
"""
import hashlib
import os
import runpy

HERE = os.path.dirname(os.path.abspath(__file__))
C_SOURCE = "_fastrecords.c"

# The names the C code takes as macros, per Python file (relative to this directory)
# that defines them. _fastrecords.c stops with #error when one is missing and exports
# each as a module constant.
COMPILED_CONSTANTS = {
    os.path.join(os.pardir, "layout.py"): (
        "LOG_OVERHEAD", "V2_HEADER_SIZE",
        "V2_BASE_OFFSET", "V2_LENGTH", "V2_MAGIC", "V2_CRC", "V2_ATTRIBUTES",
        "V2_LAST_OFFSET_DELTA", "V2_BASE_TIMESTAMP", "V2_MAX_TIMESTAMP", "V2_RECORD_COUNT",
        "V2_CRC_START", "V2_LEADER_EPOCH", "V2_PRODUCER_ID", "V2_PRODUCER_EPOCH",
        "V2_BASE_SEQUENCE",
        "ATTR_COMPRESSION_MASK", "ATTR_TIMESTAMP_TYPE", "ATTR_TRANSACTIONAL", "ATTR_CONTROL",
        "CREATE_TIME", "LOG_APPEND_TIME",
    ),
    "protocol.py": (
        "RUN_ENTRY_FOR_PYTHON", "RUN_FLUSH", "RUN_DONE", "RUN_END",
        "ENTRY_END_ROW", "ENTRY_BASE_OFFSET", "ENTRY_PRODUCER_ID", "ENTRY_PRODUCER_EPOCH",
        "ENTRY_BASE_SEQUENCE", "ENTRY_LEADER_EPOCH", "ENTRY_ATTRIBUTES", "ENTRY_MAGIC",
        "ENTRY_POSITION", "ENTRY_CONTROL_TYPE", "ENTRY_COORDINATOR_EPOCH", "ENTRY_FIELDS",
        "NOT_CONTROL", "NO_COORDINATOR_EPOCH",
    ),
}


# The compiled encoder (_fastencode.c, compiled_encode.py): its own list, so that the
# decoder's build does not change when the encoder needs another value.
ENCODER_C_SOURCE = "_fastencode.c"
ENCODER_CONSTANTS = {
    os.path.join(os.pardir, "layout.py"): (
        "LOG_OVERHEAD", "V2_HEADER_SIZE",
        "V2_BASE_OFFSET", "V2_LENGTH", "V2_LEADER_EPOCH", "V2_MAGIC", "V2_CRC",
        "V2_ATTRIBUTES", "V2_LAST_OFFSET_DELTA", "V2_BASE_TIMESTAMP", "V2_MAX_TIMESTAMP",
        "V2_PRODUCER_ID", "V2_PRODUCER_EPOCH", "V2_BASE_SEQUENCE", "V2_RECORD_COUNT",
        "V2_CRC_START", "V2_MAGIC_VALUE",
        "NO_PRODUCER_ID", "NO_PRODUCER_EPOCH", "NO_SEQUENCE", "NO_PARTITION_LEADER_EPOCH",
    ),
}
CONSTANTS_OF = {C_SOURCE: COMPILED_CONSTANTS, ENCODER_C_SOURCE: ENCODER_CONSTANTS}
# The header both sources include (CRC32C): part of each one's source.
C_HEADERS = ("crc32c.h",)
# The header the value decoders of decode/ include (their column buffers, columns.h),
# beside them: part of each one's source.
PLAIN_C_HEADERS = ("columns.h",)


def compiled_constants(directory: str = HERE, source: str = C_SOURCE) -> dict:
    """{name: value} of every constant compiled into `source`, read from the files in
    `directory`."""
    values = {}
    for relative, names in CONSTANTS_OF[source].items():
        defined = runpy.run_path(os.path.join(directory, relative))
        for name in names:
            value = defined[name]
            if type(value) is not int:
                raise TypeError(f"{relative}: {name} = {value!r} is not an int")
            values[name] = value
    return values


def _sources_digest(directory: str, source: str, headers):
    """The sha256 (a hashlib object) of `source` and `headers` in `directory`, each
    followed by a NUL byte; None when one is not there (an installed copy)."""
    try:
        with open(os.path.join(directory, source), "rb") as text:
            digest = hashlib.sha256(text.read() + b"\0")
        for header in headers:
            with open(os.path.join(directory, header), "rb") as text:
                digest.update(text.read() + b"\0")
    except FileNotFoundError:
        return None
    return digest


def source_sha256(directory: str = HERE, source: str = C_SOURCE):
    """The sha256 of the C source in `directory`, the headers it includes (C_HEADERS) and
    the values compiled in with it; None when there is no C source there (an installed
    copy)."""
    digest = _sources_digest(directory, source, C_HEADERS)
    if digest is None:
        return None
    for name, value in sorted(compiled_constants(directory, source).items()):
        digest.update(f"\n{name}={value}".encode("ascii"))
    return digest.hexdigest()


def plain_source_sha256(directory: str, source: str):
    """The sha256 of a C source that compiles in no Python values (the value decoders of
    decode/) and of the headers it includes (PLAIN_C_HEADERS, beside it); None when it is
    not there (an installed copy)."""
    digest = _sources_digest(directory, source, PLAIN_C_HEADERS)
    return None if digest is None else digest.hexdigest()


def plain_define_macros(directory: str, source: str) -> list:
    """The macros setup.py compiles such a source with: its SOURCE_SHA256 alone."""
    return [("SEGMENTLOG_SOURCE_SHA256", f'"{plain_source_sha256(directory, source)}"')]


def define_macros(directory: str = HERE, source: str = C_SOURCE) -> list:
    """The (name, value) macros setup.py compiles the C `source` with."""
    macros = [(name, str(value))
              for name, value in compiled_constants(directory, source).items()]
    return macros + [("SEGMENTLOG_SOURCE_SHA256", f'"{source_sha256(directory, source)}"')]
