"""What the compiled value decoders (Avro, JSON Schema, Protobuf) share on the Python side:
loading their extension wherever a job starts (format/fastpath/loading.py), saying once
why when it cannot be, and turning the columns they fill (columns.h) into Arrow arrays."""
import os
import warnings

import pyarrow as pa

from ..format.fastpath.buildinfo import plain_source_sha256
from ..format.fastpath.loading import load_extension

_HERE = os.path.dirname(os.path.abspath(__file__))


def load_value_decoder(name: str, language: str, fallback: str, warning: type):
    """The built extension `name` of this package (a checkout's run takes the installed
    build of the same source), or None after warning with `warning`: why, and that
    values of `language` decode as `fallback` says."""
    try:
        return load_extension(name, name + ".c", package=__package__, here=_HERE,
                              checkout_sha256=plain_source_sha256)
    except ImportError as missing:
        warnings.warn(
            f"segmentlog's compiled {language} decoder is unavailable ({missing}); "
            f"{fallback}, several times slower. To fix it, run `pip install .` in the "
            f"segmentlog checkout with a C compiler present (or, for runs from the "
            f"checkout, `python setup.py build_ext --inplace`).", warning, stacklevel=4)
        return None


def arrow_array(columns, index: int, types, children) -> pa.Array:
    """Column `index` of a decoder's output (each column: length, null count, validity,
    values, offsets, data) as an Arrow array of `types[index]`, its layout by that type;
    `children[index]`: the indexes of its child columns (a list's, a map's, a struct's)."""
    length, nulls, validity, values, offsets, data = columns[index]
    arrow = types[index]
    if pa.types.is_null(arrow):
        return pa.nulls(length)
    validity = None if validity is None else pa.py_buffer(validity)
    if pa.types.is_binary(arrow) or pa.types.is_string(arrow):
        return pa.Array.from_buffers(arrow, length, [validity, pa.py_buffer(offsets),
                                                     pa.py_buffer(data)], nulls)
    if pa.types.is_list(arrow) or pa.types.is_map(arrow):
        child = arrow_array(columns, children[index][0], types, children)
        return pa.Array.from_buffers(arrow, length, [validity, pa.py_buffer(offsets)],
                                     nulls, children=[child])
    if pa.types.is_struct(arrow):
        return pa.Array.from_buffers(arrow, length, [validity], nulls, children=[
            arrow_array(columns, child, types, children) for child in children[index]])
    return pa.Array.from_buffers(arrow, length, [validity, pa.py_buffer(values)], nulls)


# Whether this pyarrow imports an array from Arrow's C data interface capsules: the
# decoders that can (columns.h's column_capsule) then hand their columns over in one call.
ARROW_C = hasattr(pa.Array, "_import_from_c_capsule")


def import_columns(capsule, arrow_type: pa.DataType) -> pa.Array:
    """The array of a decoder's capsule of column 0 (column_capsule), of `arrow_type`."""
    return pa.Array._import_from_c_capsule(arrow_type.__arrow_c_schema__(), capsule)
