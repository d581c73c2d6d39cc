"""The `segmentlog` command: describe, dump, verify and write Kafka segment logs, no Spark.

Exit status: 0 when all went well (for verify: nothing is damaged), 1 when a log is
damaged, 2 for a usage error (unknown option, a path that is not a log).
"""
import csv
import datetime
import json
import sys
from typing import Iterable, Iterator, List, Optional

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ..errors import CorruptLogError, InvalidOptionError, SegmentLogError
from ..format import discover_partitions
from ..format.compression import CODEC_NAMES
from ..writer import SegmentLogWriter
from .describe import describe_partition
from .dump import DECODERS, Dump, json_line, text_line
from .verify import DAMAGE, verify_partition

DAMAGED, USAGE = 1, 2
WRITE_CHUNK_ROWS = 10_000


def _console(stderr: bool = False, wide: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False, soft_wrap=not wide)
    if wide and not console.is_terminal:
        # Piped into a file or a pager: no terminal width to fit, keep rows on one line.
        console = Console(stderr=stderr, highlight=False, width=200)
    return console


def _fail(error: SegmentLogError):
    """Damage exits 1; anything else the log layer refuses (not a log dir, a bad option)
    is a usage error."""
    if isinstance(error, CorruptLogError):
        _console(stderr=True).print(f"[red]damaged:[/red] {error}", markup=True)
        sys.exit(DAMAGED)
    raise click.UsageError(str(error))


def _partitions(path: str):
    try:
        return discover_partitions([path])
    except SegmentLogError as error:
        _fail(error)


def _when(millis: Optional[int]) -> str:
    if millis is None or millis < 0:
        return "-"
    moment = datetime.datetime.fromtimestamp(millis / 1000, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="segmentlog", prog_name="segmentlog")
def main():
    """Look into, check and write Apache Kafka segment-log directories (no broker, no Spark).

    PATH is a log dir (holding <topic>-<partition> directories), one partition directory,
    or a store URI such as s3://bucket/prefix.
    """


@main.command()
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
def describe(path, as_json):
    """Per topic-partition: segments, offsets, time range, counts, codecs, transactions."""
    try:
        described = [describe_partition(log) for log in _partitions(path)]
    except SegmentLogError as error:
        _fail(error)
    if as_json:
        click.echo(json.dumps({"path": path, "partitions": described}, indent=2))
        return
    table = Table(title=f"segmentlog: {path}", title_justify="left")
    for name, justify in (("partition", "left"), ("segments", "right"), ("offsets", "right"),
                          ("time index (UTC)", "left"), ("batches", "right"),
                          ("records", "right"), ("bytes", "right"), ("codecs", "left"),
                          ("LSO", "right"), ("open transactions", "left"),
                          ("tail", "left")):
        table.add_column(name, justify=justify, overflow="fold",
                         no_wrap=name not in ("open transactions", "tail"))
    for part in described:
        offsets = "empty" if part["first_offset"] is None else \
            f"{part['first_offset']}..{part['last_offset']}"
        span = part["time_index_range"]
        tail = part["torn_tail"]
        table.add_row(
            f"{part['topic']}-{part['partition']}", str(len(part["segments"])), offsets,
            "-" if span is None else f"{_when(span[0])}\n{_when(span[1])}",
            str(part["batches"]), str(part["records"]), f"{part['bytes']:,}",
            ", ".join(part["codecs"]), str(part["last_stable_offset"]),
            ", ".join(f"producer {pid} from {first}" for pid, first in part["open_transactions"])
            or "-",
            "-" if tail is None else f"{tail['kind']} at byte {tail['position']} "
                                     f"({tail['trailing_bytes']} bytes)")
    _console(wide=True).print(table)


@main.command()
@click.argument("path")
@click.option("--records", is_flag=True, help="A line per record after each batch.")
@click.option("--print-data", is_flag=True, help="Show keys, values and headers (implies --records).")
@click.option("--decoder", type=click.Choice(DECODERS), default="utf8", show_default=True,
              help="How --print-data shows keys, values and header values.")
