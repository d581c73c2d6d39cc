"""valueFormat=protobuf: Schema Registry framed Protobuf values decoded into the column of
the subject's latest schema. Values are built and serialized by the protobuf runtime itself,
with message classes from FileDescriptorProtos this test writes by hand (not from the
module's .proto parser); the registry holds the .proto texts of the same files."""
import datetime as dt
import json
import pickle
from decimal import Decimal

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from google.protobuf import wrappers_pb2

from segmentlog_datasource.decode.protobuf import PROTOBUF, ProtobufSchemaError, message_indexes
from segmentlog_datasource.decode.registry import (RegisteredSchema, SchemaReference,
                                                   SchemaRegistry)
from segmentlog_datasource.decode.value_formats import IncompatibleSchemaError
from segmentlog_datasource.errors import RecordDecodeError
from segmentlog_datasource.schemas.protobuf.text import parse_proto

F = descriptor_pb2.FieldDescriptorProto
UTC = dt.timezone.utc


def field(name, number, kind, label=F.LABEL_OPTIONAL, type_name=None, oneof=None,
          proto3_optional=False):
    made = F(name=name, number=number, type=kind, label=label)
    if type_name:
        made.type_name = type_name
    if oneof is not None:
        made.oneof_index = oneof
    if proto3_optional:
        made.proto3_optional = True
    return made


def well_known(pool):
    for module in (timestamp_pb2, wrappers_pb2):
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb))


# The referenced subject: common/address.proto
ADDRESS_PROTO = """syntax = "proto3";
package common;

message Address {
  string city = 1;
  string zip = 2;
}
"""


def address_file():
    file = descriptor_pb2.FileDescriptorProto(name="common/address.proto", package="common",
                                              syntax="proto3")
    file.message_type.add(name="Address", field=[field("city", 1, F.TYPE_STRING),
                                                 field("zip", 2, F.TYPE_STRING)])
    return file


V1_PROTO = """syntax = "proto3";
package shop;

message Order {
  int32 id = 1;
  string legacy = 2;
  int32 quantity = 3;
}
"""

V2_PROTO = """syntax = "proto3";
package shop;

message Order {
  int32 id = 1;
  reserved 2;
  int32 quantity = 3;
  string note = 4;  // added
}
"""

# The latest: quantity widened to int64, and every type.
V3_PROTO = """// Orders, as the shop writes them.
syntax = "proto3";
package shop;

import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "common/address.proto";

option java_package = "com.example.shop";
option java_multiple_files = true;

/* An order.
   Multi-line comment. */
message Order {
  option (confluent.message_meta) = { doc: "an order" };
  int32 id = 1;
  reserved 2;
  reserved "legacy";
  int64 quantity = 3;
  string note = 4;
  sint32 delta = 5;
  uint32 small_count = 6 [deprecated = true];
  uint64 big_count = 7;
  fixed64 checksum = 8;
  sfixed32 offset = 9;
  double price = 10;
  float ratio = 11;
  bool paid = 12;
  bytes blob = 13;
  Status status = 14;
  repeated Line lines = 15;
  repeated string tags = 16 [packed = false];
  map<string, int64> counters = 17;
  map<int32, Line> lines_by_number = 18;
  oneof payment {
    string card = 19;
    int64 voucher = 20;
  }
  google.protobuf.Timestamp placed_at = 21;
  google.protobuf.Int32Value discount = 22;
  google.protobuf.StringValue coupon = 23;
  common.Address ship_to = 24;
  optional string gift_message = 25;

  enum Status {
    STATUS_UNKNOWN = 0;
    PLACED = 1;
    SHIPPED = 2 [(custom) = "x"];
  }
  message Line {
    string sku = 1;
    int32 count = 2;
  }
}

message Refund {
  int32 order_id = 1;
}
"""


def v1_file():
    file = descriptor_pb2.FileDescriptorProto(name="v1.proto", package="shop", syntax="proto3")
    file.message_type.add(name="Order", field=[
        field("id", 1, F.TYPE_INT32), field("legacy", 2, F.TYPE_STRING),
        field("quantity", 3, F.TYPE_INT32)])
    return file


def v2_file():
    file = descriptor_pb2.FileDescriptorProto(name="v2.proto", package="shop", syntax="proto3")
    file.message_type.add(name="Order", field=[
        field("id", 1, F.TYPE_INT32), field("quantity", 3, F.TYPE_INT32),
        field("note", 4, F.TYPE_STRING)])
    return file


