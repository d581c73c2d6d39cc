"""`segmentlog dump --print-data --decoder avro|json|protobuf`: Schema Registry framed keys
and values shown decoded, with the schemas of the log's own _schemas topic or an export."""
import io
import json
import struct

import avro.io
import avro.schema
import pyarrow as pa
from click.testing import CliRunner

from segmentlog_datasource.cli.main import main as cli
from segmentlog_datasource.schemas.registry_records import (
    SchemaValue, encode_record)
from segmentlog_datasource.writer import write_log

SCHEMA = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "item", "type": "string"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 6,
                               "scale": 2}},
    {"name": "note", "type": ["null", "string"], "default": None}]}


def framed(schema_id, schema, datum) -> bytes:
    """Encoded by Apache's avro package, framed as Confluent's serializer frames it."""
    out = io.BytesIO()
    avro.io.DatumWriter(avro.schema.parse(json.dumps(schema))).write(
        datum, avro.io.BinaryEncoder(out))
    return b"\x00" + struct.pack(">i", schema_id) + out.getvalue()


def dump(*args):
    result = CliRunner().invoke(cli, ["dump", *args])
    return result.exit_code, result.output


def test_dump_decodes_framed_avro_and_json(tmp_path):
    from decimal import Decimal

    logdir = str(tmp_path / "logs")
    registered = encode_record(SchemaValue(subject="orders-value", version=1, id=7,
                                           schema=json.dumps(SCHEMA)))
    write_log(logdir, pa.table({"key": [registered[0]], "value": [registered[1]]}),
              topic="_schemas", num_partitions=1)
    values = [framed(7, SCHEMA, {"id": 1, "item": "tea", "price": Decimal("3.50"),
                                 "note": None}),
              framed(7, SCHEMA, {"id": 2, "item": "cup", "price": Decimal("12.00"),
                                 "note": "gift"}),
              b"\x00\x00\x00\x00\x63" + b"\x02",  # schema id 99: not registered
              b"plain"]
    write_log(logdir, pa.table({"value": values}), topic="orders", num_partitions=1)
    code, output = dump(f"{logdir}/orders-0", "--print-data", "--decoder", "avro", "--json")
    assert code == 0, output
    shown = [json.loads(line)["value"] for line in output.splitlines()
             if json.loads(line).get("kind") == "record"]
    assert shown[:2] == [{"id": 1, "item": "tea", "price": "3.50", "note": None},
                         {"id": 2, "item": "cup", "price": "12.00", "note": "gift"}]
    assert shown[2].startswith("undecodable: ") and "99" in shown[2]
    assert shown[3].startswith("undecodable: bad magic byte 0x70")
    # The same schemas from an export, in text mode.
    export = tmp_path / "registry.json"
    export.write_text(json.dumps([{"id": 7, "subject": "orders-value", "version": 1,
                                   "schema": json.dumps(SCHEMA)}]))
    code, output = dump(f"{logdir}/orders-0", "--print-data", "--decoder", "avro",
                        "--schemas", str(export))
    assert code == 0 and '"item": "cup"' in output and '"note": "gift"' in output, output
    # Framed JSON Schema values need no schema to be shown.
    json_values = [b"\x00\x00\x00\x00\x08" + json.dumps({"id": 3}).encode(), b'{"id": 4}']
    write_log(logdir, pa.table({"value": json_values}), topic="events", num_partitions=1)
    code, output = dump(f"{logdir}/events-0", "--print-data", "--decoder", "json", "--json")
    assert [json.loads(line)["value"] for line in output.splitlines()
            if json.loads(line).get("kind") == "record"] == [{"id": 3}, {"id": 4}]
    code, output = dump(f"{logdir}/events-0", "--print-data", "--decoder", "hex",
                        "--schemas", str(export))
    assert code == 2 and "--schemas is for the decoders of framed values" in output, output
    code, output = dump(f"{logdir}/events-0", "--print-data", "--decoder", "avro",
                        "--schemas", str(tmp_path / "missing.json"))
    assert code == 2 and f"--schemas {tmp_path / 'missing.json'}: " in output, output


