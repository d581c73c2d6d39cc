"""`segmentlog dump --print-data --decoder avro|json|protobuf`: Schema Registry framed keys
and values shown decoded with their writer's schema, as Confluent's console consumers show
them.

The frame (a zero magic byte, then the 4-byte schema id) and the registry are the same for
every format: FramedDecoder reads the frame, looks the id up (in the registry of --schemas,
or of the `_schemas` topic beside the partitions dumped, loaded at the first framed value),
checks the schema's type and keeps each writer schema loaded; a format only loads a schema
and decodes a payload with it. What cannot be decoded is shown as "undecodable: <why>", per
record.
"""
import abc
import json
from typing import Any, Callable, Dict, Optional, Tuple

from ..errors import SegmentLogError

UNDECODABLE = "undecodable: "


def decode_bytes(data: Optional[bytes], decoder):
    """Key, value or header value shown with `decoder` (a name, or a FramedDecoder);
    JSON that does not parse is shown as UTF-8 text, unless it is Schema Registry framed
    JSON."""
    if data is None:
        return None
    if callable(decoder):
        return decoder(data)
    if decoder == "hex":
        return data.hex()
    text = data.decode("utf-8", errors="replace")
    if decoder == "json":
        try:
            return json.loads(text)
        except ValueError:
            pass
        from ..decode.value_formats import FRAME_SIZE

        if len(data) > FRAME_SIZE and data[0] == 0:  # a JSON Schema serializer's value
            try:
                return json.loads(data[FRAME_SIZE:].decode("utf-8"))
            except ValueError:
                pass
    return text


class FramedDecoder(abc.ABC):
    """A framed key or value (bytes) -> a value JSON can show, or "undecodable: <why>"."""

    name: str  # the --decoder value
    schema_type: str  # the registry's schemaType of the schemas it decodes
    headers = "utf8"  # how header values are shown: they are never framed

    def __init__(self, load_registry: Optional[Callable[[], Any]]):
        self._load_registry = load_registry
        self._registry = None
        self._registry_problem: Optional[str] = None
        # schema id -> (where, the format's loaded schema), or the reason it cannot be had
        self._writers: Dict[int, Any] = {}

    def __call__(self, data: bytes):
        from ..decode.value_formats import FRAME_SIZE, frame_error

        problem = frame_error(data)
        if problem is not None:
            return self.unframed(data, problem)
        schema_id = int.from_bytes(data[1:FRAME_SIZE], "big")
        found = self._writer(schema_id)
        if isinstance(found, str):
            return UNDECODABLE + found
        where, loaded = found
        try:
            return self.decode(loaded, data[FRAME_SIZE:])
        except SegmentLogError as error:
            return f"{UNDECODABLE}{where}: {error}"
        except Exception as error:  # the format's library: a truncated or malformed payload
            return f"{UNDECODABLE}{where}: {type(error).__name__}: {error}"

    def unframed(self, data: bytes, problem: str):
        """How a payload that is not framed is shown (`problem`: why it is not)."""
        return UNDECODABLE + problem

    def _writer(self, schema_id: int):
        """(where, loaded writer schema) of `schema_id`, or why there is none (kept: each
        id is looked up and loaded once)."""
        if schema_id not in self._writers:
            try:
                registered = self.registry().by_id(schema_id)
                where = (f"schema id {schema_id} ({registered.subject} version "
                         f"{registered.version})")
                if registered.schema_type != self.schema_type:
                    raise SegmentLogError(f"{where} is a schema of type "
                                          f"{registered.schema_type}, and --decoder "
                                          f"{self.name} decodes {self.schema_type} schemas")
                self._writers[schema_id] = (where, self.load(registered, self._registry))
            except SegmentLogError as error:
                self._writers[schema_id] = str(error)
        return self._writers[schema_id]

    def registry(self):
        """The registry, loaded once; SegmentLogError (again, for every id) when it cannot
        be."""
        if self._registry is None and self._registry_problem is None:
            try:
                self._registry = self._load_registry()
            except SegmentLogError as error:
                self._registry_problem = str(error)
        if self._registry_problem is not None:
            raise SegmentLogError(self._registry_problem)
        return self._registry

    @abc.abstractmethod
    def load(self, registered, registry):
        """The format's form of the registered schema `registered` (its references resolved
        through `registry`); SegmentLogError saying why it cannot be loaded."""

    @abc.abstractmethod
    def decode(self, loaded, body: bytes):
        """The payload after the frame, decoded with `loaded` (load's result), as a value
        JSON can show."""


