"""An independent reader of the records of Kafka's internal topics, as Kafka 4.2's own code
reads them, for comparing segmentlog's decoding with (tests/format/test_internal_damage.py).

It works from Kafka's message definitions as kafka_messages.py writes them out, never from
segmentlog's tables or code, and does what Kafka's code does, learnt from its source
(4.2.0-rc1):

- The generated read() of a message class (the generator's MessageDataGenerator): a field
  is read, a length is a varint or a fixed int, a null allowed, as the version checks the
  generator wrote say; it writes only the checks whose outcome is not certain over the
  versions the class can be read at (VersionConditional), so a message read at a version
  outside its own reads as those remaining comparisons say, and a struct's class refuses
  a version outside its enclosing class's where its own versions reach past them. A
  negative length is null where the field is nullable at the version, else "non-nullable
  field was serialized as null"; a string longer than 0x7fff, an array count larger than
  the bytes left, a byte array longer than them are refused; a string's bytes become a
  Java String (what is not UTF-8 turns into U+FFFD, java_string). Tagged fields: a
  count, then tag and size; a tag the class declares is read (its size not checked) or
  refused where not valid at the version; another tag is skipped by its size.
- ByteBufferAccessor / ByteUtils: lengths and varints are Java ints (a varint of 5 bytes
  whose last has its high bit set is refused); reads past the end are refused.
- The serdes: CoordinatorRecordSerde (key: int16 record type, the key message read at
  that record type as version; an unknown type is UnknownRecordTypeException, which the
  loader skips; a null value a tombstone; value: int16 version checked against the
  message's versions, then read; bytes left after a key or value are not looked at), the
  transaction coordinator's TransactionLog (the same framing, with TransactionState,
  transactionPartitions and TransactionVersion checks of the value), and
  AbstractApiMessageSerde (varint frame version, api key and version as shorts, frame
  version 1 only, the message read at the version without a check, bytes left over
  refused) for the metadata log and, with RemoteLogMetadataSerde's transforms' checks,
  the remote log metadata topic.
"""
import base64
import struct
from collections import namedtuple

from . import kafka_messages

Outcome = namedtuple("Outcome", "kind record_type key value_version value reason")
# kind: "record" (read), "tombstone", "skipped" (a coordinator record of a type the loader
# does not know), "refused", "unknown-type" (refused: an api key the serde has no message
# for)

_SHORT_MAX = 0x7FFF


class Refused(Exception):
    """What Kafka's code throws reading the record."""


class _Versions:
    """Kafka's Versions: [lowest, highest], empty as (0, -1)."""

    def __init__(self, lowest, highest):
        self.lowest, self.highest = lowest, highest

    @classmethod
    def parse(cls, text):
        if text is None or text.strip() == "none":
            return NONE
        text = text.strip()
        if text.endswith("+"):
            return cls(int(text[:-1]), _SHORT_MAX)
        if "-" in text:
            low, high = text.split("-")
            return cls(int(low), int(high))
        return cls(int(text), int(text))

    def empty(self):
        return self.lowest > self.highest

    def intersect(self, other):
        low, high = max(self.lowest, other.lowest), min(self.highest, other.highest)
        return NONE if low > high else _Versions(low, high)

    def subtract(self, other):
        if other.lowest <= self.lowest:
            if other.highest >= self.highest:
                return NONE
            if other.highest < self.lowest:
                return self
            return _Versions(other.highest + 1, self.highest)
        if other.highest >= self.highest:
            new_high = other.lowest - 1
            if new_high < 0:
                return self
            if new_high < self.highest:
                return _Versions(self.lowest, new_high)
            return self
        return None


NONE = _Versions(0, -1)


def _taken(containing, possible, version):
    """Which branch VersionConditional.generate() writes code for, at `version`: True
    for the branch of `containing`."""
    if possible.lowest < containing.lowest:
        if possible.highest > containing.highest:  # generateFullRangeCheck
            return containing.lowest <= version <= containing.highest
        if possible.highest >= containing.lowest:  # generateLowerRangeCheck
            return version >= containing.lowest
        return False  # generateAlwaysFalseCheck
    if possible.highest >= containing.lowest and possible.lowest <= containing.highest:
        if possible.highest > containing.highest:  # generateUpperRangeCheck
            return version <= containing.highest
        return True  # generateAlwaysTrueCheck
    return False


def _java_int(value):
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