def v3_file():
    file = descriptor_pb2.FileDescriptorProto(
        name="v3.proto", package="shop", syntax="proto3",
        dependency=["google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto",
                    "common/address.proto"])
    order = file.message_type.add(name="Order")
    repeated = F.LABEL_REPEATED
    order.field.extend([
        field("id", 1, F.TYPE_INT32), field("quantity", 3, F.TYPE_INT64),
        field("note", 4, F.TYPE_STRING), field("delta", 5, F.TYPE_SINT32),
        field("small_count", 6, F.TYPE_UINT32), field("big_count", 7, F.TYPE_UINT64),
        field("checksum", 8, F.TYPE_FIXED64), field("offset", 9, F.TYPE_SFIXED32),
        field("price", 10, F.TYPE_DOUBLE), field("ratio", 11, F.TYPE_FLOAT),
        field("paid", 12, F.TYPE_BOOL), field("blob", 13, F.TYPE_BYTES),
        field("status", 14, F.TYPE_ENUM, type_name=".shop.Order.Status"),
        field("lines", 15, F.TYPE_MESSAGE, repeated, ".shop.Order.Line"),
        field("tags", 16, F.TYPE_STRING, repeated),
        field("counters", 17, F.TYPE_MESSAGE, repeated, ".shop.Order.CountersEntry"),
        field("lines_by_number", 18, F.TYPE_MESSAGE, repeated,
              ".shop.Order.LinesByNumberEntry"),
        field("card", 19, F.TYPE_STRING, oneof=0), field("voucher", 20, F.TYPE_INT64, oneof=0),
        field("placed_at", 21, F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp"),
        field("discount", 22, F.TYPE_MESSAGE, type_name=".google.protobuf.Int32Value"),
        field("coupon", 23, F.TYPE_MESSAGE, type_name=".google.protobuf.StringValue"),
        field("ship_to", 24, F.TYPE_MESSAGE, type_name=".common.Address"),
        field("gift_message", 25, F.TYPE_STRING, oneof=1, proto3_optional=True)])
    order.oneof_decl.add(name="payment")
    order.oneof_decl.add(name="_gift_message")
    status = order.enum_type.add(name="Status")
    for number, name in enumerate(["STATUS_UNKNOWN", "PLACED", "SHIPPED"]):
        status.value.add(name=name, number=number)
    order.nested_type.add(name="Line", field=[field("sku", 1, F.TYPE_STRING),
                                              field("count", 2, F.TYPE_INT32)])
    counters = order.nested_type.add(name="CountersEntry", field=[
        field("key", 1, F.TYPE_STRING), field("value", 2, F.TYPE_INT64)])
    counters.options.map_entry = True
    by_number = order.nested_type.add(name="LinesByNumberEntry", field=[
        field("key", 1, F.TYPE_INT32),
        field("value", 2, F.TYPE_MESSAGE, type_name=".shop.Order.Line")])
    by_number.options.map_entry = True
    file.message_type.add(name="Refund", field=[field("order_id", 1, F.TYPE_INT32)])
    return file


def classes(*files):
    """The runtime's message classes of hand-built files, by full name."""
    pool = descriptor_pool.DescriptorPool()
    well_known(pool)
    for file in files:
        pool.Add(file)
    return lambda name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


V1 = classes(v1_file())("shop.Order")
V2 = classes(v2_file())("shop.Order")
V3 = classes(address_file(), v3_file())
ORDER, LINE, REFUND = V3("shop.Order"), V3("shop.Order.Line"), V3("shop.Refund")


def registered(schema_id, subject, version, text, references=()):
    return RegisteredSchema(schema_id, subject, version, "PROTOBUF", text, tuple(references))


ADDRESS_REF = SchemaReference("common/address.proto", "address", 1)
SCHEMAS = [registered(1, "orders-value", 1, V1_PROTO),
           registered(2, "orders-value", 2, V2_PROTO),
           registered(3, "address", 1, ADDRESS_PROTO),
           registered(4, "orders-value", 3, V3_PROTO, [ADDRESS_REF])]


def registry():
    held = SchemaRegistry("the test's registry")
    for schema in SCHEMAS:
        held.register(schema)
    return held


def body(message, indexes=b"\x00"):
    """A payload after the 5-byte frame: message indexes, then the Protobuf binary."""
    return indexes + message.SerializeToString()


ORDER_TYPE = pa.struct([
    ("id", pa.int32()), ("quantity", pa.int64()), ("note", pa.string()),
    ("delta", pa.int32()), ("small_count", pa.int64()), ("big_count", pa.decimal128(20, 0)),
    ("checksum", pa.decimal128(20, 0)), ("offset", pa.int32()), ("price", pa.float64()),
    ("ratio", pa.float32()), ("paid", pa.bool_()), ("blob", pa.binary()),
    ("status", pa.string()),
    ("lines", pa.list_(pa.field("element", pa.struct([("sku", pa.string()),
                                                       ("count", pa.int32())]),
                                nullable=False))),
    ("tags", pa.list_(pa.field("element", pa.string(), nullable=False))),
    ("counters", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False))),
    ("lines_by_number", pa.map_(pa.int32(), pa.field(
        "value", pa.struct([("sku", pa.string()), ("count", pa.int32())]), nullable=False))),
    ("card", pa.string()), ("voucher", pa.int64()),
    ("placed_at", pa.timestamp("us", tz="UTC")), ("discount", pa.int32()),
    ("coupon", pa.string()),
    ("ship_to", pa.struct([("city", pa.string()), ("zip", pa.string())])),
    ("gift_message", pa.string())])