@click.option("--offset", type=int, help="Start at the batch holding this offset (via the offset index).")
@click.option("--timestamp", type=int,
              help="Start at the first record at or after this epoch-ms time (via the time index).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def dump(path, records, print_data, decoder, offset, timestamp, as_json):
    """Batch by batch, like kafka-dump-log. PATH may also be one .log, .index, .timeindex,
    .txnindex or .snapshot file."""
    if offset is not None and timestamp is not None:
        raise click.UsageError("give --offset or --timestamp, not both")
    shown = json_line if as_json else text_line
    try:
        for item in Dump(records, print_data, decoder, offset, timestamp).items(path):
            click.echo(shown(item))
    except SegmentLogError as error:
        _fail(error)


@main.command()
@click.argument("path")
@click.option("--json", "as_json", is_flag=True, help="The findings as one JSON document.")
def verify(path, as_json):
    """Check every batch (checksum, offsets, decoding), the offset, time and transaction
    indexes, and report torn tails. Exit 0 when nothing is damaged, 1 otherwise."""
    logs = _partitions(path)
    errors = _console(stderr=True)
    total = sum(segment.size for log in logs for segment in log.segments)
    report = []
    # A bar only on a terminal: piped output stays free of control characters.
    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                  TimeRemainingColumn(), console=errors, transient=True,
                  disable=not errors.is_terminal) as progress:
        task = progress.add_task("verifying", total=total)
        for log in logs:
            progress.update(task, description=f"{log.topic}-{log.partition}")
            findings = verify_partition(log, lambda n: progress.advance(task, n))
            report.append({"topic": log.topic, "partition": log.partition,
                           "directory": log.directory,
                           "findings": [f.as_dict() for f in findings]})
    damaged = sum(1 for part in report for f in part["findings"] if f["kind"] == DAMAGE)
    if as_json:
        click.echo(json.dumps({"path": path, "valid": not damaged, "damage": damaged,
                               "partitions": report}, indent=2))
    else:
        out = _console()
        for part in report:
            for finding in part["findings"]:
                colour = {"damage": "red", "torn tail": "yellow"}.get(finding["kind"], "cyan")
                out.print(f"[{colour}]{finding['kind']}[/{colour}] {finding['file']} at byte "
                          f"{finding['position']}: {finding['message']}", markup=True)
        verdict = "[red]damaged[/red]" if damaged else "[green]valid[/green]"
        out.print(f"{len(report)} partitions, {total:,} bytes: {verdict}"
                  + (f" ({damaged} findings of damage)" if damaged else ""), markup=True)
    sys.exit(DAMAGED if damaged else 0)


def _input_rows(handle, input_format: str) -> Iterator[dict]:
    if input_format == "csv":
        yield from csv.DictReader(handle)
        return
    for number, line in enumerate(handle, 1):
        if line.strip():
            try:
                row = json.loads(line)
            except ValueError as error:
                raise click.BadParameter(f"line {number} is not JSON: {error}",
                                         param_hint="INPUT") from None
            if not isinstance(row, dict):
                raise click.BadParameter(f"line {number} is not a JSON object",
                                         param_hint="INPUT")
            yield row


def _as_bytes(value) -> Optional[bytes]:
    """A field as record bytes: text as UTF-8, anything else as compact JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _record(row: dict, key_field, value_field, timestamp_field, partition_field, number) -> dict:
    for field in (key_field, value_field, timestamp_field, partition_field):
        if field is not None and field not in row:
            raise click.BadParameter(f"row {number} has no field {field!r} "
                                     f"(it has {', '.join(map(repr, row)) or 'none'})")
    record = {"value": _as_bytes(row[value_field] if value_field else row)}
    if key_field is not None:
        record["key"] = _as_bytes(row[key_field])
    if timestamp_field is not None:
        record["timestamp"] = int(row[timestamp_field])
    if partition_field is not None:
        record["partition"] = int(row[partition_field])
    return record


def _chunks(rows: Iterable[dict], size: int) -> Iterator[List[dict]]:
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


@main.command()
@click.argument("logdir")
@click.argument("input_file", metavar="INPUT", type=click.File("r", encoding="utf-8"))
@click.option("--topic", required=True, help="The topic to write into.")
@click.option("--partitions", "num_partitions", type=click.IntRange(min=1),
              help="Partitions of a new topic (an existing topic keeps its own).")
@click.option("--compression", type=click.Choice(sorted(CODEC_NAMES.values())),
              default="none", show_default=True)
@click.option("--format", "input_format", type=click.Choice(["jsonl", "csv"]),
              help="The input's format; by default from its name (.csv, else JSON lines).")
@click.option("--key-field", help="The field that becomes the record key (else no key).")
@click.option("--value-field",
              help="The field that becomes the value (else the whole row as JSON).")
@click.option("--timestamp-field", help="A field of epoch milliseconds for the timestamp.")
@click.option("--partition-field", help="A field naming each record's partition.")
def write(logdir, input_file, topic, num_partitions, compression, input_format, key_field,
          value_field, timestamp_field, partition_field):
    """Append the rows of a JSON-lines or CSV file (INPUT, - for stdin) to a topic in
    LOGDIR, through the writer engine: keyed rows go to Kafka's partition for their key."""
    if input_format is None:
        input_format = "csv" if input_file.name.lower().endswith(".csv") else "jsonl"
    rows = (_record(row, key_field, value_field, timestamp_field, partition_field, number)
            for number, row in enumerate(_input_rows(input_file, input_format), 1))
    try:
        with SegmentLogWriter(logdir, topic, num_partitions=num_partitions,
                              compression=compression) as writer:
            for chunk in _chunks(rows, WRITE_CHUNK_ROWS):
                writer.write_rows(chunk)
        summary = writer.summary
    except InvalidOptionError as error:
        raise click.UsageError(str(error))
    except SegmentLogError as error:
        raise click.ClickException(str(error))
    table = Table(title=f"wrote {summary.records} records to {logdir}", title_justify="left")
    for name in ("topic", "partition", "offsets", "records"):
        table.add_column(name, justify="left" if name == "topic" else "right")
    for part in summary.partitions:
        table.add_row(part.topic, str(part.partition),
                      f"{part.start_offset}..{part.end_offset - 1}" if part.records else "-",
                      str(part.records))
    _console().print(table)