class _Buffer:
    """A ByteBuffer read as ByteBufferAccessor reads it."""

    def __init__(self, data, sites=None):
        self.data = bytes(data)
        self.pos = 0
        self.sites = sites  # a list to note (start, end, kind) of lengths, counts, tags in

    def note(self, start, kind):
        if self.sites is not None:
            self.sites.append((start, self.pos, kind))

    def remaining(self):
        return len(self.data) - self.pos

    def _take(self, count):
        if count > self.remaining():
            raise Refused("BufferUnderflowException")
        chunk = self.data[self.pos:self.pos + count]
        self.pos += count
        return chunk

    def get(self):
        return struct.unpack(">b", self._take(1))[0]

    def get_short(self):
        return struct.unpack(">h", self._take(2))[0]

    def get_int(self):
        return struct.unpack(">i", self._take(4))[0]

    def get_long(self):
        return struct.unpack(">q", self._take(8))[0]

    def get_double(self):
        return struct.unpack(">d", self._take(8))[0]

    def read_unsigned_varint(self):
        """ByteUtils.readUnsignedVarint(ByteBuffer), its arithmetic on Java ints."""
        tmp = self.get()
        if tmp >= 0:
            return tmp
        result = tmp & 127
        for shift in (7, 14, 21):
            tmp = self.get()
            if tmp >= 0:
                return _java_int(result | tmp << shift)
            result |= (tmp & 127) << shift
        tmp = self.get()
        result = _java_int(result | (tmp & 0xFF) << 28)
        if tmp < 0:
            raise Refused("Varint is too long, the most significant bit in the 5th byte is set")
        return result

    def read_array(self, size):
        if size < 0:
            raise Refused("NegativeArraySizeException")
        if size > self.remaining():
            raise Refused(f"Error reading byte array of {size} byte(s)")
        return self._take(size)


def java_string(data):
    """new String(data, StandardCharsets.UTF_8), after JDK 17's String.decodeUTF8_UTF16,
    its bytes taken as Java's signed bytes (checked against the JDK by
    tests/fixtures/java-utf8)."""
    src = [b - 256 if b >= 128 else b for b in data]
    units = []
    repl = 0xFFFD
    sp, sl = 0, len(src)

    def cont_bad(b):  # isNotContinuation
        return (b & 0xC0) != 0x80

    while sp < sl:
        b1 = src[sp]
        sp += 1
        if b1 >= 0:
            units.append(b1)
        elif (b1 >> 5) == -2 and (b1 & 0x1E) != 0:
            if sp < sl:
                b2 = src[sp]
                sp += 1
                if cont_bad(b2):
                    units.append(repl)
                    sp -= 1
                else:
                    units.append(((b1 & 0x1F) << 6) | (b2 & 0x3F))
                continue
            units.append(repl)
            break
        elif (b1 >> 4) == -2:
            if sp + 1 < sl:
                b2, b3 = src[sp], src[sp + 1]
                sp += 2
                if (b1 == -32 and (b2 & 0xE0) == 0x80) or cont_bad(b2) or cont_bad(b3):
                    units.append(repl)
                    sp -= 3
                    sp += 1 if (b1 == -32 and (b2 & 0xE0) == 0x80) or cont_bad(b2) else 2
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    units.append(repl if 0xD800 <= c <= 0xDFFF else c)
                continue
            if sp < sl and ((b1 == -32 and (src[sp] & 0xE0) == 0x80) or cont_bad(src[sp])):
                units.append(repl)
                continue
            units.append(repl)
            break
        elif (b1 >> 3) == -2:
            if sp + 2 < sl:
                b2, b3, b4 = src[sp], src[sp + 1], src[sp + 2]
                sp += 3
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | \
                    (b4 & 0x3F)
                if cont_bad(b2) or cont_bad(b3) or cont_bad(b4) or \
                        not 0x10000 <= uc <= 0x10FFFF:
                    units.append(repl)
                    sp -= 4
                    u1, u2 = src[sp] & 0xFF, src[sp + 1] & 0xFF
                    if u1 > 0xF4 or (u1 == 0xF0 and (u2 < 0x90 or u2 > 0xBF)) or \
                            (u1 == 0xF4 and (u2 & 0xF0) != 0x80) or cont_bad(u2):
                        sp += 1
                    elif cont_bad(src[sp + 2]):
                        sp += 2
                    else:
                        sp += 3
                else:
                    units.append(0xD800 + ((uc - 0x10000) >> 10))
                    units.append(0xDC00 + ((uc - 0x10000) & 0x3FF))
                continue
            u1 = b1 & 0xFF
            if u1 > 0xF4 or sp < sl and (
                    (u1 == 0xF0 and not 0x90 <= (src[sp] & 0xFF) <= 0xBF) or
                    (u1 == 0xF4 and (src[sp] & 0xF0) != 0x80) or cont_bad(src[sp])):
                units.append(repl)
                continue
            sp += 1
            units.append(repl)
            if sp < sl and cont_bad(src[sp]):
                continue
            break
        else:
            units.append(repl)
    raw = b"".join(unit.to_bytes(2, "big") for unit in units)
    return raw.decode("utf-16-be")


