"""The compiled twin of protobuf.py's row-by-row decoding: a (writer message, reader
message) pair compiled into a program that _protobufcolumns.c runs over the payloads,
filling the reader column's Arrow buffers with no Python object per record.

`compile_program` is the one place that decides whether a pair is in the compiled
decoder's scope; None sends the payloads down the pure path (the protobuf runtime's
parse, then protobuf.py's conversion). Both twins read a writer message as the reader's
by schemas/protobuf/resolution.py's rules, the program compiling each: fields matched by
number, writer fields the reader lacks skipped (but checked, as the runtime checks
them), reader fields the writer lacks given what an absent field reads as, integers
widened (a value that does not fit its column fails its row), integers and floats to
floats, strings and bytes read as each other (UTF-8 checked), a singular field read into
a repeated one, enums to their names, Timestamp and Duration to microseconds, wrappers
unwrapped, maps sorted by key. Out of scope (the pure path decides): a Timestamp-like
message whose seconds or nanos are not signed integers, proto2 groups, and any pair
resolution refuses (the pure path's error is then every row's).

The wire format is read as the runtime reads it (see _protobufcolumns.c): which payloads
fail is decided here, without the runtime. The words of a failed row's error are the pure
path's: that row alone is decoded again through it, so both twins name the same cause
(the runtime's own message for a corrupt payload, the field and value for one that does
not fit). Were the pure path to read a row the compiled one refused, the batch is decoded
by the pure path, with a warning (the twins' tests check it never happens).
"""
import warnings
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyarrow as pa

from ..schemas.protobuf.descriptors import is_repeated
from ..schemas.protobuf.mapping import DURATION_TYPE, TIMESTAMP_TYPE, UNSIGNED_64, enum_names
from ..schemas.protobuf.resolution import (
    BOOL, EMPTY, ENUM, FLOAT, INT, MAP, MESSAGE, MICROS, NULL, REPEATED, SINGULAR_TO_REPEATED,
    TEXT, WRAPPED, FieldRead, Incompatible, LeafRead, ValueRead, absent_read, field_read,
    matched_fields, null_when_absent,
)
from ..schemas.protobuf.text import (
    INT_RANGES, TYPE_BOOL, TYPE_BYTES, TYPE_DOUBLE, TYPE_ENUM, TYPE_FLOAT, TYPE_GROUP,
    TYPE_INT32, TYPE_INT64, TYPE_MESSAGE, TYPE_SFIXED32, TYPE_SFIXED64, TYPE_SINT32,
    TYPE_SINT64, TYPE_STRING,
)
from .compiled_columns import ARROW_C as _ARROW_C
from .compiled_columns import arrow_array, import_columns, load_value_decoder

# _protobufcolumns.c's enums: column kinds, field actions, program kinds, emits,
# conversions and row codes.
COL_BOOL, COL_I32, COL_I64, COL_F32, COL_F64, COL_BINARY, COL_DEC128, COL_LIST, \
    COL_STRUCT = range(1, 10)
A_SKIP, A_SLOT, A_INLINE, A_APPEND, A_APPEND_MSG, A_MAP = range(6)
P_VALIDATE, P_STRUCT, P_VALUE = range(3)
E_SLOT, E_SLOT_LIST, E_INLINE, E_INLINE_LIST, E_LIST, E_MAP, E_CONST_NULL, E_CONST, \
    E_CONST_EMPTY, E_MICROS = range(1, 11)
CV_INT, CV_FLOAT, CV_ENUM, CV_BOOL, CV_TEXT, CV_BYTES = range(1, 7)
ROW_OK, ROW_INDEXES, ROW_CORRUPT, ROW_UTF8, ROW_DEPTH, ROW_MISFIT = range(6)
# What each code says, in the words of the pure path's reasons (for the twins' tests).
ROW_REASONS = {ROW_CORRUPT: "Wire format was corrupt", ROW_UTF8: "String field had bad UTF-8",
               ROW_DEPTH: "Exceeded upb_DecodeOptions_MaxDepth"}

