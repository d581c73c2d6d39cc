"""Comparing decoded records with Kafka's JSON form of them (the fixtures' manifests),
types included: a boolean matches only a boolean, a number only a number, so a field that
came back as text or as 0/1 fails where plain == would pass it."""
import base64

import pyarrow as pa


def assert_same(actual, expected, where: str) -> None:
    """`actual` (decoded, bytes as base64 already) equals `expected` (Kafka's JSON) in
    value and in JSON type at every depth."""
    _same(actual, expected, where)


def _kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _same(actual, expected, where):
    assert _kind(actual) == _kind(expected), \
        f"{where}: {actual!r} is a {_kind(actual)}, Kafka's JSON has the {_kind(expected)} " \
        f"{expected!r}"
    if isinstance(expected, dict):
        assert sorted(actual) == sorted(expected), \
            f"{where}: fields {sorted(actual)}, Kafka's JSON has {sorted(expected)}"
        for name, item in expected.items():
            _same(actual[name], item, f"{where}.{name}")
    elif isinstance(expected, list):
        assert len(actual) == len(expected), \
            f"{where}: {len(actual)} elements, Kafka's JSON has {len(expected)}"
        for index, (got, item) in enumerate(zip(actual, expected)):
            _same(got, item, f"{where}[{index}]")
    else:
        assert actual == expected, f"{where}: {actual!r}, Kafka's JSON has {expected!r}"


def as_kafka_json(value):
    """A decoded Python value (DecodedRecord's key/value) in Kafka's JSON form: bytes as
    base64."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {name: as_kafka_json(item) for name, item in value.items()}
    if isinstance(value, list):
        return [as_kafka_json(item) for item in value]
    return value


def assert_column_holds(value, arrow_type: pa.DataType, expected, where: str) -> None:
    """A struct column's value (to_pylist) holds Kafka's JSON `expected`: every field Kafka
    gives, equal and of its JSON type; every other field of the struct null (a field the
    record's version does not have)."""
    if expected is None:
        assert value is None, f"{where}: {value!r}, Kafka's JSON has null"
        return
    assert value is not None, f"{where}: null, Kafka's JSON has {expected!r}"
    if pa.types.is_struct(arrow_type):
        assert isinstance(expected, dict), f"{where}: a struct, Kafka's JSON has {expected!r}"
        names = [field.name for field in arrow_type]
        unknown = sorted(set(expected) - set(names))
        assert not unknown, f"{where}: the struct has no field {unknown} (it has {names})"
        for field in arrow_type:
            if field.name in expected:
                assert_column_holds(value[field.name], field.type, expected[field.name],
                                    f"{where}.{field.name}")
            else:
                assert value[field.name] is None, \
                    f"{where}.{field.name}: {value[field.name]!r} where Kafka's JSON has no " \
                    f"such field"
        return
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        assert isinstance(expected, list) and len(value) == len(expected), \
            f"{where}: {value!r}, Kafka's JSON has {expected!r}"
        for index, (got, item) in enumerate(zip(value, expected)):
            assert_column_holds(got, arrow_type.value_type, item, f"{where}[{index}]")
        return
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        value = base64.b64encode(value).decode("ascii")
    _same(value, expected, where)
