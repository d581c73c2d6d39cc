"""The records of `__transaction_state`: the transaction coordinator's keys and values.

Framed as coordinator.py says, with one record type (0): the key holds the transactional
id, the value TransactionLogValue (version 1 is flexible, with the tagged
previousProducerId, nextProducerId, nextProducerEpoch and clientTransactionVersion of
transaction version 2). A null value deletes the transactional id (it expired). As Kafka's
transaction coordinator loads the log (TransactionLog.readTxnRecordValue), these are
errors too: a transaction status that is no TransactionState, null transactionPartitions
in any state but Empty, a clientTransactionVersion that is no transaction.version level.
"""
from ...errors import RecordDecodeError
from .coordinator import CoordinatorTopic, key_message
from .messages import Array, Field, Message, Struct

RECORD_TYPE = "TransactionLog"

TRANSACTION_LOG_KEY = key_message("TransactionLogKey", Field("transactionalId", "string"))

TRANSACTION_LOG_VALUE = Message("TransactionLogValue", "0-1", "1+", (
    Field("producerId", "int64"),
    Field("previousProducerId", "int64", "1+", tag=0, tagged_versions="1+", default=-1),
    Field("nextProducerId", "int64", "1+", tag=1, tagged_versions="1+", default=-1),
    Field("producerEpoch", "int16"),
    Field("nextProducerEpoch", "int16", "1+", tag=3, tagged_versions="1+", default=-1),
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

# the transaction.version feature levels Kafka 4.2 knows (TransactionVersion)
TRANSACTION_VERSIONS = (0, 1, 2)

STATE = "state"  # the value field decode() adds: transactionStatus's state name
_DERIVED = Message("TransactionLogValue", "0", "none", (Field(STATE, "string"),))


class TransactionState(CoordinatorTopic):
    option_value = "transactionState"
    topic = "__transaction_state"
    records = {0: (RECORD_TYPE, TRANSACTION_LOG_KEY, TRANSACTION_LOG_VALUE)}
    record_types = (RECORD_TYPE,)
    added_fields = {RECORD_TYPE: (_DERIVED, 0)}

    def complete(self, name: str, value: dict, version: int) -> None:
        status = value["transactionStatus"]
        if status not in TRANSACTION_STATES:
            raise RecordDecodeError(
                f"TransactionLogValue version {version} has transactionStatus {status}, "
                f"which is no transaction state (0 to 7 are)")
        state = TRANSACTION_STATES[status]
        if state != "Empty" and value["transactionPartitions"] is None:
            raise RecordDecodeError(
                f"TransactionLogValue version {version} has null transactionPartitions in "
                f"state {state} (only an Empty transaction has none)")
        level = value.get("clientTransactionVersion", 0)
        if level not in TRANSACTION_VERSIONS:
            raise RecordDecodeError(
                f"TransactionLogValue version {version} has clientTransactionVersion "
                f"{level}, which is no transaction.version level (0 to 2 are)")
        value[STATE] = state


TRANSACTION_STATE = TransactionState()