_SCALAR_KINDS = {pa.bool_(): COL_BOOL, pa.int32(): COL_I32, pa.int64(): COL_I64,
                 pa.float32(): COL_F32, pa.float64(): COL_F64, pa.string(): COL_BINARY,
                 pa.binary(): COL_BINARY, UNSIGNED_64: COL_DEC128,
                 TIMESTAMP_TYPE: COL_I64, DURATION_TYPE: COL_I64}
_SIGNED = {TYPE_INT32, TYPE_INT64, TYPE_SINT32, TYPE_SINT64, TYPE_SFIXED32, TYPE_SFIXED64}


class ProtobufCompiledUnavailableWarning(RuntimeWarning):
    """The compiled Protobuf decoder is not built: values decode row by row through the
    protobuf runtime alone."""


class ProtobufTwinsDisagreeWarning(RuntimeWarning):
    """The compiled decoder refused a row the pure path reads: the batch was decoded by the
    pure path (a bug of the compiled decoder: please report it with the schema)."""


class OutOfScope(Exception):
    """The message pair is not one the compiled decoder handles."""


_extension = None  # the _protobufcolumns module; False once it failed to load


def extension():
    """The built _protobufcolumns module, None when it is not built (warned once a
    process)."""
    global _extension
    if _extension is None:
        _extension = load_value_decoder(
            "_protobufcolumns", "Protobuf",
            "Protobuf values decode row by row through the protobuf runtime",
            ProtobufCompiledUnavailableWarning) or False
    return _extension or None


# ----------------------------------------------------------------------- the program

class Program:
    """A compiled (writer message, reader message) pair: decode(payloads, reason) -> (a
    pa.Array of the reader's Spark type, one error reason or None per payload)."""

    def __init__(self, module, compiler: "_Compiler", root: int, indexes: Tuple[int, ...]):
        self._module = module
        self._compiled = module.compile(compiler.columns, tuple(compiler.enums),
                                        tuple(compiler.programs), root, tuple(indexes))
        self._kinds = [kind for kind, _ in compiler.columns]
        self._children = [children for _, children in compiler.columns]
        self._types = compiler.types
        self.arrow_type = compiler.types[0]

    def run(self, payloads) -> Tuple[pa.Array, bytes]:
        """The column of `payloads` (a sequence of bytes, or value_formats.Payloads spans,
        read in place) and one code per payload (ROW_OK, or why it failed: ROW_*)."""
        if getattr(payloads, "starts", None) is not None:
            columns, codes = self._module.run_spans(self._compiled, payloads.data,
                                                    payloads.starts, payloads.ends, _ARROW_C)
        else:
            columns, codes = self._module.run(self._compiled, payloads, _ARROW_C)
        array = import_columns(columns, self.arrow_type) if _ARROW_C else self._array(columns, 0)
        array.validate()
        return array, codes

    def decode(self, payloads, reason
               ) -> Optional[Tuple[pa.Array, Optional[List[Optional[str]]]]]:
        """The column and each payload's error (None for the errors when every payload
        decoded), the reason of a failed one given by `reason(payload)` (the pure path's,
        None when it reads the payload); None when the pure path must decode the payloads
        (a column past Arrow's 2 GiB, or a row the twins disagree on)."""
        try:
            array, codes = self.run(payloads)
        except MemoryError:  # a column past Arrow's 2 GiB offsets: the pure path's lists
            return None
        failed = np.frombuffer(codes, np.uint8)
        if not failed.any():  # every row read: the common case (a vector test, not a count)
            return array, None
        errors: List[Optional[str]] = [None] * len(array)
        for row in np.flatnonzero(failed).tolist():
            why = reason(payloads[row])
            if why is None:
                warnings.warn(f"the compiled Protobuf decoder refused payload {row} of a "
                              f"batch (code {codes[row]}), which the protobuf runtime reads: "
                              f"the batch was decoded row by row",
                              ProtobufTwinsDisagreeWarning, stacklevel=2)
                return None
            errors[row] = why
        return array, errors

    def _array(self, columns, index) -> pa.Array:
        return arrow_array(columns, index, self._types, self._children)

