"""Protobuf schemas loaded into the protobuf runtime: a .proto text (parsed by text.py)
in its own DescriptorPool with the files it imports (another registered subject's text, by
reference name, and google/protobuf/*.proto from the runtime's own well-known types), and
the messages of a file, found by full name or by Confluent's message indexes.

Message indexes: the first index into the file's top-level messages, each next one into
the nested messages of the one before (a map field's entry message is not counted:
Confluent counts the messages the source declares). Their bytes in a payload (zig-zag
varints after the schema id) are read by decode/protobuf.py and written by
writer/protobuf_schema.py.
"""
import functools
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .text import (
    FILE_NAME, LABEL_REPEATED, LABEL_REQUIRED, TYPE_ENUM, TYPE_MESSAGE, TYPE_NAMES,
    ProtobufSchemaError, parse_proto,
)

# The runtime modules holding the well-known .proto files a schema may import.
WELL_KNOWN = {
    "google/protobuf/any.proto": "any_pb2", "google/protobuf/api.proto": "api_pb2",
    "google/protobuf/descriptor.proto": "descriptor_pb2",
    "google/protobuf/duration.proto": "duration_pb2", "google/protobuf/empty.proto": "empty_pb2",
    "google/protobuf/field_mask.proto": "field_mask_pb2",
    "google/protobuf/source_context.proto": "source_context_pb2",
    "google/protobuf/struct.proto": "struct_pb2",
    "google/protobuf/timestamp.proto": "timestamp_pb2", "google/protobuf/type.proto": "type_pb2",
    "google/protobuf/wrappers.proto": "wrappers_pb2",
}


# Loading ------------------------------------------------------------------------------


def runtime_file(name: str):
    """The FileDescriptorProto of a well-known .proto the protobuf runtime ships."""
    import importlib

    from google.protobuf import descriptor_pb2

    module = importlib.import_module("google.protobuf." + WELL_KNOWN[name])
    return descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)


class LoadedProto:
    """A .proto text loaded in its own DescriptorPool as file `file_name`, with the files
    it imports: those of `references` (import name -> (text, what it is, for errors)),
    and the well-known ones the runtime ships. An import that is neither is left out, and
    the types it would declare fail to resolve, naming it. ProtobufSchemaError naming
    `where` for a text that does not parse or load."""

    def __init__(self, text: str, file_name: str, where: str,
                 references: Optional[Dict[str, Tuple[str, str]]] = None):
        from google.protobuf import descriptor_pool

        self.where = where
        self.pool = descriptor_pool.DescriptorPool()
        self._files: Dict[str, object] = {}  # file name -> FileDescriptorProto, as added
        self._references = references or {}
        self._pending: List[str] = []
        self.file = self._load(file_name, text, where)

    def _load(self, name: str, text: str, where: str):
        if name in self._files:
            return self._files[name]
        if name in self._pending:
            raise ProtobufSchemaError(f"{self.where}: {name!r} imports itself (through "
                                      f"{' -> '.join(self._pending)})")
        self._pending.append(name)
        proto = parse_proto(text, name, where)
        kept = []
        for dependency in proto.dependency:
            if dependency in self._references:
                referenced, what = self._references[dependency]
                self._load(dependency, referenced, f"{where}: referenced {what}")
            elif dependency in WELL_KNOWN:
                self._add_runtime(dependency)
            else:
                continue  # not given: its types fail to resolve, naming it below
            kept.append(dependency)
        missing = [d for d in proto.dependency if d not in kept]
        if missing:
            del proto.dependency[:]
            proto.dependency.extend(kept)
            del proto.public_dependency[:]
        try:
            self.pool.Add(proto)
        except Exception as failure:  # the runtime's TypeError, from C or Python
            unresolved = f" (imports {', '.join(map(repr, missing))} are not among its " \
                         f"references)" if missing else ""
            raise ProtobufSchemaError(f"{where}: the .proto file does not load{unresolved}: "
                                      f"{failure}") from None
        self._pending.pop()
        self._files[name] = proto
        return proto

    def _add_runtime(self, name: str):
        if name in self._files:
            return
        proto = runtime_file(name)
        for dependency in proto.dependency:
            self._add_runtime(dependency)
        self.pool.Add(proto)
        self._files[name] = proto

    def resolved(self):
        """The file's FileDescriptorProto as the pool resolved it: type names in full
        (with a leading dot), and each named type's kind (message or enum) set."""
        from google.protobuf import descriptor_pb2

        resolved = descriptor_pb2.FileDescriptorProto()
        self.pool.FindFileByName(self.file.name).CopyToProto(resolved)
        return resolved

    def message_names(self) -> List[str]:
        """The full names of the file's top-level messages, in order."""
        prefix = f"{self.file.package}." if self.file.package else ""
        return [prefix + message.name for message in self.file.message_type]

    def by_indexes(self, indexes: Sequence[int]):
        """The message descriptor the message indexes name; ValueError saying why none."""
        messages, path = list(self.file.message_type), self.file.package
        for depth, index in enumerate(indexes):
            if not 0 <= index < len(messages):
                where = f"message {path}" if depth else "the file"
                raise ValueError(f"bad message indexes {list(indexes)}: {where} has "
                                 f"{len(messages)} message(s) at index {depth}, and "
                                 f"{index} is not one")
            path = f"{path}.{messages[index].name}" if path else messages[index].name
            # the messages the text declares: a map field's entry is not one (Confluent
            # counts the parsed source's nested messages)
            messages = [m for m in messages[index].nested_type if not m.options.map_entry]
        return self.pool.FindMessageTypeByName(path)

    def indexes_of(self, full_name: str) -> Optional[Tuple[int, ...]]:
        """The message indexes that name message `full_name` (by_indexes's inverse); None
        when the file does not declare it (a message of a file it imports)."""
        def walk(messages, path, prefix):
            for index, message in enumerate(messages):
                name = f"{prefix}.{message.name}" if prefix else message.name
                if name == full_name:
                    return path + (index,)
                found = walk([m for m in message.nested_type if not m.options.map_entry],
                             path + (index,), name)
                if found is not None:
                    return found
            return None

        return walk(list(self.file.message_type), (), self.file.package)

    def by_name(self, name: str):
        """The message named `name`, fully or without the file's package."""
        candidates = [name.lstrip(".")]
        if self.file.package:
            candidates.append(f"{self.file.package}.{name.lstrip('.')}")
        for candidate in candidates:
            try:
                return self.pool.FindMessageTypeByName(candidate)
            except KeyError:
                continue
        return None


