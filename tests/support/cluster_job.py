"""The driver of the standalone-cluster test: run in a subprocess of its own, since a pytest
process keeps one local SparkSession.

    python cluster_job.py <spec.json> <result.json>

spec: {"master": "spark://...", "executors": n, "timeout": seconds,
       "phases": [{"name": ..., "run": "batch" | "stream" | "write",
                   "read_options": {...} (reads and the write's read-back: e.g. store.*),
                   batch: "logdir"; stream: "logdir", "checkpoint", "stream_options";
                   write: "write_path", "write_rows", "write_options"}, ...]}

Every phase runs in the one application, in order, so a test of several phases pays for
one driver and one pair of executors.

result: {"app_id", "ui", "executors": [...], "error": traceback or None,
         "phases": {name: {"rows": [...] or "error": traceback, "seconds",
                           "tasks": {executor id: tasks this phase ran},
                           and for a stream "batches": [{"id", "rows", "at",
                           "ranges": {"topic-partition": [first, last offset]}}]}
                           and for a write "rows": what a batch read of write_path got}}}

Rows are [topic, partition, offset, base64 key, base64 value, epoch ms, timestampType,
[[header key, base64 value], ...]], converted by Spark SQL so that no time zone enters.
"""
import json
import os
import socket
import sys
import time
import traceback
import urllib.request

ROW_COLUMNS = [
    "topic", "partition", "offset", "base64(key) AS key", "base64(value) AS value",
    "unix_millis(timestamp) AS ts", "timestampType",
    "transform(headers, h -> array(h.key, base64(h.value))) AS headers",
]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get_json(url: str):
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)


def as_list(row):
    return [row.topic, row.partition, row.offset, row.key, row.value, row.ts,
            row.timestampType, [list(h) for h in (row.headers or [])]]


class Executors:
    """Task counts per executor from the driver's REST API (/api/v1/.../executors)."""

    def __init__(self, ui: str, app_id: str):
        self.url = f"{ui}/api/v1/applications/{app_id}/executors"

    def listing(self):
        return [e for e in get_json(self.url) if e["id"] != "driver"]

    def wait_for(self, count: int, timeout: float):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            executors = self.listing()
            if len(executors) >= count:
                return executors
            time.sleep(0.25)
        raise RuntimeError(f"fewer than {count} executors after {timeout}s: {self.listing()}")

    def tasks(self) -> dict:
        """{executor id: totalTasks}, once the counts stop moving: the listener that feeds
        the REST API runs behind the scheduler."""
        previous = None
        for _ in range(40):
            current = {e["id"]: e["totalTasks"] for e in self.listing()}
            if current == previous:
                return current
            previous = current
            time.sleep(0.25)
        return previous


def run_batch(spark, spec):
    df = spark.read.format("segmentlog").option("includeHeaders", "true") \
        .options(**spec.get("read_options", {})).load(spec["logdir"])
    return {"rows": [as_list(r) for r in df.selectExpr(*ROW_COLUMNS).collect()],
            "partitions": df.rdd.getNumPartitions()}


def run_stream(spark, spec):
    batches = []
    rows = []

    def collect(batch_df, batch_id):
        got = [as_list(r) for r in batch_df.collect()]
        ranges = {}
        for row in got:
            low, high = ranges.get(f"{row[0]}-{row[1]}", (row[2], row[2]))
            ranges[f"{row[0]}-{row[1]}"] = (min(low, row[2]), max(high, row[2]))
        batches.append({"id": batch_id, "rows": len(got), "at": time.time(),
                        "ranges": ranges})
        rows.extend(got)

    reader = spark.readStream.format("segmentlog").option("includeHeaders", "true") \
        .options(**spec.get("read_options", {}))
    for key, value in spec.get("stream_options", {}).items():
        reader = reader.option(key, value)
    query = (reader.load(spec["logdir"]).selectExpr(*ROW_COLUMNS)
             .writeStream.foreachBatch(collect)
             .option("checkpointLocation", spec["checkpoint"])
             .trigger(availableNow=True).start())
    finished = query.awaitTermination(spec.get("timeout", 120))
    if not finished:
        query.stop()
        raise RuntimeError(f"the AvailableNow query did not stop within {spec.get('timeout')}s; "
                           f"{len(batches)} batches, last progress {query.lastProgress}")
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return {"rows": rows, "batches": batches,
            "last_progress": json.loads(json.dumps(query.lastProgress, default=str))}


def run_write(spark, spec):
    """Rows made on the executors (key k<id>, value v<id>, partition id % 3) are written
    to write_path, then read back by a batch read."""
    n = spec["write_rows"]
    df = spark.range(0, n, 1, numPartitions=4).selectExpr(
        "cast(concat('k', id) AS binary) AS key", "cast(concat('v', id) AS binary) AS value",
        "cast(id % 3 AS int) AS partition")
    writer = df.write.format("segmentlog").mode("append").options(**spec["write_options"])
    writer.options(**spec.get("read_options", {})).save(spec["write_path"])
    back = spark.read.format("segmentlog").option("includeHeaders", "true") \
        .options(**spec.get("read_options", {})).load(spec["write_path"])
    return {"rows": [as_list(r) for r in back.selectExpr(*ROW_COLUMNS).collect()],
            "partitions": back.rdd.getNumPartitions()}


PHASES = {"batch": run_batch, "stream": run_stream, "write": run_write}


def main(spec_path: str, result_path: str):
    with open(spec_path, encoding="utf-8") as handle:
        spec = json.load(handle)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(spec["master"])
        .appName("segmentlog-cluster-test")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "1g")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", str(spec.get("executors", 2)))
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", str(free_port()))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    result = {"phases": {}, "error": None}
    try:
        spark.sparkContext.setLogLevel("WARN")
        sc = spark.sparkContext
        result["app_id"] = sc.applicationId
        result["ui"] = sc.uiWebUrl
        executors = Executors(sc.uiWebUrl, sc.applicationId)
        # Both executors must be up before the first job, or one may take every task.
        executors.wait_for(spec.get("executors", 2), timeout=60)
        for phase in spec["phases"]:
            before = executors.tasks()
            started = time.monotonic()
            try:
                outcome = PHASES[phase["run"]](spark, dict(phase, timeout=spec.get("timeout", 120)))
            except Exception:  # the next phase still runs; the test reports this one
                outcome = {"error": traceback.format_exc()}
            outcome["seconds"] = time.monotonic() - started
            after = executors.tasks()
            outcome["tasks"] = {e: after[e] - before.get(e, 0) for e in after}
            result["phases"][phase["name"]] = outcome
        result["executors"] = executors.listing()
    except BaseException:
        result["error"] = traceback.format_exc()
        raise
    finally:
        with open(result_path, "w", encoding="utf-8") as handle:
            json.dump(result, handle)
        spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
