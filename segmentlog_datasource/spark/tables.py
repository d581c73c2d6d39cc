"""SQL over segmentlog: what Spark (4.0 to 4.3 alike) hands a Python data source in each
SQL form.

* `CREATE TEMPORARY VIEW v USING segmentlog OPTIONS (path '...', ...)`: every query of
  the view (and an INSERT INTO it) gets the OPTIONS, as `load()` would.
* `CREATE TABLE t USING segmentlog OPTIONS (path '...', ...)` or `... LOCATION '...'`:
  `schema()` is called once, at CREATE, with the table's properties (the OPTIONS, each
  also as `option.<name>`; `path` and `location` as a `file:` URI; `provider`, `owner`).
  Every later SELECT gets no options at all, only the schema the catalog stored. So the
  read options are checked at CREATE and travel in that schema: in the metadata of its
  first column, which the catalog keeps and Spark hands the reader.
* `CREATE TABLE t (columns...) USING segmentlog ...`: nothing is called at CREATE, and a
  SELECT gets neither options nor a schema that carries them: it fails, naming the
  forms that work.
* An INSERT INTO a table made with CREATE TABLE gets no options either, and its schema
  is also what a DataFrame selected from such a table carries into a `.save()` without a
  path: so it is refused rather than written into that table's log.
"""
import json
from typing import Dict, Optional

from pyspark.sql.types import StructField, StructType

from ..errors import InvalidOptionError
from ..storage.config import STORE_OPTIONS

TABLE_OPTIONS_KEY = "segmentlog.tableOptions"  # column metadata: the table's read options
# Properties Spark's catalog adds to a table's OPTIONS when it creates the table.
CATALOG_PROPERTIES = frozenset({"provider", "location", "owner", "comment", "external",
                                "is_managed_location", "collation"})
CATALOG_OPTION_PREFIX = "option."
CREDENTIAL_OPTIONS = frozenset(name.lower() for name, field in STORE_OPTIONS.items()
                               if field in ("access_key_id", "secret_access_key",
                                            "session_token"))

FORMS_THAT_WORK = (
    "CREATE TABLE t USING segmentlog OPTIONS (path '/data/kafka-logs') (or LOCATION "
    "'/data/kafka-logs'), without a column list, or CREATE TEMPORARY VIEW t USING "
    "segmentlog OPTIONS (path '/data/kafka-logs')")


def _lowered(options) -> Dict[str, str]:
    return {str(name).lower(): value for name, value in dict(options).items()}


def is_table_creation(options) -> bool:
    """Whether Spark's catalog is creating a table (schema() sees its properties)."""
    return "provider" in _lowered(options)


def read_side(options) -> dict:
    """The options a read goes by: all given, less the write options a read has no use
    for (numPartitions, compression.type, ...), which it ignores, so that a view made for
    INSERTs (`OPTIONS (path '...', topic 'orders', numPartitions '3')`) reads back as it
    was written; `topic` stays, and reads that topic. A name neither side knows stays too,
    for the read to refuse. The writer's option names are imported only when a name is not
    a read option: a plain read's Spark workers do without the writer."""
    from ..read.options import (
        KAFKA_PREFIX, KAFKA_SOURCE_ONLY_OPTIONS, READ_OPTIONS, STREAM_OPTIONS,
    )

    read_names = {name.lower() for name in READ_OPTIONS | STREAM_OPTIONS
                  | KAFKA_SOURCE_ONLY_OPTIONS}
    others = [name for name in options if str(name).lower() not in read_names
              and not str(name).lower().startswith(KAFKA_PREFIX)]
    if not others:
        return options
    from ..writer.options import KNOWN_OPTIONS

    write_only = {name.lower() for name in KNOWN_OPTIONS} - read_names
    return {name: value for name, value in dict(options).items()
            if str(name).lower() not in write_only}