# ----------------------------------------------------------------------- compiling

def _checks_utf8(field) -> bool:
    """Whether the runtime checks the field's strings as UTF-8 when it parses them (proto3
    files do, proto2 ones do not)."""
    from google.protobuf import descriptor_pb2

    try:
        features = field._GetFeatures()
    except AttributeError:  # a runtime without editions' features: not mirrored here
        raise OutOfScope("the runtime does not say how it checks strings") from None
    return features.utf8_validation == descriptor_pb2.FeatureSet.VERIFY


def _closed_numbers(field) -> Optional[Tuple[int, ...]]:
    """A closed (proto2) enum field's numbers: any other is an unknown field to the
    runtime; None for an open enum or another type."""
    if field.type != TYPE_ENUM:
        return None
    try:
        closed = field.enum_type.is_closed
    except AttributeError:
        raise OutOfScope("the runtime does not say whether an enum is closed") from None
    return tuple(sorted({value.number for value in field.enum_type.values})) if closed else None


def _signed_bits(value: int) -> int:
    """An integer as the C program's int64 holds it (a uint64 by its bits)."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _raw(field, value):
    """A writer field's value (its default) as a slot holds it."""
    kind = field.type
    if kind == TYPE_STRING:
        return value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if kind == TYPE_BYTES:
        return bytes(value)
    if kind in (TYPE_FLOAT, TYPE_DOUBLE):
        return float(value)
    if kind in INT_RANGES or kind in (TYPE_ENUM, TYPE_BOOL):
        return _signed_bits(int(value))
    raise OutOfScope(f"a default of type {kind}")


class _Frame:
    """The slots of one program's frame, handed out in order."""

    def __init__(self):
        self.slots = 0

    def take(self, count: int) -> int:
        first = self.slots
        self.slots += count
        return first


