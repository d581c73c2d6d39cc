"""Control records: the records of control batches (transaction markers, KRaft records).

Kafka's ControlRecordType: a control record's key is (version int16, type int16); a
transaction marker's value (EndTransactionMarker) is (version int16, coordinatorEpoch
int32). What the other types' values hold is theirs (KRaft messages), left as bytes.
"""
import struct
from typing import Optional, Tuple

from ..errors import CorruptLogError

ABORT, COMMIT = 0, 1
CONTROL_TYPE_NAMES = {
    ABORT: "ABORT", COMMIT: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS",
}
UNKNOWN = "UNKNOWN"  # Kafka's name for a type id it does not know
CONTROL_KEY = struct.Struct(">hh")  # version, type
END_TXN_MARKER = struct.Struct(">hi")  # version, coordinator epoch


def control_type_name(type_id: int) -> str:
    return CONTROL_TYPE_NAMES.get(type_id, UNKNOWN)


def is_transaction_marker(type_id: int) -> bool:
    return type_id in (ABORT, COMMIT)


def parse_control_record(key: Optional[bytes], value: Optional[bytes], path, position: int,
                         offset: int) -> Tuple[int, Optional[int]]:
    """(type id, coordinator epoch or None) of the control record at `offset` (in the batch
    at `position` of `path`), as Kafka's ControlRecordType.parseTypeId and
    EndTransactionMarker.deserialize read them."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptLogError(
            path, position,
            f"control record at offset {offset} has a key of "
            f"{'no' if key is None else len(key)} bytes, not the {CONTROL_KEY.size} of a "
            f"control record key (version, type)")
    version, type_id = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptLogError(path, position, f"control record at offset {offset} has key "
                                              f"version {version}")
    if not is_transaction_marker(type_id):
        return type_id, None
    if value is None or len(value) < END_TXN_MARKER.size:
        raise CorruptLogError(
            path, position,
            f"{control_type_name(type_id)} marker at offset {offset} has a value of "
            f"{'no' if value is None else len(value)} bytes, not the {END_TXN_MARKER.size} of "
            f"a transaction marker (version, coordinator epoch)")
    marker_version, coordinator_epoch = END_TXN_MARKER.unpack_from(value)
    if marker_version < 0:
        raise CorruptLogError(path, position, f"{control_type_name(type_id)} marker at offset "
                                              f"{offset} has version {marker_version}")
    return type_id, coordinator_epoch
