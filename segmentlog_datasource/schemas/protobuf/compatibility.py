"""Compatibility of Protobuf schemas as Schema Registry checks it (its protobuf provider's
schema diff): the differences between an original schema and an update, each of a kind
that is compatible or not. BACKWARD checks the subject's schema (original) against the
new one (update); FORWARD the new one against the subject's; FULL both; the _TRANSITIVE
levels every live version, newest first, the others the latest only.

The differences, by message (matched by full name, nested ones within their enclosing
message) and field (matched by number, oneof members included):

- compatible: a message, enum, oneof or (non-required) field added or removed; a
  message moved (its index among its siblings changed); a field renamed; an enum's
  values added, removed or renamed; a field moved out of its oneof; a oneof member
  added; string <-> bytes, or their label changed.
- incompatible: the package changed; a message removed; a required field added or
  removed; a member of a oneof that still exists removed; fields that were independent
  brought into one oneof; a field's kind changed (scalar or enum / message / map); a
  scalar's type moved to another group (int32 int64 uint32 uint64 bool and enums;
  sint32 sint64; string bytes; fixed32 sfixed32; fixed64 sfixed64; float; double); a
  numeric field's label changed between explicit labels (optional, required, repeated:
  proto3's unlabeled fields, oneof members and maps have none, so `int32` <-> `repeated
  int32` passes as it does there); a message-typed field naming another message
  (compared by name within its package); map keys or values changed as fields are.
"""
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..compatibility import Incomparable, level_problem
from .descriptors import LoadedProto
from .text import (
    FILE_NAME, LABEL_REPEATED, LABEL_REQUIRED, TYPE_BOOL, TYPE_BYTES, TYPE_DOUBLE, TYPE_ENUM,
    TYPE_FIXED32, TYPE_FIXED64, TYPE_FLOAT, TYPE_GROUP, TYPE_INT32, TYPE_INT64, TYPE_MESSAGE,
    TYPE_NAMES, TYPE_SFIXED32, TYPE_SFIXED64, TYPE_SINT32, TYPE_SINT64, TYPE_STRING,
    TYPE_UINT32, TYPE_UINT64, ProtobufSchemaError,
)


# Schema Registry's names of the incompatible differences, for the reasons given
PACKAGE_CHANGED = "PACKAGE_CHANGED"
MESSAGE_REMOVED = "MESSAGE_REMOVED"
REQUIRED_FIELD_ADDED = "REQUIRED_FIELD_ADDED"
REQUIRED_FIELD_REMOVED = "REQUIRED_FIELD_REMOVED"
ONEOF_FIELD_REMOVED = "ONEOF_FIELD_REMOVED"
MULTIPLE_FIELDS_MOVED_TO_ONEOF = "MULTIPLE_FIELDS_MOVED_TO_ONEOF"
FIELD_MOVED_TO_EXISTING_ONEOF = "FIELD_MOVED_TO_EXISTING_ONEOF"
FIELD_KIND_CHANGED = "FIELD_KIND_CHANGED"
FIELD_SCALAR_KIND_CHANGED = "FIELD_SCALAR_KIND_CHANGED"
FIELD_NUMERIC_LABEL_CHANGED = "FIELD_NUMERIC_LABEL_CHANGED"
FIELD_NAMED_TYPE_CHANGED = "FIELD_NAMED_TYPE_CHANGED"

# Scalar types that read each other's wire values (Protobuf's "updating a message type")
_SCALAR_GROUPS = {
    TYPE_INT32: "varint", TYPE_INT64: "varint", TYPE_UINT32: "varint",
    TYPE_UINT64: "varint", TYPE_BOOL: "varint", TYPE_ENUM: "varint",
    TYPE_SINT32: "zigzag", TYPE_SINT64: "zigzag",
    TYPE_STRING: "length-delimited", TYPE_BYTES: "length-delimited",
    TYPE_FIXED32: "fixed32", TYPE_SFIXED32: "fixed32",
    TYPE_FIXED64: "fixed64", TYPE_SFIXED64: "fixed64",
    TYPE_FLOAT: "float", TYPE_DOUBLE: "double",
}


@dataclass(frozen=True)
class Difference:
    """One incompatible difference: Schema Registry's name of it, where, and what."""

    kind: str
    where: str
    what: str

    def __str__(self) -> str:
        return f"{self.where}: {self.what} ({self.kind})"


class _Schema:
    """A schema text loaded, its file as the pool resolved it, and its messages by full
    name (map entries among them, for the map fields)."""

    def __init__(self, text: str, name: str):
        self.name = name
        self.loaded = LoadedProto(text, FILE_NAME, name)
        self.file = self.loaded.resolved()
        self.proto3 = self.file.syntax == "proto3"

    def message(self, type_name: str):
        try:
            return self.loaded.pool.FindMessageTypeByName(type_name.lstrip("."))
        except KeyError:
            return None