class FramedAvro(FramedDecoder):
    """Avro, decoded by fastavro with the writer's schema (as kafka-avro-console-consumer
    does), shown as JSON values: bytes as base64, times as ISO 8601, decimals and uuids as
    text."""

    name, schema_type = "avro", "AVRO"

    def load(self, registered, registry):
        from ..schemas.avro import parse_registered

        return parse_registered(registered, registry)[0]

    def decode(self, loaded, body: bytes):
        import io

        from fastavro import schemaless_reader

        return _jsonable(schemaless_reader(io.BytesIO(body), loaded))


class FramedJson(FramedDecoder):
    """JSON Schema: the JSON after the frame, its schema id checked in the registry (a JSON
    Schema of the registry). Values that are not framed are shown as --decoder json shows
    them without schemas: JSON, else text."""

    name, schema_type = "json", "JSON"
    headers = "json"

    def unframed(self, data: bytes, problem: str):
        return decode_bytes(data, "json")

    def load(self, registered, registry):
        return None  # the JSON text is its own value; the schema only had to be there

    def decode(self, loaded, body: bytes):
        try:
            return json.loads(body.decode("utf-8"))
        except ValueError as error:  # UnicodeDecodeError too
            raise SegmentLogError(f"invalid JSON after the schema id: {error}") from None


class FramedProtobuf(FramedDecoder):
    """Protobuf: the message the message indexes name (in the writer's .proto file),
    parsed by the protobuf runtime and shown in the runtime's JSON form (Protobuf's JSON
    mapping: 64-bit integers as strings, bytes as base64, enums by name, Timestamps as RFC
    3339), with the .proto's field names and the fields left at their defaults shown too,
    as kafka-protobuf-console-consumer shows them."""

    name, schema_type = "protobuf", "PROTOBUF"

    def load(self, registered, registry):
        from ..schemas.protobuf.descriptors import load_registered

        return _ProtobufWriter(load_registered(registered, registry))

    def decode(self, loaded, body: bytes):
        from google.protobuf import json_format

        from ..decode.protobuf import message_indexes

        try:
            indexes, start = message_indexes(body)
            message_class = loaded.message_class(indexes)
        except ValueError as bad:  # bad message indexes, or none the file declares
            raise SegmentLogError(str(bad)) from None
        try:
            message = message_class.FromString(bytes(body[start:]))
        except Exception as error:  # the runtime's DecodeError
            raise SegmentLogError(f"invalid Protobuf binary for message "
                                  f"{message_class.DESCRIPTOR.full_name} (message indexes "
                                  f"{list(indexes)}): {error}") from None
        try:  # protobuf 5.26 renamed the option
            shown = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                              always_print_fields_with_no_presence=True)
        except TypeError:
            shown = json_format.MessageToDict(message, preserving_proto_field_name=True,
                                              including_default_value_fields=True)
        return _in_field_order(shown, message_class.DESCRIPTOR)


class _ProtobufWriter:
    """A writer's loaded .proto file and the message classes of its messages, by message
    indexes."""

    def __init__(self, loaded):
        self.loaded = loaded
        self._classes: Dict[Tuple[int, ...], Any] = {}

    def message_class(self, indexes: Tuple[int, ...]):
        if indexes not in self._classes:
            from google.protobuf import message_factory

            descriptor = self.loaded.by_indexes(indexes)  # ValueError: no such message
            self._classes[indexes] = message_factory.GetMessageClass(descriptor)
        return self._classes[indexes]


def _in_field_order(shown, descriptor):
    """A message's JSON form with its fields in the order the .proto declares them (the
    runtime puts the fields at their defaults last), nested messages too."""
    if not isinstance(shown, dict) or descriptor.full_name.startswith("google.protobuf."):
        return shown  # well-known types have their own JSON forms
    ordered = {}
    for field in descriptor.fields:
        if field.name not in shown:
            continue
        value = shown[field.name]
        nested = field.message_type
        if nested is not None and nested.GetOptions().map_entry:
            value_type = nested.fields_by_name["value"].message_type
            if value_type is not None:
                value = {key: _in_field_order(item, value_type) for key, item in value.items()}
        elif nested is not None:
            value = [_in_field_order(item, nested) for item in value] \
                if isinstance(value, list) else _in_field_order(value, nested)
        ordered[field.name] = value
    ordered.update((name, value) for name, value in shown.items() if name not in ordered)
    return ordered


FRAMED_DECODERS = {decoder.name: decoder for decoder in (FramedAvro, FramedJson, FramedProtobuf)}


def _jsonable(value):
    """A decoded Avro value as JSON: bytes as base64, times as ISO 8601, decimals and
    uuids as text."""
    import base64
    import datetime as dt

    if isinstance(value, dict):
        return {key: _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)  # Decimal, UUID
