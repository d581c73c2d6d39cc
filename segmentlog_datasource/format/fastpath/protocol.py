"""The states decode_run() reports, as bit flags, for both accumulators and the scan loop.

Imports nothing: setup.py runs this file and compiles the same values into the C twin.
"""
RUN_ENTRY_FOR_PYTHON = 0  # the entry at the returned position needs the scan loop
RUN_FLUSH = 1  # max_rows or max_bytes reached: take() the rows, then go on
RUN_DONE = 2  # the offset range is exhausted: the scan stops
RUN_END = 4  # the returned position reached end_position