class _Compiler:
    def __init__(self):
        self.columns: List[Tuple[int, tuple]] = []
        self.types: List[pa.DataType] = []
        self.enums: List[tuple] = []
        self._enum_index: Dict[str, int] = {}
        self.programs: List[Optional[tuple]] = []
        self._validators: Dict[str, int] = {}

    # -- the reader's columns, from its Arrow type
    def column(self, arrow_type: pa.DataType) -> int:
        index = len(self.columns)
        self.columns.append(None)
        self.types.append(arrow_type)
        if pa.types.is_struct(arrow_type):
            kind = COL_STRUCT
            children = tuple(self.column(arrow_type.field(k).type)
                             for k in range(arrow_type.num_fields))
        elif pa.types.is_map(arrow_type):
            kind = COL_LIST
            entries = pa.struct([arrow_type.key_field, arrow_type.item_field])
            children = (self.column(entries),)
        elif pa.types.is_list(arrow_type):
            kind, children = COL_LIST, (self.column(arrow_type.value_type),)
        elif arrow_type in _SCALAR_KINDS:
            kind, children = _SCALAR_KINDS[arrow_type], ()
        else:
            raise OutOfScope(f"a column of {arrow_type}")
        self.columns[index] = (kind, children)
        return index

    def _new_program(self) -> int:
        self.programs.append(None)
        return len(self.programs) - 1

    def _nslots(self, program: int) -> int:
        return self.programs[program][2]

    def enum(self, enum) -> int:
        """The table of a reader enum's names: the first name of each number."""
        if enum.full_name not in self._enum_index:
            self._enum_index[enum.full_name] = len(self.enums)
            self.enums.append((enum.name.encode("utf-8"), tuple(
                (number, name.encode("utf-8"))
                for number, name in sorted(enum_names(enum).items()))))
        return self._enum_index[enum.full_name]

    # -- writer fields
    def _entry(self, field, action, oneof=-1, slot=0, sub=-1, col=-1, conv=None):
        if field.type == TYPE_GROUP:
            raise OutOfScope("a proto2 group")
        repeated = is_repeated(field)
        packable = repeated and field.type not in (TYPE_STRING, TYPE_BYTES, TYPE_MESSAGE)
        utf8 = field.type == TYPE_STRING and _checks_utf8(field)
        if field.type == TYPE_MESSAGE and sub < 0:
            sub = self.validator(field.message_type)
        return (field.number, field.type, int(repeated), int(packable), int(utf8), action,
                oneof, slot, sub, col, conv, _closed_numbers(field))

    def validator(self, message) -> int:
        """The program that reads a writer message's bytes and only checks them, as the
        runtime parses a field the reader does not take."""
        found = self._validators.get(message.full_name)
        if found is not None:
            return found
        index = self._new_program()
        self._validators[message.full_name] = index
        fields = tuple(self._entry(field, A_SKIP)
                       for field in sorted(message.fields, key=lambda f: f.number))
        self.programs[index] = (P_VALIDATE, -1, 0, fields, ())
        return index

    @staticmethod
    def _oneof_slots(message, frame: _Frame) -> Dict[str, int]:
        """A slot per oneof of two members or more: which member is set (setting one
        unsets the others)."""
        return {oneof.full_name: frame.take(1) for oneof in message.oneofs
                if len(oneof.fields) > 1}

    @staticmethod
    def _oneof_of(field, slots) -> int:
        oneof = field.containing_oneof
        return slots.get(oneof.full_name, -1) if oneof is not None else -1

    # -- programs
    def struct_program(self, writer, reader, col: int) -> int:
        """The program reading writer message `writer` into column `col`, a struct of
        reader message `reader` (resolution.matched_fields)."""
        index = self._new_program()
        frame = _Frame()
        oneofs = self._oneof_slots(writer, frame)
        children = self.columns[col][1]
        matched = matched_fields(writer, reader)
        names = [self.types[col].field(k).name for k in range(self.types[col].num_fields)]
        if [field.name for field, _ in matched] != names or len(children) != len(matched):
            raise OutOfScope("the column's struct is not the reader message's fields")
        entries, emits = {}, []
        for (field, written), child in zip(matched, children):
            if written is None:
                emits.append(self.absent(field, child))
                continue
            entry, emit = self.field(frame, written, field, child, self._oneof_of(written, oneofs))
            entries[written.number] = entry
            emits.append(emit)
        for written in writer.fields:
            if written.number not in entries:
                entries[written.number] = self._entry(written, A_SKIP,
                                                      self._oneof_of(written, oneofs))
        fields = tuple(entries[number] for number in sorted(entries))
        self.programs[index] = (P_STRUCT, col, frame.slots, fields, tuple(emits))
        return index

    def absent(self, field, col: int) -> tuple:
        """What a reader field the writer lacks appends (resolution.absent_read)."""
        read = absent_read(field)
        if read == EMPTY:
            return _emit(E_CONST_EMPTY, col)
        if read == NULL:
            return _emit(E_CONST_NULL, col)
        if field.type == TYPE_ENUM:  # its name
            value = enum_names(field.enum_type)[field.default_value].encode("utf-8")
        else:
            value = _raw(field, field.default_value)
        return _emit(E_CONST, col, dflt=value)

    def field(self, frame: _Frame, writer, reader, col: int, oneof: int):
        """(the writer field's entry, the reader field's emit): resolution.field_read."""
        read = field_read(writer, reader)
        if read.shape == MAP:
            return self.map_field(frame, writer, read, col)
        presence = int(null_when_absent(writer))
        if read.shape in (REPEATED, SINGULAR_TO_REPEATED):
            child = self.columns[col][1][0]
            kind, element = self.single(read.element, child)
            if read.shape == REPEATED:
                if kind == "conv":
                    return self._entry(writer, A_APPEND, col=child, conv=element), \
                        _emit(E_LIST, col)
                return self._entry(writer, A_APPEND_MSG, sub=element), _emit(E_LIST, col)
            if kind == "conv":
                slot = frame.take(1)
                return self._entry(writer, A_SLOT, oneof, slot), _emit(
                    E_SLOT_LIST, col, slot, presence=presence, conv=element,
                    dflt=_raw(writer, writer.default_value))
            base = frame.take(1 + self._nslots(element))
            return self._entry(writer, A_INLINE, oneof, base, element), _emit(
                E_INLINE_LIST, col, base, sub=element, presence=presence)
        kind, element = self.single(read.element, col)
        if kind == "conv":
            slot = frame.take(1)
            return self._entry(writer, A_SLOT, oneof, slot), _emit(
                E_SLOT, col, slot, presence=presence, conv=element,
                dflt=_raw(writer, writer.default_value))
        base = frame.take(1 + self._nslots(element))
        return self._entry(writer, A_INLINE, oneof, base, element), _emit(
            E_INLINE, col, base, sub=element, presence=presence)

    def map_field(self, frame: _Frame, writer, read: FieldRead, col: int):
        """A map: each entry's key read when it comes (an entry holding an unknown field is
        dropped, as the runtime drops it), the entries read again, sorted by key, when the
        message ends."""
        entries_col = self.columns[col][1][0]
        key_col, value_col = self.columns[entries_col][1]
        wkey, wvalue = (writer.message_type.fields_by_name[n] for n in ("key", "value"))
        kind, key_conv = self.single(read.key, key_col)
        if kind != "conv":
            raise OutOfScope("a map key of a message")
        others = [f for f in writer.message_type.fields if f.number not in (1, 2)]
        # the first read: the key alone, the value checked
        arrival = self._new_program()
        fields = [self._entry(wkey, A_SLOT, slot=0), self._entry(wvalue, A_SKIP)]
        fields += [self._entry(f, A_SKIP) for f in others]
        self.programs[arrival] = (P_VALIDATE, -1, 1, tuple(sorted(fields)), ())
        # the second: key and value into their columns (an absent value reads as its
        # default: the runtime gives an entry's absent message as an empty one)
        second = self._new_program()
        entry_frame = _Frame()
        key_slot = entry_frame.take(1)
        value_kind, value = self.single(read.value, value_col)
        emits = [_emit(E_SLOT, key_col, key_slot, conv=key_conv,
                       dflt=_raw(wkey, wkey.default_value))]
        if value_kind == "conv":
            value_slot = entry_frame.take(1)
            fields = [self._entry(wkey, A_SLOT, slot=key_slot),
                      self._entry(wvalue, A_SLOT, slot=value_slot)]
            emits.append(_emit(E_SLOT, value_col, value_slot, conv=value,
                               dflt=_raw(wvalue, wvalue.default_value)))
        else:
            base = entry_frame.take(1 + self._nslots(value))
            fields = [self._entry(wkey, A_SLOT, slot=key_slot),
                      self._entry(wvalue, A_INLINE, slot=base, sub=value)]
            emits.append(_emit(E_INLINE, value_col, base, sub=value))
        fields += [self._entry(f, A_SKIP) for f in others]
        self.programs[second] = (P_STRUCT, entries_col, entry_frame.slots,
                                 tuple(sorted(fields)), tuple(emits))
        slot = frame.take(1)
        return self._entry(writer, A_MAP, slot=slot, sub=arrival), \
            _emit(E_MAP, col, slot, sub=second, key_type=wkey.type)

    def single(self, read: ValueRead, col: int):
        """("conv", a conversion) of a scalar, or ("program", a program) of a message: one
        value read as resolution.value_read says."""
        if read.how == MICROS:
            return "program", self.micros_program(read.writer.message_type, col)
        if read.how == MESSAGE:
            return "program", self.struct_program(read.writer.message_type,
                                                  read.reader.message_type, col)
        if read.how == WRAPPED:
            return "program", self.wrapper_program(read.writer.message_type, read.leaf, col)
        return "conv", self.leaf(read.leaf)

    def _value_program(self, message, kept: Dict[int, Tuple[int, int]], emit_of) -> int:
        """A program reading a small message into one value: `kept` field numbers ->
        (slot, conversion or None); emit_of(slots) its emit."""
        index = self._new_program()
        frame = _Frame()
        oneofs = self._oneof_slots(message, frame)
        slots = {number: frame.take(1) for number in kept}
        fields = []
        for field in sorted(message.fields, key=lambda f: f.number):
            oneof = self._oneof_of(field, oneofs)
            if field.number in slots:
                if is_repeated(field) or field.type == TYPE_MESSAGE:
                    raise OutOfScope(f"{message.full_name}.{field.name} is not a scalar")
                fields.append(self._entry(field, A_SLOT, oneof, slots[field.number]))
            else:
                fields.append(self._entry(field, A_SKIP, oneof))
        col = emit_of(slots)
        self.programs[index] = (P_VALUE, col[1], frame.slots, tuple(fields), (col,))
        return index

    def micros_program(self, message, col: int) -> int:
        """Timestamp or Duration (a message named so, of fields seconds and nanos) as
        microseconds: seconds * 1,000,000 + nanos // 1000 (_micros)."""
        seconds, nanos = (message.fields_by_name[n] for n in ("seconds", "nanos"))
        for part in (seconds, nanos):
            if part.type not in _SIGNED or is_repeated(part):
                raise OutOfScope(f"{message.full_name}.{part.name} is not a signed integer")
        if self.columns[col][0] != COL_I64:
            raise OutOfScope("microseconds into a column other than int64")
        return self._value_program(message, {seconds.number: None, nanos.number: None},
                                   lambda slots: _emit(
                                       E_MICROS, col, slots[seconds.number], slots[nanos.number],
                                       dflt=int(seconds.default_value),
                                       dflt2=int(nanos.default_value)))

    def wrapper_program(self, message, read: LeafRead, col: int) -> int:
        """A wrapper message's value (absent: its default) read as `read` says."""
        value = message.fields_by_name["value"]
        conv = self.leaf(read)
        return self._value_program(message, {value.number: conv}, lambda slots: _emit(
            E_SLOT, col, slots[value.number], conv=conv, dflt=_raw(value, value.default_value)))

    def leaf(self, read: LeafRead) -> tuple:
        """A scalar or enum's conversion, as resolution.leaf_read says."""
        wtype = read.writer.type
        if read.how == ENUM:
            return (CV_ENUM, wtype, 0, self.enum(read.reader.enum_type))
        if read.how == INT:
            return (CV_INT, wtype, 0, -1)
        if read.how == FLOAT:
            return (CV_FLOAT, wtype, 0, -1)
        if read.how == BOOL:
            return (CV_BOOL, wtype, 0, -1)
        if read.how == TEXT:  # bytes, or a string the runtime did not check: checked here
            return (CV_TEXT, wtype, int(wtype == TYPE_BYTES or not _checks_utf8(read.writer)),
                    -1)
        return (CV_BYTES, wtype, 0, -1)


def _emit(op, col, slot=-1, slot2=-1, sub=-1, presence=0, key_type=0, conv=None, dflt=None,
          dflt2=None) -> tuple:
    return (op, col, slot, slot2, sub, presence, key_type, conv, dflt, dflt2)


def compile_program(writer, reader, indexes: Sequence[int], arrow_type: pa.DataType
                    ) -> Optional[Program]:
    """The compiled program reading payloads whose message indexes are `indexes` (naming
    writer message `writer`) into column `arrow_type` of reader message `reader`; None
    when the pair is out of scope or the extension is not built."""
    module = extension()
    if module is None:
        return None
    compiler = _Compiler()
    try:
        root = compiler.struct_program(writer, reader, compiler.column(arrow_type))
    except (OutOfScope, Incompatible):  # the pure path says why, every row
        return None
    return Program(module, compiler, root, tuple(indexes))

