"""The records of `__transaction_state`: the transaction coordinator's keys and values.

The key is an int16 version (0) then the transactional id; the value an int16 version then
TransactionLogValue (version 1 is flexible; Kafka 4.0 adds the tagged previousProducerId,
nextProducerId and clientTransactionVersion). A null value deletes the transactional id (it
expired). As Kafka's transaction coordinator loads the log: a key version it does not know
is skipped (here a record of type "UNKNOWN_<n>"), a value version it does not know is an
error, and so is a transaction status that is no TransactionState.
"""
from typing import Optional

from ...errors import RecordDecodeError
from .messages import Array, Field, Message, Struct, field_tree, read_version
from .topics import DecodedRecord, InternalTopic, register

RECORD_TYPE = "TransactionLog"

TRANSACTION_LOG_KEY = Message("TransactionLogKey", "0", "none", (
    Field("transactionalId", "string"),
))

TRANSACTION_LOG_VALUE = Message("TransactionLogValue", "0-1", "1+", (
    Field("producerId", "int64"),
    Field("previousProducerId", "int64", "1+", tag=0, tagged_versions="1+", default=-1),
    Field("nextProducerId", "int64", "1+", tag=1, tagged_versions="1+", default=-1),
    Field("producerEpoch", "int16"),
    Field("transactionTimeoutMs", "int32"),
    Field("transactionStatus", "int8"),
    Field("transactionPartitions", Array(Struct("PartitionsSchema", (
        Field("topic", "string"),
        Field("partitionIds", Array("int32")),
    ))), nullable="0+"),
    Field("transactionLastUpdateTimestampMs", "int64"),
    Field("transactionStartTimestampMs", "int64"),
    Field("clientTransactionVersion", "int16", "1+", tag=2, tagged_versions="1+"),
))

# Kafka's TransactionState by the id a value's transactionStatus holds
TRANSACTION_STATES = {
    0: "Empty",
    1: "Ongoing",
    2: "PrepareCommit",
    3: "PrepareAbort",
    4: "CompleteCommit",
    5: "CompleteAbort",
    6: "Dead",
    7: "PrepareEpochFence",
}

STATE = "state"  # the value field decode() adds: transactionStatus's state name
_DERIVED = Message("TransactionLogValue", "0", "none", (Field(STATE, "string"),))


class TransactionState(InternalTopic):
    option_value = "transactionState"
    topic = "__transaction_state"
    record_types = (RECORD_TYPE,)

    def decode(self, key: Optional[bytes], value: Optional[bytes]) -> DecodedRecord:
        key_version, start = read_version(key, "the __transaction_state record's key")
        if key_version != 0:
            return DecodedRecord(f"UNKNOWN_{key_version}", key_version, None, None, None,
                                 deleted=value is None, known=False)
        decoded_key = TRANSACTION_LOG_KEY.decode(key, key_version, start)
        if value is None:
            return DecodedRecord(RECORD_TYPE, key_version, None, decoded_key, None,
                                 deleted=True)
        value_version, start = read_version(value, "the TransactionLogValue")
        decoded_value = TRANSACTION_LOG_VALUE.decode(value, value_version, start)
        status = decoded_value["transactionStatus"]
        if status not in TRANSACTION_STATES:
            raise RecordDecodeError(
                f"TransactionLogValue version {value_version} has transactionStatus "
                f"{status}, which is no transaction state (0 to 7 are)")
        decoded_value[STATE] = TRANSACTION_STATES[status]
        return DecodedRecord(RECORD_TYPE, key_version, value_version, decoded_key,
                             decoded_value)

    def key_fields(self):
        return field_tree([(TRANSACTION_LOG_KEY, [0])])

    def value_fields(self):
        return field_tree([(TRANSACTION_LOG_VALUE, [0, 1]), (_DERIVED, [0])])


TRANSACTION_STATE = register(TransactionState())