# A V3 order with no field set: proto3 scalars read their defaults, fields with presence null.
EMPTY = {"id": 0, "quantity": 0, "note": "", "delta": 0, "small_count": 0,
         "big_count": Decimal(0), "checksum": Decimal(0), "offset": 0, "price": 0.0,
         "ratio": 0.0, "paid": False, "blob": b"", "status": "STATUS_UNKNOWN", "lines": [],
         "tags": [], "counters": [], "lines_by_number": [], "card": None, "voucher": None,
         "placed_at": None, "discount": None, "coupon": None, "ship_to": None,
         "gift_message": None}


def test_every_type_and_three_versions_decode_into_the_latest_column():
    held = registry()
    reader = pickle.loads(pickle.dumps(PROTOBUF.reader(SCHEMAS[-1], held)))
    assert reader.arrow_type == ORDER_TYPE
    full = ORDER(id=7, quantity=2 ** 40, note="fragile", delta=-3, small_count=2 ** 32 - 1,
                 big_count=2 ** 64 - 1, checksum=2 ** 63, offset=-5, price=9.5, ratio=0.25,
                 paid=True, blob=b"\x00\xff", status=ORDER.Status.Value("SHIPPED"),
                 lines=[LINE(sku="a", count=1), LINE(sku="b")], tags=["x", "y"],
                 counters={"b": 2, "a": -1}, lines_by_number={3: LINE(sku="c", count=3)},
                 voucher=0, discount={"value": 0},
                 coupon={"value": "SALE"}, gift_message="")
    full.placed_at.FromDatetime(dt.datetime(2024, 5, 6, 7, 8, 9, 123456))
    full.ship_to.city = "Oslo"
    values, errors = reader.decode(SCHEMAS[-1], held, [body(full), body(ORDER()),
                                                       body(ORDER(card="4111"))])
    assert errors == [None, None, None]
    assert values[0] == {
        "id": 7, "quantity": 2 ** 40, "note": "fragile", "delta": -3,
        "small_count": 2 ** 32 - 1, "big_count": Decimal(2 ** 64 - 1),
        "checksum": Decimal(2 ** 63), "offset": -5, "price": 9.5, "ratio": 0.25, "paid": True,
        "blob": b"\x00\xff", "status": "SHIPPED",
        "lines": [{"sku": "a", "count": 1}, {"sku": "b", "count": 0}], "tags": ["x", "y"],
        "counters": [("a", -1), ("b", 2)], "lines_by_number": [(3, {"sku": "c", "count": 3})],
        "card": None, "voucher": 0, "discount": 0, "coupon": "SALE", "gift_message": "",
        "placed_at": 1714979289123456, "ship_to": {"city": "Oslo", "zip": ""}}
    assert values[1] == EMPTY
    assert values[2] == dict(EMPTY, card="4111")
    column = pa.array(values, reader.arrow_type).to_pylist()
    assert column[0]["placed_at"] == dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    assert dict(column[0]["counters"]) == {"a": -1, "b": 2}

    # Older versions: legacy dropped, note absent in v1 (its default), int32 widened.
    values, errors = reader.decode(SCHEMAS[0], held, [
        body(V1(id=1, legacy="gone", quantity=-2 ** 31)), body(V1())])
    assert errors == [None, None]
    assert values == [dict(EMPTY, id=1, quantity=-2 ** 31), EMPTY]
    values, errors = reader.decode(SCHEMAS[1], held, [body(V2(id=2, quantity=5, note="n"))])
    assert (values, errors) == ([dict(EMPTY, id=2, quantity=5, note="n")], [None])