def _lower_first(name):
    return name[0].lower() + name[1:]


_PRIMITIVES = ("bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
               "uuid")
_VARIABLE = ("string", "bytes", "records")


class _MessageReader:
    """One message's generated read() at one version."""

    def __init__(self, spec, version):
        self.spec = spec
        self.version = version
        self.flexible = _Versions.parse(spec["flexible"])

    def read(self, buf):
        valid = _Versions.parse(self.spec["valid"])
        return self._read_class(buf, self.spec["fields"], valid, valid)

    def _read_class(self, buf, fields, parent, own):
        version = self.version
        if not _taken(parent, own, version):
            raise Refused(f"Can't read version {version}")
        current = parent.intersect(own)
        out = {}
        for field in fields:
            versions = _Versions.parse(field["versions"])
            mandatory = versions.subtract(_Versions.parse(field["tagged"]))
            if _taken(mandatory, current, version):
                out[_lower_first(field["name"])] = self._read_untagged(
                    buf, field, current.intersect(mandatory), current)
        if _taken(self.flexible, current, version):
            current_flexible = self.flexible.intersect(current)
            known = {}
            for field in fields:
                valid = _Versions.parse(field["versions"]).intersect(
                    _Versions.parse(field["tagged"]))
                if not valid.empty():
                    known[field["tag"]] = (field, valid)
            start = buf.pos
            count = buf.read_unsigned_varint()
            buf.note(start, "varint")
            index = 0
            while index < count:
                start = buf.pos
                tag = buf.read_unsigned_varint()
                buf.note(start, "varint")
                start = buf.pos
                size = buf.read_unsigned_varint()
                buf.note(start, "varint")
                if tag in known:
                    field, valid = known[tag]
                    if not _taken(valid, current_flexible, version):
                        raise Refused(f"Tag {tag} is not valid for version {version}")
                    out[_lower_first(field["name"])] = self._read_tagged(
                        buf, field, current_flexible.intersect(valid), current)
                else:
                    buf.read_array(size)  # readUnknownTaggedField
                index += 1
        return out

    def _read_untagged(self, buf, field, possible, current):
        kind = field["type"]
        if kind.startswith("[]"):
            element = kind[2:]
            if element in _VARIABLE or element not in _PRIMITIVES:
                # serializationIsDifferentInFlexibleVersions: one loop per side
                if _taken(self.flexible, possible, self.version):
                    possible = possible.intersect(self.flexible)
                else:
                    possible = possible.subtract(self.flexible) or possible
            return self._variable(buf, field, kind, possible, current,
                                  _Versions.parse(field["nullable"]))
        if kind in _VARIABLE:
            return self._variable(buf, field, kind, possible, current,
                                  _Versions.parse(field["nullable"]))
        if kind in _PRIMITIVES:
            return self._primitive(buf, kind)
        return self._struct_field(buf, field, possible, current, tagged=False)

    def _read_tagged(self, buf, field, possible, current):
        kind = field["type"]
        if kind.startswith("[]") or kind in _VARIABLE:
            return self._variable(buf, field, kind, possible, current,
                                  _Versions.parse(field["nullable"]))
        if kind in _PRIMITIVES:
            return self._primitive(buf, kind)
        return self._struct_field(buf, field, possible, current, tagged=True)

    def _variable(self, buf, field, kind, possible, current, nullable):
        """generateVariableLengthReader."""
        start = buf.pos
        if _taken(self.flexible, possible, self.version):
            length = _java_int(buf.read_unsigned_varint() - 1)
            buf.note(start, "compact")
        elif kind == "string":
            length = buf.get_short()
            buf.note(start, "int16")
        else:
            length = buf.get_int()
            buf.note(start, "int32")
        if length < 0:
            if _taken(nullable, possible, self.version):
                return None
            raise Refused(f"non-nullable field {_lower_first(field['name'])} was serialized "
                          f"as null")
        if kind == "string":
            if length > 0x7FFF:
                raise Refused(f"string field {_lower_first(field['name'])} had invalid "
                              f"length {length}")
            return java_string(buf.read_array(length))
        if kind in ("bytes", "records"):
            return buf.read_array(length)
        if length > buf.remaining():
            raise Refused(f"Tried to allocate a collection of size {length}")
        element = kind[2:]
        items = []
        for _ in range(length):
            if element in _VARIABLE:
                items.append(self._variable(buf, field, element, possible, current, NONE))
            elif element in _PRIMITIVES:
                items.append(self._primitive(buf, element))
            else:
                items.append(self._struct(buf, field, element, current))
        return items

    def _struct_field(self, buf, field, possible, current, tagged):
        """generateStructReader."""
        if _taken(_Versions.parse(field["nullable"]), possible, self.version):
            if tagged:
                if buf.read_unsigned_varint() <= 0:
                    return None
            elif buf.get() < 0:
                return None
        return self._struct(buf, field, field["type"], current)

    def _struct(self, buf, field, type_name, current):
        """new <Struct>(_readable, _version): a common struct's class is generated for its
        own versions, one declared in place for its enclosing class's."""
        common = self.spec["common"].get(type_name)
        if common is not None:
            versions = _Versions.parse(common["versions"])
            return self._read_class(buf, common["fields"], versions, versions)
        return self._read_class(buf, field["fields"], current,
                                _Versions.parse(field["versions"]))

    def _primitive(self, buf, kind):
        if kind == "bool":
            return buf.get() != 0
        if kind == "int8":
            return buf.get()
        if kind == "int16":
            return buf.get_short()
        if kind == "uint16":
            return buf.get_short() & 0xFFFF
        if kind == "int32":
            return buf.get_int()
        if kind == "uint32":
            return buf.get_int() & 0xFFFFFFFF
        if kind == "int64":
            return buf.get_long()
        if kind == "float64":
            return buf.get_double()
        raw = buf._take(16)  # uuid: two longs, printed as Uuid.toString prints them
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def read_message(spec, data, version):
    """(the message's fields by their JSON names, where the read ended)."""
    buf = _Buffer(data)
    return _MessageReader(spec, version).read(buf), buf.pos