def test_dump_decodes_values_and_shows_plain_keys_as_text(tmp_path):
    """--decoder avro decodes values; string keys stay text (no 'bad magic byte' on every
    record), unless --key-decoder says how keys are framed."""
    from decimal import Decimal

    logdir = str(tmp_path / "logs")
    registered = encode_record(SchemaValue(subject="orders-value", version=1, id=7,
                                           schema=json.dumps(SCHEMA)))
    write_log(logdir, pa.table({"key": [registered[0]], "value": [registered[1]]}),
              topic="_schemas", num_partitions=1)
    value = framed(7, SCHEMA, {"id": 1, "item": "tea", "price": Decimal("3.50"),
                               "note": None})
    write_log(logdir, pa.table({"key": [b"customer-1"], "value": [value]}), topic="orders",
              num_partitions=1)
    code, output = dump(f"{logdir}/orders-0", "--print-data", "--decoder", "avro", "--json")
    assert code == 0, output
    (record,) = [json.loads(line) for line in output.splitlines()
                 if json.loads(line).get("kind") == "record"]
    assert (record["key"], record["value"]["item"]) == ("customer-1", "tea")
    code, output = dump(f"{logdir}/orders-0", "--print-data", "--decoder", "avro",
                        "--key-decoder", "avro", "--json")
    (record,) = [json.loads(line) for line in output.splitlines()
                 if json.loads(line).get("kind") == "record"]
    assert record["key"].startswith("undecodable: bad magic byte"), record
    code, output = dump(f"{logdir}/orders-0", "--print-data", "--decoder", "hex", "--json")
    (record,) = [json.loads(line) for line in output.splitlines()
                 if json.loads(line).get("kind") == "record"]
    assert record["key"] == b"customer-1".hex()  # a display decoder shows keys too
    code, output = dump(f"{logdir}/orders-0", "--offsets-decoder", "--key-decoder", "hex")
    assert code == 2 and "--key-decoder is for other topics" in output, output


def schemas_topic(logdir, entries):
    """A `_schemas` topic holding `entries` (export entries), its records written as
    Schema Registry writes them."""
    keys = [json.dumps({"keytype": "SCHEMA", "subject": entry["subject"],
                        "version": entry["version"], "magic": 1}).encode() for entry in entries]
    values = [json.dumps(dict(entry, deleted=False)).encode() for entry in entries]
    write_log(logdir, pa.table({"key": keys, "value": values}), topic="_schemas",
              num_partitions=1)


def shown_records(output, field="value"):
    return [json.loads(line)[field] for line in output.splitlines()
            if json.loads(line).get("kind") == "record"]


def test_dump_json_with_schemas_checks_the_schema_ids(tmp_path):
    export = tmp_path / "registry.json"
    export.write_text(json.dumps([
        {"id": 7, "subject": "orders-value", "version": 1, "schema": json.dumps(SCHEMA)},
        {"id": 8, "subject": "events-value", "version": 1, "schemaType": "JSON",
         "schema": json.dumps({"type": "object", "properties": {"id": {"type": "integer"}}})}]))
    logdir = str(tmp_path / "logs")
    json_frame = b"\x00\x00\x00\x00\x08"
    write_log(logdir, pa.table({"value": [
        json_frame + b'{"id": 3}', b'{"id": 4}', b"\x00\x00\x00\x00\x07" + b'{"id": 5}',
        b"\x00\x00\x00\x00\x63" + b'{"id": 6}', json_frame + b"{oops", b"text"]}),
        topic="events", num_partitions=1)
    code, output = dump(f"{logdir}/events-0", "--print-data", "--decoder", "json",
                        "--schemas", str(export), "--json")
    assert code == 0, output
    shown = shown_records(output)
    assert shown[:2] == [{"id": 3}, {"id": 4}]
    assert shown[2] == ("undecodable: schema id 7 (orders-value version 1) is a schema of "
                        "type AVRO, and --decoder json decodes JSON schemas")
    assert shown[3].startswith(f"undecodable: schema id 99 is not in the schema registry "
                               f"export {export}")
    assert shown[4].startswith("undecodable: schema id 8 (events-value version 1): invalid "
                               "JSON after the schema id")
    assert shown[5] == "text"  # not framed: shown as without --schemas
    # Without --schemas no registry is needed (the log has no _schemas topic)
    code, output = dump(f"{logdir}/events-0", "--print-data", "--decoder", "json", "--json")
    assert code == 0 and shown_records(output)[:3] == [{"id": 3}, {"id": 4}, {"id": 5}]