def test_message_indexes_pick_nested_and_later_messages():
    assert message_indexes(b"\x00rest") == ((0,), 1)
    assert message_indexes(b"\x02\x00") == ((0,), 2)  # [0] written in full
    assert message_indexes(b"\x04\x00\x00") == ((0, 0), 3)  # zig-zag: count 2, [0, 0]
    assert message_indexes(b"\x02\x02") == ((1,), 2)
    held = registry()
    latest = SCHEMAS[-1]
    lines = PROTOBUF.reader(latest, held, message="Order.Line")
    assert lines.arrow_type == pa.struct([("sku", pa.string()), ("count", pa.int32())])
    refunds = PROTOBUF.reader(latest, held, message="shop.Refund")
    assert refunds.decode(latest, held, [body(REFUND(order_id=9), b"\x02\x02")]) == (
        [{"order_id": 9}], [None])
    values, errors = lines.decode(latest, held, [
        body(LINE(sku="s", count=4), b"\x04\x00\x00"), body(ORDER(id=1))])
    assert values == [{"sku": "s", "count": 4}, None]
    assert errors[1] == ("the value is message shop.Order (message indexes [0]), and the "
                         "column holds message shop.Order.Line")
    with pytest.raises(ProtobufSchemaError, match="has no message 'Nope' .*shop.Order, "
                                                  "shop.Refund"):
        PROTOBUF.reader(latest, held, message="Nope")


@pytest.mark.parametrize("payload, reason", [
    (b"\x02\x0a" + b"\x08\x01", "bad message indexes [5]: the file has 2 message(s) at "
                                "index 0, and 5 is not one"),
    (b"\x04\x00\x08", "bad message indexes [0, 4]: message shop.Order has 1 message(s) at "
                      "index 1, and 4 is not one"),
    (b"", "truncated message indexes: the payload ends inside a varint"),
    (b"\x04\x00", "truncated message indexes: the payload ends inside a varint"),
    (b"\x00\x0a\x05ab", "invalid Protobuf binary for message shop.Order"),
])
def test_undecodable_payloads_are_row_errors(payload, reason):
    held = registry()
    values, errors = PROTOBUF.reader(SCHEMAS[-1], held).decode(SCHEMAS[-1], held, [payload])
    assert values == [None]
    assert errors[0].startswith(reason)


def test_schemas_without_a_spark_type_or_that_do_not_parse_name_subject_and_version():
    held = SchemaRegistry("t")
    tree = registered(20, "tree-value", 2, 'syntax = "proto3"; message Tree { string name = 1; '
                                           'repeated Tree children = 2; }')
    held.register(tree)
    with pytest.raises(ProtobufSchemaError, match=r"subject 'tree-value' version 2 \(schema "
                                                  r"id 20\): field Tree.children is a Tree "
                                                  r"inside Tree: a recursive message"):
        PROTOBUF.reader(tree, held)
    broken = registered(21, "broken-value", 1, 'syntax = "proto3";\nmessage A {\n  int32 x 1;\n}')
    with pytest.raises(ProtobufSchemaError, match=r"subject 'broken-value' version 1 \(schema "
                                                  r"id 21\): the .proto text at line 3 column "
                                                  r"11: expected '=', found '1'"):
        PROTOBUF.reader(broken, held)
    unknown = registered(22, "u-value", 1, 'syntax = "proto3"; import "other.proto"; '
                                           'message A { other.B b = 1; }')
    with pytest.raises(ProtobufSchemaError, match="imports 'other.proto' are not among its "
                                                  "references"):
        PROTOBUF.reader(unknown, held)