class _Field:
    """A field as the diff sees it: its label as the text writes it (None when it writes
    none), its kind (scalar, message, map) and type."""

    def __init__(self, proto, schema: _Schema, oneof: Optional[str]):
        self.proto = proto
        self.name = proto.name
        self.number = proto.number
        self.oneof = oneof
        self.type = proto.type
        self.type_name = proto.type_name
        entry = schema.message(proto.type_name) if proto.type == TYPE_MESSAGE else None
        self.map = entry is not None and entry.GetOptions().map_entry
        if self.map:
            key, value = (entry.fields_by_name[n] for n in ("key", "value"))
            self.key = (key.type, key.message_type.full_name if key.message_type else "")
            self.value = (value.type, value.message_type.full_name if value.message_type
                          else value.enum_type.full_name if value.enum_type else "")
            self.label = None
        elif oneof is not None:
            self.label = None
        elif proto.label == LABEL_REPEATED:
            self.label = "repeated"
        elif proto.label == LABEL_REQUIRED:
            self.label = "required"
        else:
            self.label = "optional" if proto.proto3_optional or not schema.proto3 else None

    def describe(self) -> str:
        return f"field {self.number} ({self.name})"


def _kind(type_number: int) -> str:
    return "message" if type_number in (TYPE_MESSAGE, TYPE_GROUP) else "scalar"


def _type_text(type_number: int, type_name: str) -> str:
    if type_number in (TYPE_MESSAGE, TYPE_GROUP, TYPE_ENUM):
        return ("enum " if type_number == TYPE_ENUM else "message ") + type_name.lstrip(".")
    return TYPE_NAMES[type_number]


