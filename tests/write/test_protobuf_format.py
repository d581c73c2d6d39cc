"""valueFormat=protobuf writes, the language's half (writer/protobuf_schema.py): schemas
derived from Arrow types and given as .proto text, as Schema Registry stores them; their
compatibility as Schema Registry checks it; payloads checked against a message
descriptor this test builds by hand (not from the writer's .proto text) and read back
through the decode layer."""
import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

from segmentlog_datasource.errors import InvalidOptionError
from segmentlog_datasource.writer import write_log
from segmentlog_datasource.writer.errors import InvalidInputError
from segmentlog_datasource.writer.protobuf_schema import ProtobufFormat
from segmentlog_datasource.writer.schema_format import PayloadMisfit, schema_format
from support.reading import decoded_rows

F = descriptor_pb2.FieldDescriptorProto
UTC = dt.timezone.utc
PROTOBUF = ProtobufFormat()

ORDER = pa.struct([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("item", pa.string()),
    pa.field("quantity", pa.int32()),
    pa.field("price", pa.float64()),
    pa.field("paid", pa.bool_()),
    pa.field("blob", pa.binary()),
    pa.field("placed_at", pa.timestamp("us", tz="UTC")),
    pa.field("tags", pa.list_(pa.field("element", pa.string(), nullable=False))),
    pa.field("counters", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False))),
    pa.field("ship_to", pa.struct([pa.field("city", pa.string()),
                                   pa.field("zip", pa.int32(), nullable=False)])),
    pa.field("lines", pa.list_(pa.field("element", pa.struct([
        pa.field("sku", pa.string(), nullable=False),
        pa.field("count", pa.int32(), nullable=False)]), nullable=False))),
])

ORDER_PROTO = """syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";

message Order {
  int64 id = 1;
  optional string item = 2;
  optional int32 quantity = 3;
  optional double price = 4;
  optional bool paid = 5;
  optional bytes blob = 6;
  google.protobuf.Timestamp placed_at = 7;
  repeated string tags = 8;
  map<string, int64> counters = 9;
  ShipTo ship_to = 10;
  repeated Lines lines = 11;

  message ShipTo {
    optional string city = 1;
    int32 zip = 2;
  }
  message Lines {
    string sku = 1;
    int32 count = 2;
  }
}
"""

ROWS = [
    {"id": 1, "item": "tea", "quantity": 3, "price": 3.5, "paid": True, "blob": b"\x00\xff",
     "placed_at": dt.datetime(2024, 1, 2, 3, 4, 5, 6000, tzinfo=UTC), "tags": ["a", "b"],
     "counters": [("x", 7), ("y", -1)], "ship_to": {"city": "Oslo", "zip": 150},
     "lines": [{"sku": "T1", "count": 2}, {"sku": "T2", "count": 0}]},
    # nulls where the schema has presence, zeros and empties where it has none
    {"id": 0, "item": None, "quantity": None, "price": None, "paid": None, "blob": None,
     "placed_at": None, "tags": [], "counters": [], "ship_to": None, "lines": []},
    {"id": -2 ** 63, "item": "", "quantity": 0, "price": 0.0, "paid": False, "blob": b"",
     "placed_at": dt.datetime(1970, 1, 1, tzinfo=UTC), "tags": [""], "counters": [("", 0)],
     "ship_to": {"city": None, "zip": 0}, "lines": [{"sku": "", "count": 0}]},
]


