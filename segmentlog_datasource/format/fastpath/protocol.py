"""The states decode_run() reports, as bit flags, for both accumulators and the scan loop.

Imports nothing: setup.py runs this file and compiles the same values into the C twin.
"""
RUN_ENTRY_FOR_PYTHON = 0  # the entry at the returned position needs the scan loop
RUN_FLUSH = 1  # max_rows or max_bytes reached: take() the rows, then go on
RUN_DONE = 2  # the offset range is exhausted: the scan stops
RUN_END = 4  # the returned position reached end_position

# Per-batch metadata (includeMetadata, includeControlRecords): after track_batches(), both
# accumulators note one entry of ENTRY_FIELDS int64s per run of rows that share a batch's
# metadata (a batch's rows; each control record alone), and take_batch_entries() hands
# them over with the rows; format.arrow expands them into columns.
ENTRY_END_ROW = 0  # the row count after the entry's rows (since the last take)
ENTRY_BASE_OFFSET = 1  # the batch's base offset (a legacy wrapper's first inner offset)
ENTRY_PRODUCER_ID = 2
ENTRY_PRODUCER_EPOCH = 3
ENTRY_BASE_SEQUENCE = 4
ENTRY_LEADER_EPOCH = 5
ENTRY_ATTRIBUTES = 6
ENTRY_MAGIC = 7
ENTRY_POSITION = 8  # of the batch in its segment file
ENTRY_CONTROL_TYPE = 9  # a control record's type id, NOT_CONTROL for data rows
ENTRY_COORDINATOR_EPOCH = 10  # a transaction marker's, else NO_COORDINATOR_EPOCH
ENTRY_FIELDS = 11
NOT_CONTROL = 1 << 16  # outside the int16 range of control type ids
NO_COORDINATOR_EPOCH = 1 << 32  # outside the int32 range of coordinator epochs