def length_sites(topic, key, value):
    """Where a record's lengths, counts, tagged-field counts, tags and sizes, versions
    and frame fields are, as this reader reads them: {"key": [...], "value": [...]} of
    (start, end, kind), kind one of "compact" (a varint length + 1), "varint", "int16",
    "int32", "version" (an int16 version or record type)."""
    sites = {"key": [], "value": []}
    try:
        if topic in COORDINATOR_TOPICS:
            _coordinator(topic, key, value, sites)
        else:
            _api_message(topic, value, sites["value"])
    except Refused:
        pass
    return sites


# ------------------------------------------------------------------ the topics' serdes

def _snake_upper(name):
    """MetadataRecordType's name of a message: TopicRecord -> TOPIC_RECORD."""
    out = []
    for index, char in enumerate(name):
        if char.isupper() and index and not name[index - 1].isupper():
            out.append("_")
        out.append(char.upper())
    return "".join(out)


def _coordinator_tables(messages):
    keys, values = {}, {}
    for name, spec in messages.items():
        if spec["type"] == "coordinator-key":
            keys[spec["apiKey"]] = (name[:-len("Key")], spec)
        elif spec["type"] == "coordinator-value":
            values[spec["apiKey"]] = spec
    return {api_key: (record, key, values[api_key]) for api_key, (record, key) in keys.items()}


COORDINATOR_TOPICS = {topic: _coordinator_tables(kafka_messages.TOPICS[topic])
                      for topic in ("__consumer_offsets", "__share_group_state",
                                    "__transaction_state")}
API_MESSAGE_TOPICS = {topic: {spec["apiKey"]: (_snake_upper(name), spec)
                              for name, spec in kafka_messages.TOPICS[topic].items()}
                      for topic in ("__cluster_metadata", "__remote_log_metadata")}