def hand_built_order():
    """The message class of shop.Order, from descriptors written here field by field."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(descriptor_pb2.FileDescriptorProto.FromString(
        timestamp_pb2.DESCRIPTOR.serialized_pb))
    file = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop",
                                              syntax="proto3",
                                              dependency=["google/protobuf/timestamp.proto"])
    order = file.message_type.add(name="Order")

    def add(message, name, number, kind, type_name=None, label=F.LABEL_OPTIONAL,
            presence=False):
        field = message.field.add(name=name, number=number, type=kind, label=label)
        if type_name:
            field.type_name = type_name
        if presence:
            field.proto3_optional = True
            field.oneof_index = len(message.oneof_decl)
            message.oneof_decl.add(name="_" + name)

    add(order, "id", 1, F.TYPE_INT64)
    for number, (name, kind) in enumerate([("item", F.TYPE_STRING), ("quantity", F.TYPE_INT32),
                                           ("price", F.TYPE_DOUBLE), ("paid", F.TYPE_BOOL),
                                           ("blob", F.TYPE_BYTES)], 2):
        add(order, name, number, kind, presence=True)
    add(order, "placed_at", 7, F.TYPE_MESSAGE, ".google.protobuf.Timestamp")
    add(order, "tags", 8, F.TYPE_STRING, label=F.LABEL_REPEATED)
    entry = order.nested_type.add(name="CountersEntry")
    entry.options.map_entry = True
    add(entry, "key", 1, F.TYPE_STRING)
    add(entry, "value", 2, F.TYPE_INT64)
    add(order, "counters", 9, F.TYPE_MESSAGE, ".shop.Order.CountersEntry",
        label=F.LABEL_REPEATED)
    ship_to = order.nested_type.add(name="ShipTo")
    add(ship_to, "city", 1, F.TYPE_STRING, presence=True)
    add(ship_to, "zip", 2, F.TYPE_INT32)
    add(order, "ship_to", 10, F.TYPE_MESSAGE, ".shop.Order.ShipTo")
    lines = order.nested_type.add(name="Lines")
    add(lines, "sku", 1, F.TYPE_STRING)
    add(lines, "count", 2, F.TYPE_INT32)
    add(order, "lines", 11, F.TYPE_MESSAGE, ".shop.Order.Lines", label=F.LABEL_REPEATED)
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def registry_export(path, entries):
    """A registry JSON export of (id, subject, version, .proto text)."""
    path.write_text(json.dumps([
        {"id": i, "subject": s, "version": v, "schemaType": "PROTOBUF", "schema": text,
         "references": []} for i, s, v, text in entries]))
    return str(path)


def framed_log(tmp_path, topic, schema_id, indexes, payloads):
    logdir = str(tmp_path / "logs")
    framed = [None if p is None else b"\x00" + schema_id.to_bytes(4, "big") + indexes + p
              for p in payloads]
    write_log(logdir, pa.table({"value": pa.array(framed, pa.binary())}), topic=topic,
              num_partitions=1)
    return logdir


# -- derived schemas -------------------------------------------------------------


def test_the_derived_schema_is_the_registry_s_canonical_text_of_the_inverse_mapping():
    assert schema_format("protobuf").name == "protobuf"
    assert (PROTOBUF.schema_type, PROTOBUF.schema_option) == ("PROTOBUF", "ProtobufSchema")
    text = PROTOBUF.derive_schema(ORDER, "shop.Order", "value")
    assert text == ORDER_PROTO
    assert PROTOBUF.record_name(text) == "shop.Order"
    assert PROTOBUF.message_indexes(text) == b"\x00"
    default = PROTOBUF.derive_schema(pa.struct([("a", pa.int8())]), None, "value")
    assert default == ('syntax = "proto3";\n\nmessage topLevelRecord {\n'
                       '  optional int32 a = 1;\n}\n')
    assert PROTOBUF.record_name(default) == "topLevelRecord"


def test_derived_payloads_parse_with_a_hand_built_descriptor_and_read_back_as_written(
        tmp_path):
    text = PROTOBUF.derive_schema(ORDER, "shop.Order", "value")
    column = pa.array(ROWS + [None], ORDER)
    payloads = PROTOBUF.encode_payloads(column, text)
    assert payloads[-1] is None
    order = hand_built_order()
    first, empty, zeros = (order.FromString(p) for p in payloads[:3])
    assert (first.id, first.item, first.quantity, first.price, first.paid, first.blob) == \
        (1, "tea", 3, 3.5, True, b"\x00\xff")
    assert (first.placed_at.seconds, first.placed_at.nanos) == (1704164645, 6000000)
    assert list(first.tags) == ["a", "b"] and dict(first.counters) == {"x": 7, "y": -1}
    assert (first.ship_to.city, first.ship_to.zip) == ("Oslo", 150)
    assert [(line.sku, line.count) for line in first.lines] == [("T1", 2), ("T2", 0)]
    assert not any(empty.HasField(name) for name in
                   ("item", "quantity", "price", "paid", "blob", "placed_at", "ship_to"))
    assert zeros.HasField("item") and zeros.HasField("placed_at") \
        and zeros.HasField("ship_to") and not zeros.ship_to.HasField("city")

    export = registry_export(tmp_path / "registry.json", [(7, "orders-value", 1, text)])
    logdir = framed_log(tmp_path, "orders", 7, PROTOBUF.message_indexes(text), payloads)
    rows = decoded_rows({"path": logdir, "subscribe": "orders", "valueFormat": "protobuf",
                         "schemas": export})
    assert [row["valueDecoded"] for row in rows] == ROWS + [None]


def test_every_mapped_type_reads_back_as_the_decoder_types_it(tmp_path):
    """int8/int16/uint8/uint16 read back as int32, uint32 as int64, uint64 and
    decimal(20,0) as decimal(20,0), float16 as float32, durations as duration[us],
    timestamps without a zone as UTC ones."""
    struct = pa.struct([
        ("i8", pa.int8()), ("u16", pa.uint16()), ("u32", pa.uint32()), ("u64", pa.uint64()),
        ("d20", pa.decimal128(20, 0)), ("f32", pa.float32()),
        ("wait", pa.duration("ms")), ("local", pa.timestamp("ns")),
        ("by_number", pa.map_(pa.int16(), pa.struct([("note", pa.string())]))),
        ("stamps", pa.list_(pa.timestamp("s", tz="Europe/Oslo")))])
    row = {"i8": -128, "u16": 65535, "u32": 2 ** 32 - 1, "u64": 2 ** 64 - 1,
           "d20": Decimal(2 ** 64 - 1), "f32": 1.5, "wait": dt.timedelta(milliseconds=-1500),
           "local": dt.datetime(2024, 5, 6, 7, 8, 9, 123456),
           "by_number": [(3, {"note": "x"}), (-1, None)], "stamps": [dt.datetime(
               2024, 1, 1, tzinfo=UTC)]}
    text = PROTOBUF.derive_schema(struct, "t.Types", "value")
    assert "uint64 d20 = 5;" in text and "map<int32, ByNumberValue> by_number = 9;" in text
    assert "google.protobuf.Duration wait = 7;" in text
    good = dict(row, by_number=[(3, {"note": "x"})])
    payloads = PROTOBUF.encode_payloads(pa.array([good], struct), text)
    export = registry_export(tmp_path / "registry.json", [(1, "types-value", 1, text)])
    logdir = framed_log(tmp_path, "types", 1, b"\x00", payloads)
    back = decoded_rows({"path": logdir, "subscribe": "types", "valueFormat": "protobuf",
                         "schemas": export})[0]["valueDecoded"]
    assert back == dict(good, d20=Decimal(2 ** 64 - 1), u64=Decimal(2 ** 64 - 1),
                        wait=dt.timedelta(milliseconds=-1500),
                        local=good["local"].replace(tzinfo=UTC))
    with pytest.raises(PayloadMisfit) as misfit:  # a null map value
        PROTOBUF.encode_payloads(pa.array([good, row], struct), text)
    assert misfit.value.row == 1 and "field by_number{-1}: a null map value" in \
        misfit.value.reason
    with pytest.raises(PayloadMisfit, match=r"field stamps\[1\]: a null item"):
        PROTOBUF.encode_payloads(pa.array([dict(good, stamps=[0, None])], struct), text)
    # a null list is written empty: Protobuf has no null repeated field
    empty, = PROTOBUF.encode_payloads(pa.array([dict(good, stamps=None)], struct), text)
    assert empty == PROTOBUF.encode_payloads(pa.array([dict(good, stamps=[])], struct),
                                             text)[0]


@pytest.mark.parametrize("arrow_type,message", [
    (pa.date32(), "column 'value' field when has type date32[day], which has no Protobuf"),
    (pa.decimal128(10, 2), "field when has type decimal128(10, 2)"),
    (pa.list_(pa.list_(pa.int32())), "field when is a list of list<item: int32>"),
    (pa.map_(pa.string(), pa.list_(pa.int32())), "field when is a map of list"),
    (pa.map_(pa.float64(), pa.int32()), "field when is a map with double keys"),
    (pa.struct([("inner", pa.struct([]))]), "field when.inner is a struct without fields"),
    (pa.null(), "field when has type null"),
])
def test_types_without_a_faithful_mapping_are_refused_naming_column_and_field(
        arrow_type, message):
    with pytest.raises(InvalidInputError, match=message.replace("(", r"\(").replace(
            ")", r"\)").replace("[", r"\[").replace("]", r"\]")):
        PROTOBUF.derive_schema(pa.struct([("when", arrow_type)]), None, "value")


def test_names_protobuf_cannot_hold_are_refused_and_clashing_message_names_renamed():
    with pytest.raises(InvalidInputError, match="field 'my field'|field my field is not a"):
        PROTOBUF.derive_schema(pa.struct([("my field", pa.int32())]), None, "value")
    with pytest.raises(InvalidOptionError, match="'valueRecordName'.*'shop.1Order'"):
        PROTOBUF.derive_schema(pa.struct([("a", pa.int32())]), "shop.1Order", "value")
    with pytest.raises(InvalidInputError, match="column 'key' has type int32"):
        PROTOBUF.derive_schema(pa.int32(), None, "key")
    # a struct field whose CamelCase name is another field's; a field named google
    struct = pa.struct([("Point", pa.int32()), ("point", pa.struct([("x", pa.int32())])),
                        ("google", pa.timestamp("us", tz="UTC"))])
    text = PROTOBUF.derive_schema(struct, "geo.Shape", "value")
    assert "PointMessage point = 2;" in text and ".google.protobuf.Timestamp google = 3;" \
        in text
    payload, = PROTOBUF.encode_payloads(pa.array([{"Point": 1, "point": {"x": 2},
                                                   "google": 0}], struct), text)
    assert payload == b"\x08\x01\x12\x02\x08\x02\x1a\x00"


# -- given schemas ---------------------------------------------------------------

GIVEN = """// Orders, as the shop writes them.
syntax = "proto3";
package shop;
enum Status { NEW = 0; PAID = 1; }
message Order {
  int64 id = 1;   // no presence
  optional string note = 2;
  Status status = 3;
  oneof payment { string card = 4; int64 voucher = 5; }
  repeated int32 counts = 6;
  message Line { string sku = 1; }
  Line line = 7;
}
message Refund { int64 order_id = 1; }
"""


def test_a_given_schema_is_registered_in_canonical_form_and_picks_its_message():
    column = pa.struct([("id", pa.int64()), ("note", pa.string())])
    text = PROTOBUF.given_schema(GIVEN, "valueProtobufSchema", column, "value")
    assert text.startswith('syntax = "proto3";\npackage shop;\n\nmessage Order {\n'
                           '  int64 id = 1;\n  optional string note = 2;\n')
    assert "  oneof payment {\n    string card = 4;\n    int64 voucher = 5;\n  }\n" in text
    assert text.endswith("message Refund {\n  int64 order_id = 1;\n}\nenum Status {\n"
                         "  NEW = 0;\n  PAID = 1;\n}\n")
    assert PROTOBUF.same_schema(text, GIVEN) and not PROTOBUF.same_schema(
        text, GIVEN.replace("int64 voucher", "int32 voucher"))
    assert PROTOBUF.record_name(text) == "shop.Order"
    refund = pa.struct([("order_id", pa.int64())])
    assert PROTOBUF.given_schema(GIVEN, "valueProtobufSchema", refund, "value",
                                 message="Refund") == text
    assert PROTOBUF.record_name(text, message="shop.Refund") == "shop.Refund"
    assert PROTOBUF.message_indexes(text, message="Refund") == b"\x02\x02"
    assert PROTOBUF.message_indexes(text, message="Order.Line") == b"\x04\x00\x00"
    # a message of a file it imports has no message indexes in it: not one of its messages
    stamped = ('syntax = "proto3"; import "google/protobuf/timestamp.proto"; '
               'message O { google.protobuf.Timestamp at = 1; }')
    assert PROTOBUF.message_indexes(stamped, message="O") == b"\x00"
    with pytest.raises(InvalidOptionError, match="has no message 'google.protobuf.Timestamp' "
                                                 r"\(its top-level messages: O\)"):
        PROTOBUF.message_indexes(stamped, message="google.protobuf.Timestamp")
    # what the parser reads past (options) keeps the text as given
    with_options = GIVEN.replace("package shop;", 'package shop;\noption java_package = "x";')
    assert PROTOBUF.given_schema(with_options, "valueProtobufSchema", column,
                                 "value") == with_options
    assert not PROTOBUF.same_schema(with_options, GIVEN)


def test_given_values_fill_enums_oneofs_and_nested_messages_and_misfits_name_the_field():
    column_type = pa.struct([("id", pa.int64()), ("note", pa.string()),
                             ("status", pa.string()), ("card", pa.string()),
                             ("voucher", pa.int64()), ("counts", pa.list_(pa.int64())),
                             ("line", pa.struct([("sku", pa.binary())]))])
    text = PROTOBUF.given_schema(GIVEN, "valueProtobufSchema", column_type, "value")
    good = {"id": 5, "note": None, "status": "PAID", "card": "visa", "voucher": None,
            "counts": [1, 2], "line": {"sku": b"T1"}}
    payload, = PROTOBUF.encode_payloads(pa.array([good], column_type), text)
    assert payload == b"\x08\x05\x18\x01\x22\x04visa\x32\x02\x01\x02\x3a\x04\x0a\x02T1"

    def misfit(**changes):
        with pytest.raises(PayloadMisfit) as raised:
            PROTOBUF.encode_payloads(pa.array([good, dict(good, **changes)], column_type),
                                     text)
        assert raised.value.row == 1
        return raised.value.reason

    assert misfit(id=None).startswith("field id: a null, and the field has no presence")
    assert misfit(status="LOST") == "field status: 'LOST' is not a value of enum shop.Status"
    assert misfit(voucher=3) == ("fields card, voucher are all set, and they are members "
                                 "of oneof payment, which holds one")
    assert misfit(counts=[1, None]) == \
        "field counts[1]: a null item; a repeated field holds none"
    assert misfit(counts=[2 ** 31]) == \
        "field counts[0]: 2147483648 is out of the range of int32 (-2147483648..2147483647)"
    assert misfit(line={"sku": b"\xff"}) == \
        "field line.sku: bytes that are not UTF-8, and the field is a string"


@pytest.mark.parametrize("text,error,message", [
    ("syntax = \"proto3\";\nmessage Order {\n  int64 id = ;\n}\n", InvalidOptionError,
     "option 'valueProtobufSchema' is not a .proto schema: option 'valueProtobufSchema': "
     "the .proto text at line 3 column 14: expected an integer"),
    ("syntax = \"proto3\"; enum E { A = 0; }", InvalidOptionError, "declares no message"),
    ('syntax = "proto3"; import "common/address.proto"; message O { int64 id = 1; }',
     InvalidOptionError, "imports 'common/address.proto'; a framed write registers no"),
    ("syntax = \"proto3\"; message O { Missing id = 1; }", InvalidOptionError,
     "does not load"),
    ("syntax = \"proto3\"; message O { int64 other = 1; }", InvalidInputError,
     "column 'value' does not fit message O of option 'valueProtobufSchema': field id is "
     "not in message O"),
    ("syntax = \"proto3\"; message O { string id = 1; }", InvalidInputError,
     "field id is string in the message and int64 in the column"),
    ("syntax = \"proto3\"; message O { repeated int64 id = 1; }", InvalidInputError,
     "field id is repeated in the message and int64 in the column"),
    (42, InvalidOptionError, "must be the text of a .proto file"),
])
def test_given_schema_errors_name_the_option_column_and_field(text, error, message):
    with pytest.raises(error) as raised:
        PROTOBUF.given_schema(text, "valueProtobufSchema", pa.struct([("id", pa.int64())]),
                              "value")
    assert message in str(raised.value)
    if error is InvalidOptionError:
        assert raised.value.option == "valueProtobufSchema"


def test_a_message_the_schema_lacks_is_an_option_error_listing_its_messages():
    with pytest.raises(InvalidOptionError, match=r"has no message 'Nope' \(its top-level "
                                                 r"messages: shop.Order, shop.Refund\)"):
        PROTOBUF.given_schema(GIVEN, "valueProtobufSchema", pa.struct([("id", pa.int64())]),
                              "value", message="Nope")


# -- compatibility ---------------------------------------------------------------

V1 = """syntax = "proto3";
package shop;
message Order {
  int32 id = 1;
  string note = 2;
  oneof payment { string card = 3; int64 voucher = 4; }
  message Line { string sku = 1; }
  repeated Line lines = 5;
}
"""


def change(old, new):
    assert old in V1
    return V1.replace(old, new)


@pytest.mark.parametrize("new,kind", [
    # compatible both ways
    (change("string note = 2;", ""), None),  # a field removed
    (change("string note = 2;", "string note = 2; bool gift = 9;"), None),  # added
    (change("int32 id = 1;", "int64 id = 1;"), None),  # within the varint group
    (change("int32 id = 1;", "bool id = 1;"), None),
    (change("string note = 2;", "bytes note = 2;"), None),
    (change("string note = 2;", "repeated string note = 2;"), None),  # string's label
    (change("int32 id = 1;", "int32 order_id = 1;"), None),  # renamed
    (change("int32 id = 1;", "repeated int32 id = 1;"), None),  # proto3: no label before
    (change("message Line", "enum Kind { A = 0; }\n  message Line"), None),  # enum added
    (change("oneof payment { string card = 3; int64 voucher = 4; }", ""), None),  # whole
    (change("oneof payment { string card = 3; int64 voucher = 4; }",
            "string card = 3; int64 voucher = 4;"), None),  # moved out of the oneof
    # incompatible
    (change("int32 id = 1;", "sint32 id = 1;"), "FIELD_SCALAR_KIND_CHANGED"),
    (change("int32 id = 1;", "double id = 1;"), "FIELD_SCALAR_KIND_CHANGED"),
    (change("string note = 2;", "Line note = 2;"), "FIELD_KIND_CHANGED"),
    (change("string note = 2;", "map<string, string> note = 2;"), "FIELD_KIND_CHANGED"),
    (change("repeated Line lines = 5;", "repeated Order lines = 5;"),
     "FIELD_NAMED_TYPE_CHANGED"),
    (change("package shop;", "package store;"), "PACKAGE_CHANGED"),
    (change("  message Line { string sku = 1; }\n  repeated Line lines = 5;\n", ""),
     "MESSAGE_REMOVED"),
    (change("int64 voucher = 4;", ""), "ONEOF_FIELD_REMOVED"),
    (change("string note = 2;\n  oneof payment { string card = 3;",
            "oneof payment { string note = 2; string card = 3;"),
     "FIELD_MOVED_TO_EXISTING_ONEOF"),
    (change("int32 id = 1;\n  string note = 2;",
            "oneof both { int32 id = 1; string note = 2; }"),
     "MULTIPLE_FIELDS_MOVED_TO_ONEOF"),
])
def test_backward_compatibility_follows_the_registry_s_protobuf_diff(new, kind):
    problem = PROTOBUF.compatibility_problem("BACKWARD", new, [(1, V1)])
    if kind is None:
        assert problem is None
    else:
        version, reason = problem
        assert version == 1 and reason.endswith(f"({kind})")
        assert reason.startswith("the new schema cannot read data written with it: " + (
            "the file: package 'shop' in version 1 and 'store' in the new schema"
            if kind == "PACKAGE_CHANGED" else "message shop.Order"))


def test_levels_check_the_direction_and_the_versions_the_registry_checks():
    removed_message = change("  message Line { string sku = 1; }\n  repeated Line lines = 5;\n",
                             "")
    # a message added is compatible; removed is not: FORWARD sees the removal
    assert PROTOBUF.compatibility_problem("BACKWARD", V1, [(1, removed_message)]) is None
    version, reason = PROTOBUF.compatibility_problem("FORWARD", V1, [(1, removed_message)])
    assert version == 1 and reason == (
        "it cannot read data written with the new schema: message shop.Order.Line: in the "
        "new schema and not in version 1 (MESSAGE_REMOVED)")
    assert PROTOBUF.compatibility_problem("FULL", V1, [(1, removed_message)])[0] == 1
    assert PROTOBUF.compatibility_problem("NONE", V1, [(1, removed_message)]) is None
    # required fields (proto2): adding one is refused, both ways at FULL
    v1 = 'syntax = "proto2";\nmessage M {\n  optional int32 a = 1;\n}\n'
    v2 = 'syntax = "proto2";\nmessage M {\n  optional int32 a = 1;\n  required int32 b = 2;\n}\n'
    assert PROTOBUF.compatibility_problem("BACKWARD", v2, [(1, v1)])[1].endswith(
        "message M field 2 (b): required in the new schema, missing from version 1 "
        "(REQUIRED_FIELD_ADDED)")
    assert PROTOBUF.compatibility_problem("FORWARD", v2, [(1, v1)])[1].endswith(
        "(REQUIRED_FIELD_REMOVED)")
    numeric_label = v1.replace("optional int32 a", "repeated int32 a")
    assert PROTOBUF.compatibility_problem("BACKWARD", numeric_label, [(1, v1)])[1].endswith(
        "message M field 1 (a): optional in version 1 and repeated in the new schema "
        "(FIELD_NUMERIC_LABEL_CHANGED)")
    # transitive levels check every version, newest first; the others the latest only
    sint = change("int32 id = 1;", "sint32 id = 1;")
    history = [(1, V1), (2, sint), (3, sint)]
    assert PROTOBUF.compatibility_problem("BACKWARD", sint, history) is None
    assert PROTOBUF.compatibility_problem("BACKWARD_TRANSITIVE", sint, history)[0] == 1
    assert PROTOBUF.compatibility_problem("FULL_TRANSITIVE", V1, history)[0] == 3
    assert PROTOBUF.compatibility_problem("FORWARD_TRANSITIVE", sint, [(1, sint)]) is None
    with pytest.raises(InvalidOptionError, match="compatibility level 'SIDEWAYS'"):
        PROTOBUF.compatibility_problem("SIDEWAYS", V1, history)
    version, reason = PROTOBUF.compatibility_problem("BACKWARD", V1, [(4, "message {")])
    assert version == 4 and reason.startswith("the schemas cannot be compared: version 4:")


def test_framed_writes_register_derived_schemas_reuse_their_ids_and_refuse_breaking_ones(
        tmp_path):
    """Through the writer's framing (framed.py): the canonical text registered in
    `_schemas`, its id reused for the same schema, an incompatible one refused."""
    from segmentlog_datasource.decode.registry import registry_from_log
    from segmentlog_datasource.writer.framed import SchemaRegistrationError

    logdir = str(tmp_path / "logs")
    options = {"valueFormat": "protobuf", "valueRecordName": "shop.Order"}
    struct = pa.struct([("id", pa.int64()), ("tags", pa.list_(pa.string()))])
    rows = [{"id": 1, "tags": ["a"]}, None, {"id": None, "tags": []}]
    for _ in range(2):
        write_log(logdir, pa.table({"value": pa.array(rows, struct)}), topic="orders",
                  num_partitions=1, options=options)
    held = registry_from_log(logdir).versions("orders-value")
    assert [(s.id, s.version, s.schema_type) for s in held] == [(1, 1, "PROTOBUF")]
    assert held[0].schema == PROTOBUF.derive_schema(struct, "shop.Order", "value")
    got = decoded_rows({"path": logdir, "subscribe": "orders", "valueFormat": "protobuf"})
    assert [row["valueDecoded"] for row in got] == rows * 2
    breaking = pa.table({"value": pa.array([{"id": "x"}], pa.struct([("id", pa.string())]))})
    with pytest.raises(SchemaRegistrationError, match=r"field 1 \(id\): int64 in version 1 "
                                                      r"and string in the new schema"):
        write_log(logdir, breaking, topic="orders", num_partitions=1, options=options)
