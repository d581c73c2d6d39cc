"""The `segmentlog` command: describe, dump, verify and write Kafka segment logs, no Spark.

Exit status: 0 when all went well (for verify: nothing is damaged), 1 when a log is
damaged (or a write failed: another write holds the topic, a full disk), 2 for a usage
error (unknown option, a path that is not a log, a topic name Kafka does not allow, input
that cannot be written, nothing to work on: no partition to describe, dump or verify, no
group to show lag or share-group state of).
"""
import csv
import datetime
import functools
import json
import os
import stat
import sys
from typing import Iterable, Iterator, List, Optional

import click
from rich.console import Console
from rich.text import Text

from ..errors import (
    CheckpointError, CorruptLogError, InvalidOptionError, SegmentLogError, StoreError,
)
from ..format.compression import CODEC_NAMES
from ..format.log import discover_copies
from ..read.consumer_lag import as_of_millis, consumer_lag
from ..read.replicas import consumer_partitions
from ..storage.resolve import is_remote_uri
from ..writer import SegmentLogWriter
from ..writer.errors import InvalidInputError
from ..writer.logdir import check_written_logdir, list_topics, validate_topic_name
from .describe import describe_partition, renamed_notes
from .dump import DECODERS, Dump, holds_nothing, json_line, text_line
from .framed import FRAMED_DECODERS
from .internal import KAFKA_FLAGS, decoder_names
from .progress import BYTES, Work, shows_progress
from .tables import Column, print_table
from .verify import DAMAGE, Finding, verified_bytes, verify_copies

DAMAGED, USAGE = 1, 2
INTERNAL_DECODERS = tuple(decoder_names())  # the internal topics' decoders (`decode` values)
WRITE_CHUNK_ROWS = 10_000


def _console(stderr: bool = False, wide: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False, soft_wrap=not wide)
    if wide and not console.is_terminal and not os.environ.get("COLUMNS"):
        # Piped into a file or a pager: no terminal width to fit, keep rows on one line
        # (unless COLUMNS asks for a width).
        console = Console(stderr=stderr, highlight=False, width=200)
    return console


def _fail(error: SegmentLogError):
    """Damage (a segment, an index or a checkpoint file Kafka would refuse) exits 1;
    anything else the log layer refuses (not a log dir, a bad option) is a usage error."""
    if isinstance(error, (CorruptLogError, CheckpointError)):
        message = Text("damaged: ", style="red")
        message.append(str(error))  # as text: a path or a line may hold "["
        _console(stderr=True).print(message)
        sys.exit(DAMAGED)
    raise click.UsageError(str(error))


def _expand_globs(context, parameter, paths):
    """PATH arguments with each quoted glob replaced by the log dirs it matches, as a
    read's `path` option takes one (storage.expand_paths); a shell expands an unquoted
    local glob before this sees it."""
    from ..storage import expand_paths

    try:
        return tuple(expand_paths(paths))
    except SegmentLogError as error:
        _fail(error)


def _partitions(paths):
    """The partitions under `paths` as a consumer of the cluster reads them: the copies
    of one partition (several brokers' log dirs) are one, served by the leader's."""
    try:
        return consumer_partitions(list(paths))
    except SegmentLogError as error:
        _fail(error)


def _copies(paths):
    """Every copy of every partition under `paths`, each its own (verify checks each)."""
    try:
        return discover_copies(list(paths))
    except SegmentLogError as error:
        _fail(error)


