"""The pure-Python accumulator: decoded records collected into Arrow record batches."""
import pyarrow as pa

from ..arrow import finish_batch
from ..v2 import decode_v2_records


class RecordAccumulator:
    """Collects decoded records (pure-Python path) until a batch is taken."""

    def __init__(self, include_headers: bool):
        self.include_headers = include_headers
        self._reset()

    def _reset(self):
        self.offsets = []
        self.timestamps = []
        self.timestamp_types = []
        self.keys = []
        self.values = []
        self.headers = []
        self.payload_bytes = 0

    def add(self, offset, timestamp, timestamp_type, key, value, headers):
        self.offsets.append(offset)
        self.timestamps.append(timestamp)
        self.timestamp_types.append(timestamp_type)
        self.keys.append(key)
        self.values.append(value)
        self.headers.append(headers)
        self.payload_bytes += (len(key) if key else 0) + (len(value) if value else 0)

    def __len__(self):
        return len(self.offsets)

    def take(self, topic: str, partition: int) -> pa.RecordBatch:
        batch = finish_batch(
            topic, partition, self.offsets, self.timestamps, self.timestamp_types,
            self.keys, self.values, self.headers, self.include_headers,
        )
        self._reset()
        return batch

    def add_v2_batch(self, data, count, header, min_offset, end_offset, path=None) -> int:
        return decode_v2_records(data, count, header, self, min_offset, end_offset, path)
