"""`segmentlog dump --print-data --decoder avro|json`: Schema Registry framed keys and
values shown decoded, with the schemas of the log's own _schemas topic or an export."""
import io
import json
import struct

import avro.io
import avro.schema
import pyarrow as pa
from click.testing import CliRunner

from segmentlog_datasource.cli.main import main as cli
from segmentlog_datasource.format.internal.schema_registry_records import (
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
    code, output = dump(f"{logdir}/events-0", "--decoder", "json", "--schemas", str(export))
    assert code == 2 and "--schemas is for --decoder avro" in output