def _shown_paths(paths) -> str:
    return " ".join(paths)


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
    or a store URI such as s3://bucket/prefix. describe, dump and verify take several:
    the log dirs of several brokers (or one broker's JBOD dirs) are read as a consumer of
    the cluster reads them, the copies of a partition as one, served by the leader's copy
    (the one whose leader-epoch-checkpoint reaches the latest epoch, then the longest).
    """


@main.command()
@click.argument("paths", metavar="PATH...", nargs=-1, required=True,
                callback=_expand_globs)
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of tables.")
def describe(paths, as_json):
    """Per topic-partition: what its files hold (segments, offsets, time range, batches,
    records, bytes, codecs, open transactions, a torn tail) and what a consumer reads of
    it (log start, high watermark, last stable offset, log end, leader epochs; with
    several copies, which leads and how far each other lags or where it diverges).

    Record counts: "records" of the files is every record on disk (control records
    included); "records" and "committed" of what a consumer reads count the data records
    in [log start, high watermark) (to the log end where no replication-offset-checkpoint
    covers the partition) that read_uncommitted and read_committed consumers see (in
    --json: records, records_visible_read_uncommitted, records_visible_read_committed).
    The LSO is computed up to the high watermark. A partition with several copies is
    described from the leader's copy and its log dir's checkpoints.
    """
    logs = _partitions(paths)
    if not logs:
        raise click.UsageError(holds_nothing("describe", paths))
    try:
        with Work(shows_progress(as_json)) as work:
            work.phase("describing", sum(s.size for log in logs for s in log.segments))
            described = []
            for log in logs:
                work.describe(f"describing {log.topic}-{log.partition}")
                described.append(describe_partition(log, work.advance))
    except SegmentLogError as error:
        _fail(error)
    unfinished = sorted({job for log in logs for job in log.log_dir.unfinished_jobs})
    notes = renamed_notes(paths)
    if as_json:
        click.echo(json.dumps({"path": _shown_paths(paths), "paths": list(paths),
                               "unfinished_writes": unfinished, "notes": notes,
                               "partitions": described}, indent=2))
        return
    console = _console(wide=True)
    title = f"segmentlog: {_shown_paths(paths)}"
    _print_files_table(console, title, described)
    _print_consumer_table(console, described)
    if any(len(part["replicas"]) > 1 for part in described):
        _print_copies_table(console, described)
    if any(part.get("remote_segments") for part in described):
        _print_remote_table(console, described)
    if unfinished:
        click.echo(f"note: segmentlog write {', '.join(unfinished)} has not finished "
                   f"publishing; shown as the log was before it (the next write into the "
                   f"log dir settles it)")
    for note in notes:  # wrapped to the terminal: a note is prose, not a table's cell
        console.print(Text(f"note: {note}"))


def _number(value) -> str:
    return "-" if value is None else str(value)


def _print_files_table(console, title: str, described: List[dict]) -> None:
    columns = [Column("partition", "left", key=True), Column("segments"), Column("offsets"),
               Column("time index (UTC)", "left"), Column("batches"), Column("records"),
               Column("bytes"), Column("codecs", "left", wraps=True),
               Column("open transactions", "left", wraps=True),
               Column("tail", "left", wraps=True)]
    rows = []
    for part in described:
        offsets = "empty" if part["first_offset"] is None else \
            f"{part['first_offset']}..{part['last_offset']}"
        span = part["time_index_range"]
        tail = part["torn_tail"]
        rows.append([
            f"{part['topic']}-{part['partition']}", str(len(part["segments"])), offsets,
            "-" if span is None else f"{_when(span[0])}\n{_when(span[1])}",
            str(part["batches"]), str(part["records"]), f"{part['bytes']:,}",
            ", ".join(part["codecs"]) or "-",
            ", ".join(f"producer {pid} from {first}" for pid, first in part["open_transactions"])
            or "-",
            "-" if tail is None else f"{tail['kind']} at byte {tail['position']} "
                                     f"({tail['trailing_bytes']} bytes)"])
    print_table(console, title, columns, rows)


def _print_consumer_table(console, described: List[dict]) -> None:
    """Offsets and counts as a consumer reads each partition (from the leader's copy)."""
    columns = [Column("partition", "left", key=True), Column("log start"),
               Column("high watermark"),
               Column("LSO"), Column("log end"), Column("records"), Column("committed"),
               Column("leader epochs", "left", wraps=True)]
    rows = []
    for part in described:
        epochs = part["leader_epochs"]
        rows.append([
            f"{part['topic']}-{part['partition']}", str(part["log_start_offset"]),
            _number(part["high_watermark"]), _number(part["last_stable_offset"]),
            str(part["log_end_offset"]), str(part["records_visible_read_uncommitted"]),
            _number(part["records_visible_read_committed"]),
            "-" if not epochs else " ".join(f"{epoch}@{start}" for epoch, start in epochs)])
    print_table(console, "as a consumer reads it: records in [log start, high watermark)",
                columns, rows)


def _print_remote_table(console, described: List[dict]) -> None:
    """Each remote segment of a tiered partition the metadata knows: its state, the
    offsets it serves, or why it serves none."""
    columns = [Column("partition", "left", key=True), Column("remote segment", "left", key=True),
               Column("offsets"), Column("epochs", "left", wraps=True),
               Column("state", "left", wraps=True), Column("serves", "left", wraps=True)]
    rows = []
    for part in described:
        for segment in part.get("remote_segments", ()):
            serves = " ".join(f"{low}..{high}" for low, high in segment["serves"])
            rows.append([
                f"{part['topic']}-{part['partition']}", segment["segment_id"],
                f"{segment['start_offset']}..{segment['end_offset']}",
                " ".join(f"{epoch}@{start}" for epoch, start in segment["leader_epochs"]),
                segment["state"], serves or segment["reason"]])
    print_table(console, "remote segments, as the remote log metadata serves them", columns,
                rows)


def _print_copies_table(console, described: List[dict]) -> None:
    """Each copy of each partition: the leader's first, then how far each other copy
    lags (offsets of the leader's log it does not hold) or where it diverges."""
    columns = [Column("partition", "left", key=True), Column("copy", "left", key=True),
               Column("last epoch"),
               Column("log start"), Column("log end"), Column("HW checkpoint"),
               Column("state", "left", wraps=True)]
    names = _copy_names(described)
    rows = []
    for part in described:
        for copy in part["replicas"]:
            if copy["leader"]:
                state = "leader"
            elif copy["diverges_at"] is not None:
                state = f"diverges at {copy['diverges_at']}"
            else:
                state = f"lags {copy['lag']}"
            rows.append([f"{part['topic']}-{part['partition']}", names[copy["directory"]],
                         _number(copy["last_epoch"]), str(copy["log_start_offset"]),
                         str(copy["log_end_offset"]), _number(copy["high_watermark_checkpoint"]),
                         state])
    print_table(console, "copies", columns, rows)


def _copy_names(described: List[dict]) -> dict:
    """Each copy's directory by its log dir, as far as that differs from the other log
    dirs ("broker-0" for /data/broker-0/orders-0): the partition is in its own column."""
    directories = [copy["directory"] for part in described for copy in part["replicas"]]
    log_dirs = {d: d.rstrip("/").rsplit("/", 1)[0].split("/") for d in directories}
    common = os.path.commonprefix(list(log_dirs.values())) if log_dirs else []
    return {d: "/".join(parts[len(common):] or parts[-1:]) or d
            for d, parts in log_dirs.items()}


@main.command()
@click.argument("paths", metavar="PATH...", nargs=-1, required=True,
                callback=_expand_globs)
@click.option("--records", is_flag=True, help="A line per record after each batch.")
@click.option("--print-data", is_flag=True, help="Show keys, values and headers (implies --records).")
@click.option("--decoder", type=click.Choice(DECODERS + INTERNAL_DECODERS), default=None,
              help="How --print-data shows keys, values and header values (default "
                   "utf8); json also shows Schema Registry framed JSON (its schema ids "
                   "checked with --schemas), avro and protobuf decode framed Avro and "
                   "Protobuf values with their writer's schemas (see --schemas). "
                   f"{', '.join(INTERNAL_DECODERS)} decode the records of that internal "
                   "topic as kafka-dump-log's decoder flags do (and imply --print-data).")
@click.option("--key-decoder", type=click.Choice(DECODERS), default=None,
              help="How --print-data shows keys. --decoder json, avro or protobuf decodes "
                   "values (and header values) alone: keys are shown as UTF-8 text unless "
                   "this says otherwise; --decoder utf8 or hex shows keys so too.")
@click.option("--offsets-decoder", is_flag=True,
              help="Decode __consumer_offsets records, as kafka-dump-log's flag does "
                   "(--decoder consumerOffsets; implies --print-data).")
@click.option("--transaction-log-decoder", is_flag=True,
              help="Decode __transaction_state records (--decoder transactionState; "
                   "implies --print-data).")
@click.option("--cluster-metadata-decoder", is_flag=True,
              help="Decode __cluster_metadata records and KRaft snapshots (--decoder "
                   "clusterMetadata; implies --print-data).")
@click.option("--share-group-state-decoder", is_flag=True,
              help="Decode __share_group_state records (--decoder shareGroupState; "
                   "implies --print-data).")
@click.option("--remote-log-metadata-decoder", is_flag=True,
              help="Decode __remote_log_metadata records, tiered storage's segment states "
                   "(--decoder remoteLogMetadata; implies --print-data).")
@click.option("--schemas", default=None, metavar="PATH",
              help="With --decoder avro, protobuf or json: a _schemas log or a registry's "
                   "JSON export (default: the _schemas topic under PATH; json needs none).")
@click.option("--offset", type=click.IntRange(min=0),
              help="Start at the batch holding this offset (via the offset index).")
@click.option("--timestamp", type=click.IntRange(min=0),
              help="Start at the first record at or after this epoch-ms time (via the time index).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def dump(paths, records, print_data, decoder, key_decoder, offset, timestamp, schemas, as_json,
         **flags):
    """Batch by batch, like kafka-dump-log; several log dirs (brokers) as a consumer
    reads them, each partition from the leader's copy. PATH may also be one .log, .index,
    .timeindex, .txnindex or .snapshot file, a KRaft snapshot
    (<end offset>-<epoch>.checkpoint), or a checkpoint file: a log dir's
    replication-offset-checkpoint, log-start-offset-checkpoint,
    recovery-point-offset-checkpoint or cleaner-offset-checkpoint, a partition's
    leader-epoch-checkpoint or partition.metadata (their entries, each with its line).

    A partition that holds nothing at or after --offset or --timestamp says so, with the
    offsets (and the latest timestamp) it holds.

    An internal topic's decoder (--offsets-decoder, --transaction-log-decoder,
    --cluster-metadata-decoder, --share-group-state-decoder,
    --remote-log-metadata-decoder, or --decoder with the topic's decode value) shows
    each record's key and value decoded as kafka-dump-log does; of a log dir it dumps
    that topic's partitions (a __cluster_metadata partition with its snapshots, unless
    --offset or --timestamp is given). A record that does not
    decode is shown as such (naming offset, record type and version, file and byte) and
    the dump goes on; stderr notes how many there were."""
    if offset is not None and timestamp is not None:
        raise click.UsageError("give --offset or --timestamp, not both")
    decoder, internal_shown = _internal_decoder(decoder, flags)
    if internal_shown is not None:
        print_data = True
        if schemas is not None:
            raise click.UsageError(
                f"--schemas is for the decoders of framed values (--decoder "
                f"{', '.join(FRAMED_DECODERS)}); {internal_shown} decodes an internal "
                f"topic's records with Kafka's message definitions, no schemas")
    if key_decoder is None:
        key_decoder = decoder if decoder in ("utf8", "hex") else "utf8"
    elif internal_shown is not None:
        raise click.UsageError(f"{internal_shown} decodes keys and values itself; "
                               f"--key-decoder is for other topics")
    if schemas is not None and decoder not in FRAMED_DECODERS and \
            key_decoder not in FRAMED_DECODERS:
        raise click.UsageError(f"--schemas is for the decoders of framed values "
                               f"(--decoder or --key-decoder "
                               f"{', '.join(FRAMED_DECODERS)}), not {decoder}")
    shown = json_line if as_json else text_line

    @functools.lru_cache(maxsize=None)
    def load_registry():
        """The registry of --schemas, or of the _schemas topic beside the partitions
        dumped (a partition directory's log dir); loaded once."""
        from ..decode.registry import load_registry as load
        from ..format.log import parse_partition_dir_name

        beside = [os.path.dirname(path.rstrip("/")) if parse_partition_dir_name(
            os.path.basename(path.rstrip("/"))) else path for path in paths]
        return load(schemas, list(dict.fromkeys(beside)))

    if schemas is not None and print_data:
        try:  # a --schemas that does not load is a usage error, before anything is shown
            load_registry()
        except SegmentLogError as error:
            raise click.UsageError(f"--schemas {schemas}: {error}")
    undecodable, first = 0, None
    try:
        # json shows framed JSON without schemas; with --schemas it checks their ids too
        registry = None if schemas is None and "json" in (decoder, key_decoder) and \
            not {decoder, key_decoder} & {"avro", "protobuf"} else load_registry
        for item in Dump(records, print_data, decoder, offset, timestamp, registry,
                         internal_shown, key_decoder).items(paths):
            click.echo(shown(item))
            if item.get("decodeError"):
                undecodable += 1
                first = first or item["decodeError"]
        for note in renamed_notes(paths, passed_over=False):
            click.echo(f"note: {note}", err=True)
    except SegmentLogError as error:
        _fail(error)
    if undecodable:
        click.echo(f"note: {undecodable} record{'' if undecodable == 1 else 's'} could not "
                   f"be decoded with {internal_shown}, each shown as undecodable with why "
                   f"(the first: {first})", err=True)


def _internal_decoder(decoder: Optional[str], flags: dict):
    """(the --decoder value, how the command line named an internal topic's decoder or
    None): kafka-dump-log's decoder flags are --decoder <decode value>; two decoders at
    once are refused."""
    given = [(f"--{flag}", value) for flag, value in KAFKA_FLAGS
             if flags.get(flag.replace("-", "_"))]
    if len(given) > 1:
        raise click.UsageError(f"give one decoder, not {' and '.join(f for f, _ in given)}")
    if given:
        flag, value = given[0]
        if decoder is not None and decoder != value:
            raise click.UsageError(f"{flag} is --decoder {value}: give one decoder, not "
                                   f"{flag} and --decoder {decoder}")
        if value not in INTERNAL_DECODERS:
            raise click.UsageError(f"{flag}: this segmentlog has no {value} decoder (it "
                                   f"decodes {', '.join(INTERNAL_DECODERS)})")
        return value, flag
    if decoder in INTERNAL_DECODERS:
        return decoder, f"--decoder {decoder}"
    return decoder or "utf8", None


@main.command()
@click.argument("paths", metavar="PATH...", nargs=-1, required=True,
                callback=_expand_globs)
@click.option("--json", "as_json", is_flag=True, help="The findings as one JSON document.")
def verify(paths, as_json):
    """Check every batch (checksum, offsets, decoding), the offset, time and transaction
    indexes, and report torn tails; and the checkpoint files beside them: each offset
    checkpoint of a log dir, each leader-epoch-checkpoint and partition.metadata parses,
    a high watermark is not past its log end, nor a log start offset (one below the first
    segment is a note: Kafka starts the log there), leader epochs grow with their
    offsets, and the copies of a partition (several PATHs: several brokers) hold the same
    batches below the high watermark. A checkpoint finding names its file and line.
    Exit 0 when nothing is damaged, 1 otherwise, 2 when PATH holds no partition to check."""
    copies = _copies(paths)
    if not copies:
        raise click.UsageError(f"{holds_nothing('verify', paths)}, so nothing was checked")
    total = verified_bytes(copies)
    with Work(shows_progress(as_json)) as work:
        work.phase("verifying", total)

        def starting(copy):
            work.describe(f"verifying {copy.topic}-{copy.partition}")

        try:
            log_dirs, report = verify_copies(copies, work.advance, starting)
        except SegmentLogError as error:
            _fail(error)
    damaged = sum(1 for part in log_dirs + report for f in part["findings"]
                  if f["kind"] == DAMAGE)
    if as_json:
        click.echo(json.dumps({"path": _shown_paths(paths), "paths": list(paths),
                               "valid": not damaged, "damage": damaged,
                               "log_dirs": log_dirs, "partitions": report}, indent=2))
    else:
        out = _console()
        for part in log_dirs + report:
            for finding in part["findings"]:
                colour = {"damage": "red", "torn tail": "yellow"}.get(finding["kind"], "cyan")
                line = Text(finding["kind"], style=colour)
                line.append(f" {Finding(**finding).where}: {finding['message']}")
                out.print(line)
        partitions = len({(part["topic"], part["partition"]) for part in report})
        counted = f"{partitions} partitions" + \
            (f" ({len(report)} copies)" if len(report) > partitions else "")
        verdict = "[red]damaged[/red]" if damaged else "[green]valid[/green]"
        out.print(f"{counted}, {total:,} bytes: {verdict}"
                  + (f" ({damaged} findings of damage)" if damaged else ""), markup=True)
    sys.exit(DAMAGED if damaged else 0)


@main.command()
@click.argument("paths", metavar="PATH...", nargs=-1, required=True,
                callback=_expand_globs)
@click.option("--group", "group", default=None, help="One consumer group's partitions only.")
@click.option("--at", "at", default=None, metavar="TIME",
              help="As of this moment (epoch milliseconds, or ISO 8601 such as "
                   "2026-11-25T03:00:00Z or 2026-11-25T04:00:00+01:00; without Z or an "
                   "offset, UTC): the commits written by then, and each partition's end "
                   "then.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
def lag(paths, group, at, as_json):
    """Consumer groups' committed offsets and lag, from the __consumer_offsets partitions
    under PATH and the partitions beside them, as `kafka-consumer-groups --describe` shows
    them: per group, topic and partition, the committed offset (the last commit; a
    tombstone removes it; a transactional commit counts once its transaction commits),
    the partition's log end offset and high watermark, and the lag (high watermark -
    committed offset). A partition whose directory is not under PATH has no lag ("-")."""
    as_of = _moment(at)
    try:
        with Work(shows_progress(as_json)) as work:
            rows = consumer_lag(list(paths), group=group, as_of=as_of, progress=work)
        if not rows:
            from ..read.consumer_lag import committed_offsets

            held = [] if group is None else \
                {key[0] for key in committed_offsets(list(paths), as_of=as_of)}
            raise click.UsageError(_holds_no_group(
                "committed offsets", "__consumer_offsets", paths, group, held,
                "" if as_of is None else f" written by {_when(as_of)}"))
    except SegmentLogError as error:
        _fail(error)
    if as_json:
        click.echo(json.dumps({"paths": list(paths), "group": group, "as_of": as_of,
                               "partitions": [row.to_dict() for row in rows]}, indent=2))
        return
    columns = [Column("group", "left", key=True), Column("type", "left"),
               Column("topic", "left", key=True), Column("partition", key=True),
               Column("current offset"), Column("log end offset"),
               Column("high watermark"), Column("lag"), Column("committed at (UTC)", "left")]
    table = [[row.group, row.group_type, row.topic, str(row.partition),
              str(row.committed_offset),
              _number(row.log_end_offset), _number(row.high_watermark), _number(row.lag),
              _when(row.commit_timestamp)] for row in rows]
    title = f"segmentlog lag: {_shown_paths(paths)}" + \
        (f" as of {_when(as_of)}" if as_of is not None else "")
    print_table(_console(wide=True), title, columns, table)


@main.command("share-groups")
@click.argument("paths", metavar="PATH...", nargs=-1, required=True,
                callback=_expand_globs)
@click.option("--group", "group", default=None, help="One share group's partitions only.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of a table.")
def share_groups(paths, group, as_json):
    """Share groups' progress (KIP-932), from the __share_group_state partitions under PATH
    and the partitions beside them, as `kafka-share-groups --describe --offsets` shows it:
    per group, topic and partition, the start offset, the deliveries completed beyond it,
    the records still in flight (available or acquired) and their highest delivery count,
    the leader epoch, and the lag (high watermark - start offset - completed deliveries;
    "-" where the partition's directory is not under PATH). --json adds every state
    batch."""
    from ..read.share_groups import share_group_state

    try:
        rows = share_group_state(list(paths), group=group)
        if not rows:
            held = [] if group is None else \
                {row.group for row in share_group_state(list(paths))}
            raise click.UsageError(_holds_no_group("share-group state", "__share_group_state",
                                                   paths, group, held))
    except SegmentLogError as error:
        _fail(error)
    if as_json:
        click.echo(json.dumps({"paths": list(paths), "group": group,
                               "partitions": [row.to_dict() for row in rows]}, indent=2))
        return
    columns = [Column("group", "left", key=True), Column("topic", "left", key=True),
               Column("partition", key=True), Column("start offset"), Column("completed"),
               Column("in flight"),
               Column("max deliveries"), Column("leader epoch"), Column("lag")]
    table = [[row.group, row.topic or row.topic_id, str(row.partition),
              str(row.start_offset), str(row.delivery_complete_count),
              str(row.in_flight_records), str(row.max_delivery_count),
              str(row.leader_epoch), _number(row.lag)] for row in rows]
    print_table(_console(wide=True), f"segmentlog share-groups: {_shown_paths(paths)}",
                columns, table)


def _holds_no_group(what: str, topic: str, paths, group: Optional[str], held,
                    when: str = "") -> str:
    """What lag and share-groups say when they find nothing to show: a usage error, as
    describe's, dump's and verify's of PATHs without partitions."""
    if group is None:
        return (f"nothing to show: the {topic} partitions under {_shown_paths(paths)} hold "
                f"no {what}{when}")
    groups = sorted(held)
    there = f"the groups with {what} there: {', '.join(groups[:10])}" + \
        (", ..." if len(groups) > 10 else "") if groups else f"no group has {what} there"
    return (f"nothing to show: group {group!r} has no {what}{when} in the {topic} "
            f"partitions under {_shown_paths(paths)} ({there})")


def _moment(text: Optional[str]) -> Optional[int]:
    """--at as epoch milliseconds, read as consumer_lag's `at` is (read.consumer_lag)."""
    try:
        return as_of_millis(text, "--at")
    except InvalidOptionError as error:
        raise click.UsageError(str(error))


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


def _integer(row: dict, field: str, option: str, number: int) -> int:
    """A field that holds a whole number (JSON's 5 or 5.0, CSV's "5")."""
    value = row[field]
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        return int(value)
    except (TypeError, ValueError):
        raise click.BadParameter(f"row {number}: field {field!r} holds {value!r}, not a whole "
                                 f"number", param_hint=option) from None


def _record(row: dict, key_field, value_field, timestamp_field, partition_field, number,
            topic: str, partitions: Optional[int]) -> dict:
    for field in (key_field, value_field, timestamp_field, partition_field):
        if field is not None and field not in row:
            raise click.BadParameter(f"row {number} has no field {field!r} "
                                     f"(it has {', '.join(map(repr, row)) or 'none'})")
    record = {"value": _as_bytes(row[value_field] if value_field else row)}
    if key_field is not None:
        record["key"] = _as_bytes(row[key_field])
    if timestamp_field is not None:
        record["timestamp"] = _integer(row, timestamp_field, "--timestamp-field", number)
    if partition_field is not None:
        partition = _integer(row, partition_field, "--partition-field", number)
        if partition < 0 or (partitions is not None and partition >= partitions):
            held = f"topic {topic!r} has partitions 0..{partitions - 1}" if partitions \
                else "partitions are numbered from 0"
            raise click.BadParameter(
                f"row {number}: field {partition_field!r} holds partition {partition}, but "
                f"{held}; without --partition-field rows are placed by key, as Kafka's "
                f"producer places them", param_hint="--partition-field")
        record["partition"] = partition
    return record


def _write_partitions(logdir: str, topic: str, num_partitions: Optional[int]
                      ) -> Optional[int]:
    """The partition count `topic` is written with, refusing in the command line's own
    words (the engine's speak of the Spark writer's options) what the engine would refuse:
    a topic name Kafka does not allow, a log dir a read would refuse, a new topic without
    --partitions, --partitions that differ from an existing topic's count."""
    try:
        validate_topic_name(topic, "--topic")
        if is_remote_uri(logdir):
            return num_partitions
        check_written_logdir(os.path.abspath(logdir))
        existing = list_topics(os.path.abspath(logdir)).get(topic)
    except (InvalidOptionError, InvalidInputError, StoreError) as error:
        raise click.UsageError(str(error))
    if not existing:
        if num_partitions is None:
            raise click.UsageError(f"topic {topic!r} does not exist in {logdir}: give "
                                   f"--partitions N to create it with N partitions")
        return num_partitions
    if num_partitions is not None and num_partitions != len(existing):
        raise click.UsageError(
            f"--partitions {num_partitions}, but topic {topic!r} in {logdir} has "
            f"{len(existing)} partitions: write appends, which keeps a topic's partition "
            f"count; leave out --partitions")
    return len(existing)


def _input_size(handle) -> Optional[int]:
    """The size of the input in bytes, for a progress bar: None unless it is a regular
    file (stdin from a pipe, a test's in-memory input)."""
    try:
        status = os.fstat(handle.fileno())
    except (AttributeError, OSError, ValueError):  # no file descriptor: no size to show
        return None
    regular = stat.S_ISREG(status.st_mode) and hasattr(handle, "buffer")
    return status.st_size if regular else None


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
    partitions = _write_partitions(logdir, topic, num_partitions)
    rows = (_record(row, key_field, value_field, timestamp_field, partition_field, number,
                    topic, partitions)
            for number, row in enumerate(_input_rows(input_file, input_format), 1))
    size = _input_size(input_file)
    try:
        with Work(shows_progress()) as work:
            work.phase(f"writing {topic}", size, BYTES if size is not None else "rows")
            with SegmentLogWriter(logdir, topic, num_partitions=num_partitions,
                                  compression=compression) as writer:
                for chunk in _chunks(rows, WRITE_CHUNK_ROWS):
                    writer.write_rows(chunk)
                    if size is None:
                        work.advance(len(chunk))
                    else:  # read ahead of the rows written by a buffer's length at most
                        work.reach(min(input_file.buffer.tell(), size))
                work.phase(f"publishing {topic}", None, "")
        summary = writer.summary
    except (InvalidOptionError, InvalidInputError, StoreError) as error:
        raise click.UsageError(str(error))
    except (CorruptLogError, CheckpointError) as error:
        _fail(error)
    except SegmentLogError as error:
        raise click.ClickException(str(error))
    columns = [Column("topic", "left", key=True), Column("partition", key=True),
               Column("offsets"), Column("records")]
    rows = [[part.topic, str(part.partition),
             f"{part.start_offset}..{part.end_offset - 1}" if part.records else "-",
             str(part.records)] for part in summary.partitions]
    print_table(_console(wide=True), f"wrote {summary.records} record{'' if summary.records == 1 else 's'} to {logdir}", columns,
                rows)
