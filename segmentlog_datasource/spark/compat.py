"""What each Spark release offers a Python data source: the one home of the differences.

The Python Data Source API exists from Spark 4.0 on, and later releases added to it
(each fact below read in that release's `pyspark/sql/datasource.py`,
`pyspark/sql/streaming/datasource.py` and the workers that call them). Where a release
lacks an API, segmentlog does what that release allows:

| what | from | before it |
| --- | --- | --- |
| filter pushdown (`DataSourceReader.pushFilters`, the filter classes) | 4.1 | off: Spark filters the rows a read returns (the read is whole, the rows the same) |
| admission control of a stream source (`pyspark.sql.streaming.datasource`: `latestOffset(start, limit)`, `getDefaultReadLimit`, `SupportsTriggerAvailableNow`) | 4.2 | `latestOffset()` reports an end already capped by maxOffsetsPerTrigger and the other limits, from where the last micro-batch ended; `Trigger.AvailableNow` asks for it once, so reads one such micro-batch |
| `DataSourceStreamArrowWriter` | 4.1 | 4.0's write worker (`pyspark/sql/worker/write_into_data_source.py`, the same for batch and streaming writes) hands Arrow batches to any writer that is a `DataSourceArrowWriter`: the sink is one |
| `to_arrow_type(..., timezone=)` | 4.2 | `timestamp_utc=True` |
| registering a name Spark already discovered | 4.1 | 4.0 refuses it (`DATA_SOURCE_ALREADY_EXISTS`); the source it discovered is this one (`pyspark_segmentlog`) |

Code that Spark runs in its Python processes tests the pyspark installed there (in a
Spark Connect session, the server's); `register()`, in the user's process, goes by
`spark.version`, the release of the Spark it talks to.
"""
import importlib.util
import inspect
from typing import Tuple

from ..errors import SparkReleaseError

FILTER_PUSHDOWN = "filter pushdown"
STREAM_ADMISSION_CONTROL = "admission control of streaming reads"
# The release each feature needs, as (major, minor).
SINCE = {FILTER_PUSHDOWN: (4, 1), STREAM_ADMISSION_CONTROL: (4, 2)}


def release(version: str) -> Tuple[int, int]:
    """(major, minor) of a Spark version string ("4.0.5", "4.2.0-preview1")."""
    parts = str(version).split(".")
    try:
        return int(parts[0]), int(parts[1].split("-")[0])
    except (IndexError, ValueError):
        raise SparkReleaseError(f"cannot tell the Spark release of version {version!r}") \
            from None


def spark_has(spark, feature: str) -> bool:
    """Whether the Spark `spark` talks to (a classic or a Connect session) has `feature`."""
    return release(spark.version) >= SINCE[feature]


def refuse_unless(spark, feature: str, asked: str) -> None:
    """Raise SparkReleaseError naming `feature` and the release it needs when the Spark of
    `spark` predates it; `asked`: what asked for it, as the user wrote it."""
    if not spark_has(spark, feature):
        major, minor = SINCE[feature]
        raise SparkReleaseError(
            f"{asked}: {feature} needs Spark {major}.{minor} or later, and this Spark is "
            f"{spark.version}")


# ------------------------------------------------ in Spark's Python processes
def has_filter_pushdown() -> bool:
    """Whether this pyspark's reader has pushFilters (4.1+)."""
    from pyspark.sql.datasource import DataSourceReader

    return hasattr(DataSourceReader, "pushFilters")


def has_stream_admission_control() -> bool:
    """Whether this pyspark has pyspark.sql.streaming.datasource (4.2+)."""
    return importlib.util.find_spec("pyspark.sql.streaming.datasource") is not None


def has_stream_arrow_writer() -> bool:
    """Whether this pyspark has DataSourceStreamArrowWriter (4.1+)."""
    import pyspark.sql.datasource as datasource

    return hasattr(datasource, "DataSourceStreamArrowWriter")


def to_arrow_type(data_type):
    """Spark's Arrow type for `data_type`, a timestamp as UTC, as Spark hands a writer its
    rows: `timezone="UTC"` from 4.2 on, `timestamp_utc=True` before."""
    from pyspark.sql.pandas.types import to_arrow_type as spark_to_arrow_type

    if "timezone" in inspect.signature(spark_to_arrow_type).parameters:
        return spark_to_arrow_type(data_type, timezone="UTC")
    return spark_to_arrow_type(data_type, timestamp_utc=True)


def is_already_registered(error: Exception) -> bool:
    """Whether `error` is Spark 4.0 refusing to register a name it discovered."""
    condition = getattr(error, "getCondition", None)  # pyspark's errors, 4.0 on
    return condition is not None and condition() == "DATA_SOURCE_ALREADY_EXISTS"