def test_a_writer_message_whose_field_changed_type_is_incompatible():
    held = registry()
    reader = PROTOBUF.reader(SCHEMAS[-1], held)
    changed = registered(30, "orders-value", 0, 'syntax = "proto3"; package shop; '
                                                'message Order { string quantity = 3; }')
    values, errors = reader.decode(changed, held, [b"\x00\x1a\x01x"])
    assert values == [None]
    assert errors == ["incompatible writer message shop.Order: field quantity is string in "
                      "the writer's message and int64 in the column's"]
    unparsable = registered(31, "orders-value", 0, "message {")
    with pytest.raises(IncompatibleSchemaError, match="subject 'orders-value' version 0"):
        reader.decode(unparsable, held, [b"\x00"])
    # a value that does not fit the narrower column: a row error naming the field
    narrow = PROTOBUF.reader(SCHEMAS[0], held)
    wide = registered(32, "orders-value", 9, 'syntax = "proto3"; package shop; '
                                             'message Order { int64 quantity = 3; }')
    values, errors = narrow.decode(wide, held, [b"\x00\x18\x05", b"\x00\x18\x80\x80\x80\x80\x10"])
    assert values[0]["quantity"] == 5 and values[1] is None
    assert errors == [None, "field quantity: 4294967296 is out of the range of the column's "
                            "int32"]


def test_older_versions_are_read_by_field_number_as_protobuf_reads_them():
    """A field renamed keeps its number, so its values; a name reused under a new number is
    another field: absent from the old value."""
    held = registry()
    reader = PROTOBUF.reader(SCHEMAS[0], held)  # v1's Order: id = 1, quantity = 3, ...
    names = {f.name: f.number for f in parse_proto(V1_PROTO).message_type[0].field}
    assert names["id"] == 1 and names["quantity"] == 3
    older = registered(40, "orders-value", 0, 'syntax = "proto3"; package shop; '
                                              'message Order { int32 order_id = 1; '
                                              'int64 quantity = 99; }')
    old = classes(parse_proto(older.schema))("shop.Order")
    values, errors = reader.decode(older, held, [body(old(order_id=42, quantity=5))])
    assert errors == [None]
    assert values[0]["id"] == 42  # renamed: the same number
    assert values[0]["quantity"] == 0  # number 3 is absent: proto3's default


# Real-world .proto texts, parsed by the module and loaded in the runtime.
PROTO2_TEXT = """
syntax = "proto2";
package legacy.v1;

option optimize_for = SPEED;

// An account, with proto2 labels and defaults.
message Account {
  required int64 id = 1;
  optional string name = 2 [default = "anon"];
  optional int32 level = 3 [default = 0x10];
  optional Kind kind = 4 [default = ADMIN];
  optional bytes token = 5 [default = "\\001\\x02"];
  repeated int32 scores = 6 [packed = true];
  optional float ratio = 7 [default = -inf];
  extensions 100 to max;

  enum Kind {
    option allow_alias = true;
    USER = 1;
    MEMBER = 1;
    ADMIN = 2;
    reserved 5 to 9;
    reserved "OLD";
  }

  message Nested {
    message Deeper { optional string note = 1; }
    optional Deeper deeper = 1;
  }
  optional Nested nested = 8;
  map<string, Nested.Deeper> notes = 9;
}

extend Account {
  optional string extra = 100;
}

service Accounts {
  rpc Get (Account) returns (Account) { option deprecated = true; }
  rpc List (Account) returns (stream Account);
}
"""