def table_read_options(properties) -> Dict[str, str]:
    """The read options among a table's properties, as CREATE TABLE gave them."""
    options = {}
    for name, value in dict(properties).items():
        lowered = str(name).lower()
        if lowered.startswith(CATALOG_OPTION_PREFIX):
            options[name[len(CATALOG_OPTION_PREFIX):]] = value
        elif lowered not in CATALOG_PROPERTIES:
            options.setdefault(name, value)
    by_name = {}
    for name, value in options.items():
        by_name.setdefault(name.lower(), (name, value))
    return read_side(dict(by_name.values()))


def check_table_options(options: Dict[str, str]) -> None:
    """Refuse at CREATE TABLE what would fail every SELECT, or keep secrets in the catalog."""
    from ..format.log import discover_copies
    from ..read.options import parse_read_options

    lowered = _lowered(options)
    if not lowered.get("path"):
        raise InvalidOptionError(
            "CREATE TABLE ... USING segmentlog needs the log's path: "
            "OPTIONS (path '/data/kafka-logs') or LOCATION '/data/kafka-logs'", "path")
    given = sorted(name for name in options if name.lower() in CREDENTIAL_OPTIONS)
    if given:
        raise InvalidOptionError(
            f"CREATE TABLE ... USING segmentlog with {', '.join(given)}: a table's options are "
            f"kept in the catalog, readable by whoever can read the table; give credentials "
            f"through the environment or a role instead", given[0])
    read = parse_read_options(options)
    # What the first SELECT would find: a missing path, a file, a directory of other data
    # fail here, so that no table is made over them.
    discover_copies(read.paths, read.store)


def with_table_options(schema: StructType, options: Dict[str, str]) -> StructType:
    """`schema` with the table's read options in its first column's metadata."""
    first, *rest = schema.fields
    metadata = dict(first.metadata or {}, **{TABLE_OPTIONS_KEY: json.dumps(options)})
    return StructType([StructField(first.name, first.dataType, first.nullable, metadata),
                       *rest])


def stored_table_options(schema) -> Optional[Dict[str, str]]:
    """The read options a table's stored schema carries (see with_table_options)."""
    if not isinstance(schema, StructType) or not schema.fields:
        return None
    stored = (schema.fields[0].metadata or {}).get(TABLE_OPTIONS_KEY)
    return json.loads(stored) if stored else None


def read_options(options, schema) -> dict:
    """The options a read goes by: those Spark passed, else (a SELECT of a table made by
    CREATE TABLE, which Spark hands none) those its stored schema carries."""
    if dict(options):
        return read_side(options)
    stored = stored_table_options(schema)
    if stored is not None:
        return stored
    raise InvalidOptionError(
        f"no path was given, and Spark passed this read no options at all: give "
        f".load('/data/kafka-logs'); in SQL, Spark passes no options to a table "
        f"declared with its columns, so use {FORMS_THAT_WORK}", "path")


BATCH_WRITE = "df.write.format('segmentlog').mode('append').option('topic', ...)" \
    ".save('/data/kafka-logs')"
STREAM_WRITE = "df.writeStream.format('segmentlog').option('topic', ...)" \
    ".start('/data/kafka-logs')"


def check_write_options(options, schema, how: str = BATCH_WRITE) -> None:
    """Refuse a write Spark passed no options: an INSERT INTO a CREATE TABLE table, or a
    `.save()` without a path (see the module's doc). `how`: the call that writes."""
    if dict(options):
        return
    table = " (the rows come from, or go to, a table made by CREATE TABLE ... USING " \
        "segmentlog, whose options Spark passes to no writer)" \
        if stored_table_options(schema) is not None else ""
    raise InvalidOptionError(
        f"no path was given, and Spark passed this write no options at all{table}: write "
        f"with {how}, or in SQL INSERT INTO a view made by CREATE TEMPORARY VIEW v USING "
        f"segmentlog OPTIONS (path '...', topic '...')", "path")