class _Diff:
    """The incompatible differences from `original` to `update`."""

    def __init__(self, original: _Schema, update: _Schema):
        self.original, self.update = original, update
        self.found: List[Difference] = []

    def add(self, kind: str, where: str, what: str):
        self.found.append(Difference(kind, where, what))

    def run(self) -> List[Difference]:
        o, u = self.original.file, self.update.file
        if o.package != u.package:
            self.add(PACKAGE_CHANGED, "the file",
                     f"package {o.package or '(none)'!r} in {self.original.name} and "
                     f"{u.package or '(none)'!r} in {self.update.name}")
        self.messages(list(o.message_type), list(u.message_type), o.package)
        return self.found

    def messages(self, original, update, scope: str):
        """Messages matched by name; enums never make a difference that matters."""
        originals = {m.name: m for m in original if not m.options.map_entry}
        updates = {m.name: m for m in update if not m.options.map_entry}
        for name in sorted(set(originals) | set(updates)):
            full = f"{scope}.{name}" if scope else name
            if name not in updates:
                self.add(MESSAGE_REMOVED, f"message {full}",
                         f"in {self.original.name} and not in {self.update.name}")
            elif name in originals:
                self.message(originals[name], updates[name], full)

    def fields(self, message, schema: _Schema) -> Dict[int, _Field]:
        real = {f.oneof_index for f in message.field
                if f.HasField("oneof_index") and not f.proto3_optional}
        return {f.number: _Field(f, schema, message.oneof_decl[f.oneof_index].name
                                 if f.HasField("oneof_index") and f.oneof_index in real
                                 else None)
                for f in message.field}

    def message(self, original, update, full: str):
        where = f"message {full}"
        before = self.fields(original, self.original)
        after = self.fields(update, self.update)
        oneofs_before = {f.oneof for f in before.values() if f.oneof}
        oneofs_after = {f.oneof for f in after.values() if f.oneof}
        # a oneof gone with all of its members is a compatible deletion
        deleted = {name for name in oneofs_before - oneofs_after
                   if not any(f.oneof == name and number in after
                              for number, f in before.items())}
        for oneof in sorted(oneofs_after):
            groups, moved_in = set(), 0
            for number, field in after.items():
                if field.oneof != oneof or number not in before:
                    continue
                was = before[number]
                if was.oneof is not None:
                    groups.add(("oneof", was.oneof))
                else:
                    groups.add(("field", number))
                    moved_in += 1
            if len(groups) > 1:
                if moved_in > 1:
                    self.add(MULTIPLE_FIELDS_MOVED_TO_ONEOF, f"{where} oneof {oneof}",
                             f"fields that were independent in {self.original.name} are "
                             f"members of it in {self.update.name}")
                else:
                    self.add(FIELD_MOVED_TO_EXISTING_ONEOF, f"{where} oneof {oneof}",
                             f"a field outside it in {self.original.name} is one of its "
                             f"members in {self.update.name}, beside members it had")
        for number in sorted(set(before) | set(after)):
            was, now = before.get(number), after.get(number)
            if now is None:
                if was.oneof is not None:
                    if was.oneof not in deleted:
                        self.add(ONEOF_FIELD_REMOVED, f"{where} {was.describe()}",
                                 f"a member of oneof {was.oneof} in {self.original.name}, "
                                 f"missing from {self.update.name}")
                elif was.label == "required":
                    self.add(REQUIRED_FIELD_REMOVED, f"{where} {was.describe()}",
                             f"required in {self.original.name}, missing from "
                             f"{self.update.name}")
            elif was is None:
                if now.oneof is None and now.label == "required":
                    self.add(REQUIRED_FIELD_ADDED, f"{where} {now.describe()}",
                             f"required in {self.update.name}, missing from "
                             f"{self.original.name}")
            else:
                self.field(was, now, f"{where} {now.describe()}")
        self.messages(list(original.nested_type), list(update.nested_type), full)

    def field(self, was: _Field, now: _Field, where: str):
        if was.map or now.map:
            if not (was.map and now.map):
                self.add(FIELD_KIND_CHANGED, where,
                         f"{'a map' if was.map else _kind(was.type)} in "
                         f"{self.original.name} and {'a map' if now.map else _kind(now.type)} "
                         f"in {self.update.name}")
                return
            self.typed(None, None, *was.key, *now.key, f"{where} key")
            self.typed(None, None, *was.value, *now.value, f"{where} value")
            return
        self.typed(was.label, now.label, was.type, was.type_name, now.type, now.type_name,
                   where)

    def typed(self, label_before, label_after, type_before: int, name_before: str,
              type_after: int, name_after: str, where: str):
        if _kind(type_before) != _kind(type_after):
            self.add(FIELD_KIND_CHANGED, where,
                     f"{_type_text(type_before, name_before)} in {self.original.name} and "
                     f"{_type_text(type_after, name_after)} in {self.update.name}")
            return
        if _kind(type_before) == "message":
            local_before = self.local_name(self.original, name_before)
            local_after = self.local_name(self.update, name_after)
            if local_before != local_after:
                self.add(FIELD_NAMED_TYPE_CHANGED, where,
                         f"{_type_text(type_before, name_before)} in {self.original.name} "
                         f"and {_type_text(type_after, name_after)} in {self.update.name}")
            return
        group_before, group_after = _SCALAR_GROUPS[type_before], _SCALAR_GROUPS[type_after]
        if group_before != group_after:
            self.add(FIELD_SCALAR_KIND_CHANGED, where,
                     f"{_type_text(type_before, name_before)} in {self.original.name} and "
                     f"{_type_text(type_after, name_after)} in {self.update.name}, types that "
                     f"do not read each other's values")
        elif label_before is not None and label_after is not None \
                and label_before != label_after and group_before != "length-delimited":
            self.add(FIELD_NUMERIC_LABEL_CHANGED, where,
                     f"{label_before} in {self.original.name} and {label_after} in "
                     f"{self.update.name}")

    @staticmethod
    def local_name(schema: _Schema, type_name: str) -> str:
        """A message's name within its package (`Order.Line` of `shop.Order.Line`)."""
        found = schema.message(type_name)
        if found is None:
            return type_name.lstrip(".")
        package = found.file.package
        full = found.full_name
        return full[len(package) + 1:] if package and full.startswith(package + ".") \
            else full


def incompatibilities(original_text: str, original_name: str, update_text: str,
                      update_name: str) -> List[Difference]:
    """The incompatible differences from one schema text to another; the names say
    which is which in the reasons. ProtobufSchemaError for a text that does not load."""
    return _Diff(_Schema(original_text, original_name), _Schema(update_text, update_name)).run()


def compatibility_problem(level: str, new_text: str, previous: List[Tuple[int, str]]
                          ) -> Optional[Tuple[int, str]]:
    """(version, reason) of the first earlier version `new_text` is incompatible with at
    `level` by the registry's Protobuf diff (schemas/compatibility.py's level_problem);
    None when compatible."""
    return level_problem(level, new_text, previous, _unreadable)


def _unreadable(writer: str, writer_name: str, reader: str, reader_name: str
                ) -> Optional[str]:
    """The first incompatible difference from the writer's schema to the reader's."""
    try:
        found = incompatibilities(writer, writer_name, reader, reader_name)
    except ProtobufSchemaError as failure:
        raise Incomparable(f"the schemas cannot be compared: {failure}") from None
    return found[0] if found else None
