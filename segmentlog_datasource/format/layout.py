"""Where each field of Kafka's on-disk entries lives, and the limits of its values.

The one definition that the readers, the encoder, the writer engine and the compiled
decoder use: setup.py runs this file (it imports nothing but struct) and passes the
values the C code needs as macros (fastpath/buildinfo.py lists them; a test checks the
build).

Every entry in a segment starts with the same 17 bytes: int64 offset, int32 length
(bytes after this field), 4 bytes that are the partition leader epoch (magic 2) or the
CRC (magic 0/1), then int8 magic. Magic 2 batches are checked with CRC32C over
everything from the attributes on; magic 0/1 messages with CRC32 from the magic on.
"""
import struct

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
MAX_OFFSET = INT64_MAX  # exclusive upper bound meaning "no end"

# ------------------------------------------------------------------ every entry
LOG_OVERHEAD = 12  # int64 offset + int32 length
ENTRY_PREFIX = struct.Struct(">qiIb")  # offset, length, epoch (v2) or CRC (v0/1), magic
ENTRY_PREFIX_SIZE = ENTRY_PREFIX.size  # 17
MAGIC_POSITION = 16

# ------------------------------------------------------- magic 2 record batch header
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc | attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
V2_HEAD = struct.Struct(">qiibI")  # the part the CRC does not cover
V2_CRC_COVERED = struct.Struct(">hiqqqhii")  # attributes .. recordCount
V2_HEADER = struct.Struct(">qiibIhiqqqhii")
V2_HEADER_SIZE = V2_HEADER.size  # 61
V2_LENGTH_OVERHEAD = V2_HEADER_SIZE - LOG_OVERHEAD  # batchLength of a batch without records
# Byte positions of the fields within a batch.
V2_BASE_OFFSET = 0
V2_LENGTH = 8
V2_LEADER_EPOCH = 12
V2_MAGIC = MAGIC_POSITION
V2_MAGIC_VALUE = 2  # the magic byte of a record batch
V2_CRC = 17
V2_ATTRIBUTES = 21
V2_LAST_OFFSET_DELTA = 23
V2_BASE_TIMESTAMP = 27
V2_MAX_TIMESTAMP = 35
V2_PRODUCER_ID = 43
V2_PRODUCER_EPOCH = 51
V2_BASE_SEQUENCE = 53
V2_RECORD_COUNT = 57
V2_CRC_START = V2_ATTRIBUTES  # CRC32C covers the attributes onwards

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08  # set: LogAppendTime
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# --------------------------------------------------------- magic 0/1 messages
V1_TIMESTAMP = struct.Struct(">q")
LEGACY_CRC_START = MAGIC_POSITION  # CRC32 covers the magic onwards
LEGACY_ATTRIBUTES = 17
LEGACY_TIMESTAMP = 18  # magic 1 only
MIN_LEGACY_MESSAGE_SIZE = {0: 14, 1: 22}  # crc..value length with empty key and value

# ------------------------------------------------------------------ timestamps
NO_TIMESTAMP_TYPE, CREATE_TIME, LOG_APPEND_TIME = -1, 0, 1
TIMESTAMP_TYPE_NAMES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}

assert V2_HEAD.size + V2_CRC_COVERED.size == V2_HEADER_SIZE == 61