def test_dump_decodes_framed_protobuf_by_message_indexes(tmp_path):
    """Payloads serialized by the protobuf runtime from hand-built descriptors; the
    registry holds the .proto texts of the same files."""
    from google.protobuf import json_format

    from decode.test_protobuf_values import LINE, ORDER, REFUND, SCHEMAS, V1, body

    def framed_proto(schema_id, payload):
        return b"\x00" + struct.pack(">i", schema_id) + payload

    entries = [{"id": s.id, "subject": s.subject, "version": s.version,
                "schemaType": "PROTOBUF", "schema": s.schema,
                "references": [{"name": r.name, "subject": r.subject, "version": r.version}
                               for r in s.references]} for s in SCHEMAS]
    entries.append({"id": 7, "subject": "avro-value", "version": 1,
                    "schema": json.dumps(SCHEMA)})
    logdir = str(tmp_path / "logs")
    schemas_topic(logdir, entries)
    order = ORDER(id=2, quantity=5, status=1, tags=["a", "b"], counters={"x": 7},
                  ship_to={"city": "Oslo"}, card="visa", big_count=2 ** 64 - 1,
                  blob=b"\x01\xff", discount={"value": -5},  # the test pool's own classes
                  placed_at={"seconds": 1704164645, "nanos": 6000000})
    values = [framed_proto(1, body(V1(id=1, quantity=3))),
              framed_proto(4, body(order)),
              framed_proto(4, body(REFUND(order_id=9), b"\x02\x02")),  # indexes [1]
              framed_proto(4, body(LINE(sku="s", count=4), b"\x04\x00\x00")),  # [0, 0]
              framed_proto(4, b"\x02\x0a" + b"\x08\x01"),  # indexes [5]
              framed_proto(4, b"\x00\x0a\x05ab"),  # a string field cut short
              framed_proto(99, b"\x00"),
              framed_proto(7, b"\x00"),
              b"plain"]
    keys = [framed_proto(1, body(V1(id=7)))] + [None] * (len(values) - 1)
    write_log(logdir, pa.table({"key": keys, "value": values}), topic="orders",
              num_partitions=1)
    code, output = dump(f"{logdir}/orders-0", "--print-data", "--decoder", "protobuf",
                        "--key-decoder", "protobuf", "--json")
    assert code == 0, output
    shown = shown_records(output)
    assert shown_records(output, "key")[:2] == [{"id": 7, "legacy": "", "quantity": 0}, None]
    # The runtime's JSON form, field names as in the .proto, fields at defaults included
    assert shown[0] == {"id": 1, "legacy": "", "quantity": 3}
    assert {name: shown[1][name] for name in (
        "id", "quantity", "status", "tags", "counters", "ship_to", "card", "big_count",
        "blob", "discount", "placed_at", "note", "lines")} == {
        "id": 2, "quantity": "5", "status": "PLACED", "tags": ["a", "b"],
        "counters": {"x": "7"}, "ship_to": {"city": "Oslo", "zip": ""}, "card": "visa",
        "big_count": "18446744073709551615", "blob": "Af8=", "discount": -5,
        "placed_at": "2024-01-02T03:04:05.006Z", "note": "", "lines": []}
    assert "voucher" not in shown[1] and "coupon" not in shown[1]  # unset: have presence
    assert list(shown[1]) == [  # as the .proto declares them
        "id", "quantity", "note", "delta", "small_count", "big_count", "checksum", "offset",
        "price", "ratio", "paid", "blob", "status", "lines", "tags", "counters",
        "lines_by_number", "card", "placed_at", "discount", "ship_to"]
    # the same as the hand-built message in the runtime's JSON form
    assert shown[1] == json_format.MessageToDict(
        order, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    assert shown[2:4] == [{"order_id": 9}, {"sku": "s", "count": 4}]
    assert shown[4] == ("undecodable: schema id 4 (orders-value version 3): bad message "
                        "indexes [5]: the file has 2 message(s) at index 0, and 5 is not one")
    assert shown[5].startswith("undecodable: schema id 4 (orders-value version 3): invalid "
                               "Protobuf binary for message shop.Order (message indexes [0])")
    assert shown[6].startswith("undecodable: schema id 99 is not in the _schemas topic under ")
    assert shown[7] == ("undecodable: schema id 7 (avro-value version 1) is a schema of type "
                        "AVRO, and --decoder protobuf decodes PROTOBUF schemas")
    assert shown[8].startswith("undecodable: bad magic byte 0x70")
    # --schemas, an export of the same schemas; text mode
    export = tmp_path / "registry.json"
    export.write_text(json.dumps(entries))
    code, output = dump(f"{logdir}/orders-0", "--print-data", "--decoder", "protobuf",
                        "--schemas", str(export))
    assert code == 0 and 'payload: {"id": 1, "legacy": "", "quantity": 3}' in output, output
    assert 'payload: {"order_id": 9}' in output
    # No _schemas beside and no --schemas: each framed record says where schemas come from
    bare = str(tmp_path / "bare")
    write_log(bare, pa.table({"value": values[:1]}), topic="orders", num_partitions=1)
    code, output = dump(f"{bare}/orders-0", "--print-data", "--decoder", "protobuf", "--json")
    assert code == 0, output
    assert shown_records(output)[0].startswith("undecodable: decoding values needs their "
                                               "schemas, and there is no _schemas topic")