TRANSACTION_STATES = range(8)  # TransactionState's ids: EMPTY 0 ... PREPARE_EPOCH_FENCE 7
TRANSACTION_VERSIONS = (0, 1, 2)  # TransactionVersion TV_0, TV_1, TV_2
SEGMENT_STATES = range(4)  # RemoteLogSegmentState's ids
PARTITION_DELETE_STATES = range(3)  # RemotePartitionDeleteState's ids


def read_record(topic, key, value):
    """What Kafka 4.2's loader of `topic` makes of a record: an Outcome."""
    try:
        if topic in COORDINATOR_TOPICS:
            return _coordinator(topic, key, value, None)
        return _api_message(topic, value, None)
    except Refused as refusal:
        return Outcome("refused", None, None, None, None, str(refusal))


def _coordinator(topic, key, value, sites):
    if key is None:
        raise Refused("a null key")
    buf = _Buffer(key, sites and sites["key"])
    record_type = buf.get_short()
    buf.note(0, "version")
    known = COORDINATOR_TOPICS[topic].get(record_type)
    if known is None:
        return Outcome("skipped", record_type, None, None, None, "unknown record type")
    name, key_spec, value_spec = known
    # CoordinatorRecordSerde reads the key with the record type as its version
    # (TransactionLog with 0); the key messages read the same at either
    decoded_key = _MessageReader(key_spec, record_type).read(buf)
    if value is None:
        return Outcome("tombstone", name, decoded_key, None, None, None)
    buf = _Buffer(value, sites and sites["value"])
    version = buf.get_short()
    buf.note(0, "version")
    valid = _Versions.parse(value_spec["valid"])
    if not valid.lowest <= version <= valid.highest:
        raise Refused(f"Found an unknown record version {version}")
    decoded = _MessageReader(value_spec, version).read(buf)
    if topic == "__transaction_state":
        _transaction_checks(decoded)
    return Outcome("record", name, decoded_key, version, decoded, None)


def _transaction_checks(value):
    """TransactionLog.readTxnRecordValue past the message."""
    status = value["transactionStatus"]
    if status not in TRANSACTION_STATES:
        raise Refused(f"Unknown transaction state id {status}")
    if status != 0 and value["transactionPartitions"] is None:
        raise Refused("NullPointerException: transactionPartitions")
    if value.get("clientTransactionVersion", 0) not in TRANSACTION_VERSIONS:
        raise Refused("No feature transaction.version with that level")


def _short_of_varint(buf, what):
    """AbstractApiMessageSerde.unsignedIntToShort."""
    start = buf.pos
    value = buf.read_unsigned_varint()
    buf.note(start, "varint")
    if value > _SHORT_MAX:
        raise Refused(f"Value for {what} was too large.")
    value &= 0xFFFF
    return value - 0x10000 if value >= 0x8000 else value


def _api_message(topic, value, sites):
    if value is None:
        raise Refused("a null value")
    buf = _Buffer(value, sites)
    frame = _short_of_varint(buf, "frame version")
    if frame != 1:
        raise Refused(f"frame version {frame}")
    api_key = _short_of_varint(buf, "type")
    version = _short_of_varint(buf, "version")
    known = API_MESSAGE_TOPICS[topic].get(api_key)
    if known is None:
        return Outcome("unknown-type", api_key, None, version, None,
                       f"no record type {api_key}")
    name, spec = known
    decoded = _MessageReader(spec, version).read(buf)
    if buf.remaining() > 0:
        raise Refused(f"Found {buf.remaining()} byte(s) of garbage after {api_key}")
    if topic == "__remote_log_metadata":
        _remote_log_checks(name, decoded)
    return Outcome("record", name, None, version, decoded, None)


def _remote_log_checks(name, value):
    """RemoteLogMetadataSerde's transforms and the objects they build."""
    if name == "REMOTE_PARTITION_DELETE_METADATA_RECORD":
        if value["remotePartitionDeleteState"] not in PARTITION_DELETE_STATES:
            raise Refused("state can not be null")
        return
    if value["remoteLogSegmentState"] not in SEGMENT_STATES:
        raise Refused("state can not be null")
    if name in ("REMOTE_LOG_SEGMENT_METADATA_RECORD",
                "REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD") and \
            not value["segmentLeaderEpochs"]:
        raise Refused("segmentLeaderEpochs can not be null or empty")
    if name == "REMOTE_LOG_SEGMENT_METADATA_RECORD":
        if value["startOffset"] < 0:
            raise Refused("Unexpected start offset")
        if value["endOffset"] < value["startOffset"]:
            raise Refused("Unexpected end offset")