def test_real_world_proto_texts_parse_into_loadable_descriptors():
    file = parse_proto(PROTO2_TEXT, "legacy.proto")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    account = pool.FindMessageTypeByName("legacy.v1.Account")
    assert [f.name for f in account.fields] == [
        "id", "name", "level", "kind", "token", "scores", "ratio", "nested", "notes"]
    fields = account.fields_by_name
    assert fields["name"].default_value == "anon" and fields["level"].default_value == 16
    assert fields["token"].default_value == b"\x01\x02"
    assert fields["kind"].default_value == 2 and fields["ratio"].default_value == float("-inf")
    assert fields["notes"].message_type.GetOptions().map_entry
    assert fields["notes"].message_type.fields_by_name["value"].message_type.full_name == \
        "legacy.v1.Account.Nested.Deeper"
    held = SchemaRegistry("t")
    schema = registered(40, "accounts-value", 1, PROTO2_TEXT)
    held.register(schema)
    reader = PROTOBUF.reader(schema, held)
    assert reader.arrow_type.field("id").nullable is False  # proto2 required
    Account = message_factory.GetMessageClass(account)
    values, errors = reader.decode(schema, held, [b"\x00" + Account(id=1).SerializeToString()])
    assert errors == [None]
    # explicit proto2 defaults are read when absent; other optional fields are null
    assert values[0] == {"id": 1, "name": "anon", "level": 16, "kind": "ADMIN",
                         "token": b"\x01\x02", "scores": [], "ratio": float("-inf"),
                         "nested": None, "notes": []}
    # proto3 with json_name, nested enums used before their declaration, a oneof option
    text = """syntax = 'proto3';
    package a.b;
    message Outer {
      Inner.Mode mode = 1 [json_name = "m"];
      oneof choice { option (x) = 1; Inner inner = 2; string other = 3; }
      message Inner { enum Mode { OFF = 0; ON = 1; } Mode mode = 1; }
      .a.b.Outer.Inner again = 4;
    }"""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(parse_proto(text, "outer.proto"))
    outer = pool.FindMessageTypeByName("a.b.Outer")
    assert outer.fields_by_name["mode"].enum_type.full_name == "a.b.Outer.Inner.Mode"
    assert [f.name for f in outer.oneofs_by_name["choice"].fields] == ["inner", "other"]


def orders_log(root):
    """(log dir, registry export of SCHEMAS) under `root`: topic orders, framed Protobuf
    values of v1 and of the latest version, a null, then a bad magic byte, an unknown
    schema id and a truncated frame (offsets 3, 4 and 5)."""
    from segmentlog_datasource.writer import write_log

    export = root / "registry.json"
    export.write_text(json.dumps([
        {"id": s.id, "subject": s.subject, "version": s.version, "schemaType": "PROTOBUF",
         "schema": s.schema, "references": [
             {"name": r.name, "subject": r.subject, "version": r.version}
             for r in s.references]} for s in SCHEMAS]))

    def framed(schema_id, payload):
        return b"\x00" + schema_id.to_bytes(4, "big") + payload

    logdir = str(root / "logs")
    write_log(logdir, pa.table({"value": [
        framed(1, body(V1(id=1, quantity=3))), None,
        framed(4, body(ORDER(id=2, quantity=2 ** 40, big_count=2 ** 64 - 1, status=2,
                             tags=["a", "b"], counters={"x": 7}, ship_to={"city": "Oslo"},
                             placed_at={"seconds": 1704164645, "nanos": 6000000}))),
        b"\x01" + bytes(8), framed(9, b"\x00"), b"\x00\x00"]}), topic="orders",
        num_partitions=1)
    return logdir, str(export)


def test_a_read_with_value_format_protobuf_decodes_the_topic(tmp_path):
    """The engine's read path (DecodedRead plans and scans, as Spark's reader does), with
    framing errors placed at their offsets."""
    from segmentlog_datasource.decode import DecodedRead
    from segmentlog_datasource.decode.reads import read_schema
    from segmentlog_datasource.format.scan import ScanOptions
    from segmentlog_datasource.read.options import parse_read_options
    from segmentlog_datasource.read.planning import Constraints

    logdir, export = orders_log(tmp_path)

    def read(mode):
        options = {"path": logdir, "valueFormat": "protobuf", "schemas": export,
                   "mode": mode}
        decoded = DecodedRead(options)
        plan = decoded.plan(decoded.read_options(parse_read_options(options)), Constraints())
        table = pa.Table.from_batches(list(decoded.scan(plan, ScanOptions())),
                                      read_schema(options))
        return table.select(["valueDecoded", "valueError"]).to_pylist()

    rows = read("PERMISSIVE")
    assert rows[0]["valueDecoded"]["quantity"] == 3 and rows[0]["valueError"] is None
    assert rows[1] == {"valueDecoded": None, "valueError": None}
    assert rows[2]["valueDecoded"]["ship_to"] == {"city": "Oslo", "zip": ""}
    assert rows[3]["valueError"].startswith("orders-0 offset 3: value: bad magic byte 0x01")
    assert rows[4]["valueError"].startswith("orders-0 offset 4: value: unknown schema id")
    assert rows[5]["valueError"].startswith("orders-0 offset 5: value: truncated payload")
    with pytest.raises(RecordDecodeError, match="orders-0 offset 3: value: bad magic byte"):
        read("FAILFAST")