# Registered schemas ----------------------------------------------------------------


def describe(schema) -> str:
    return f"subject {schema.subject!r} version {schema.version} (schema id {schema.id})"


class LoadedSchema(LoadedProto):
    """A registered Protobuf schema loaded in its own DescriptorPool, with the files it
    references (by reference name) and the well-known ones it imports."""

    def __init__(self, registered, references: Dict[str, Any]):
        self.registered = registered
        own = f"{registered.subject}.proto"
        if own in references:
            own = f"{own}.{registered.id}"
        texts = {name: (schema.schema, f"schema {describe(schema)}")
                 for name, schema in references.items()}
        super().__init__(registered.schema, own, describe(registered), texts)


def load_registered(registered, registry) -> LoadedSchema:
    """A registered schema loaded with the schemas it references (`registry`'s
    named_references)."""
    references = registry.named_references(registered) \
        if registry is not None and registered.references else {}
    return LoadedSchema(registered, references)


@functools.lru_cache(maxsize=64)
def load_text(text: str, where: str = "the schema") -> LoadedProto:
    """A schema text that imports only well-known files, loaded as FILE_NAME (kept, per
    process, for the next call with the same text)."""
    return LoadedProto(text, FILE_NAME, where)


# Descriptors ---------------------------------------------------------------------------


def is_map(field) -> bool:
    return field.type == TYPE_MESSAGE and field.message_type.GetOptions().map_entry


def is_repeated(field) -> bool:
    try:
        return field.is_repeated  # protobuf 5.28+; `label` is gone from 7
    except AttributeError:
        return field.label == LABEL_REPEATED


def is_required(field) -> bool:
    try:
        return field.is_required
    except AttributeError:
        return field.label == LABEL_REQUIRED


def kind_name(field) -> str:
    """What a field holds, for messages: `a map`, `message <name>`, `enum <name>`, or its
    scalar type."""
    if field.type == TYPE_MESSAGE:
        if is_map(field):
            return "a map"
        return f"message {field.message_type.full_name}"
    if field.type == TYPE_ENUM:
        return f"enum {field.enum_type.full_name}"
    return TYPE_NAMES.get(field.type, str(field.type))
