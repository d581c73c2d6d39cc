"""The code blocks of the project's Markdown, and the sandbox their example paths point into
(tests/docs/test_doc_blocks.py runs them).

A page is README.md, BENCHMARKS.md or a file under docs/. Its fenced blocks are:

- ```python: run in order, in one namespace per page that starts with `spark` alone (the
  test run's session), as a reader runs them in a `pyspark` shell;
- ```sql: each statement through `spark.sql`, its rows collected;
- ```bash: every line a `segmentlog ...` command, run in-process through click's CliRunner;
- ``` (no language) or ```text: output. One whose first line is `$ segmentlog ...` is a
  transcript: the command runs and prints the lines shown.

A block that cannot run here says so in the line just before it, `<!-- not run: why -->`;
any other language, and a bash line that is not a segmentlog command, must.

The examples' paths are placeholders: `/data/...`, `/backup/...`, `/chk/...` and `/lake/...`
are taken as paths inside a sandbox (`build_sandbox`) that holds what the pages say is
there: `/data/kafka-logs` a log dir with an `orders` topic of 6 partitions and Kafka's
internal topics (Kafka-written), `/data/kraft-logs` a KRaft metadata log,
`/backup/broker-0..2` three brokers' log dirs of one cluster, `/backup/kafka-logs` a log dir
whose `orders` holds Schema Registry framed Avro values beside its `_schemas` topic.
Relative paths in commands are taken in the sandbox's `work/` directory, which holds the
brokers' log dirs and the input files the commands name.
"""
import ast
import json
import os
import re
import shutil
from dataclasses import dataclass
from typing import List, Optional

from support.fixtures import (broker_disks_root, internal_topics_kafka4_root, internal_topics_root,
                              tiered_cluster_root)
from support.paths import CHECKOUT

NOT_RUN = re.compile(r"^\s*<!--\s*not run:\s*(?P<why>.*?)\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<language>[\w+-]*)\s*$")
RUN_LANGUAGES = ("python", "sql", "bash")
OUTPUT_LANGUAGES = ("", "text")
PLACEHOLDER = re.compile(r"(?<![\w.:/~-])/(?P<root>data|backup|chk|lake)(?=/)")


def pages() -> List[str]:
    """Every page, relative to the checkout: README.md, BENCHMARKS.md, docs/**/*.md."""
    found = ["README.md", "BENCHMARKS.md"]
    for directory, _, files in os.walk(CHECKOUT / "docs"):
        found += sorted(os.path.relpath(os.path.join(directory, name), CHECKOUT)
                        for name in files if name.endswith(".md"))
    return found


@dataclass
class Block:
    page: str
    line: int  # of the opening fence, from 1
    language: str
    text: str
    not_run: Optional[str]  # why, when the block is marked

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def transcript(self) -> bool:
        return self.language in OUTPUT_LANGUAGES and self.text.startswith("$ segmentlog ")

    @property
    def runs(self) -> bool:
        return self.not_run is None and (self.language in RUN_LANGUAGES or self.transcript)


def blocks(page: str) -> List[Block]:
    """The fenced blocks of `page`, in order."""
    lines = (CHECKOUT / page).read_text(encoding="utf-8").split("\n")
    found, number = [], 0
    while number < len(lines):
        opening = FENCE.match(lines[number])
        if not opening:
            number += 1
            continue
        indent = len(opening.group("indent"))
        end = number + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise AssertionError(f"{page}:{number + 1}: a code block that is never closed")
        marker = NOT_RUN.match(lines[number - 1]) if number else None
        body = "\n".join(line[indent:] for line in lines[number + 1:end])
        found.append(Block(page, number + 1, opening.group("language"), body,
                           marker.group("why") if marker else None))
        number = end + 1
    return found


def substitute(text: str, sandbox: str) -> str:
    """`text` with its placeholder paths inside `sandbox`."""
    return PLACEHOLDER.sub(lambda match: f"{sandbox}/{match.group('root')}", text)


def commands(block: Block) -> List[str]:
    """The command lines of a bash block (comments and blank lines left out)."""
    lines = [line for line in block.text.split("\n")
             if line.strip() and not line.lstrip().startswith("#")]
    if block.transcript:
        return [lines[0][2:]]
    return lines


def statements(sql: str) -> List[str]:
    return [statement.strip() for statement in sql.split(";") if statement.strip()]


def python_steps(source: str, filename: str):
    """(code, is_expression) for each top-level statement of `source`, so that a runner sees
    the value of every expression and every assignment in turn."""
    tree = ast.parse(source, filename)
    for node in tree.body:
        if isinstance(node, ast.Expr):
            yield compile(ast.Expression(node.value), filename, "eval"), True, None
        else:
            names = []
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [name.id for target in targets for name in ast.walk(target)
                         if isinstance(name, ast.Name)]
            yield compile(ast.Module([node], []), filename, "exec"), False, names


# ------------------------------------------------------------------ the sandbox

ORDERS_PARTITIONS = 6
ORDERS_PER_PARTITION = 5000
MAY_FIRST_9H = 1714554000000  # 2024-05-01T09:00:00Z, epoch ms: the orders span 09:00-12:00


def orders_table(partitions: int = ORDERS_PARTITIONS, per_partition: int = ORDERS_PER_PARTITION):
    """`orders`: per partition, records three hours apart end to end, keyed by customer, a
    JSON value, a trace header on every tenth."""
    import pyarrow as pa

    rows = partitions * per_partition
    step = 3 * 3600 * 1000 // per_partition
    keys, values, stamps, headers, parts = [], [], [], [], []
    for n in range(rows):
        partition, i = divmod(n, per_partition)
        keys.append(b"customer-%d" % (n % 97))
        values.append(json.dumps({"order": n, "amount": n % 250}).encode())
        stamps.append(MAY_FIRST_9H + i * step)
        headers.append([("trace", b"%08x" % n)] if n % 10 == 0 else [])
        parts.append(partition)
    from segmentlog_datasource.format.arrow import HEADER_TYPE

    return pa.table({"key": keys, "value": values,
                     "timestamp": pa.array(stamps, pa.timestamp("ms", tz="UTC")),
                     "headers": pa.array(headers, HEADER_TYPE), "partition": parts})


def framed_orders(count: int = 3000):
    """`orders` as structs, for a write with valueFormat=avro."""
    import pyarrow as pa

    return pa.table({"value": pa.array(
        [{"order_id": n, "customer": f"customer-{n % 97}", "amount": n % 250 + 0.5}
         for n in range(count)],
        pa.struct([("order_id", pa.int64()), ("customer", pa.string()),
                   ("amount", pa.float64())]))})


def build_sandbox(root: str) -> str:
    """The sandbox the pages' paths point into (see the module's docstring), under `root`."""
    from segmentlog_datasource.writer import write_log

    data, backup, work = (os.path.join(root, name) for name in ("data", "backup", "work"))
    for directory in (data, backup, work, os.path.join(root, "chk"), os.path.join(root, "lake")):
        os.makedirs(directory)
    logdir = os.path.join(data, "kafka-logs")
    write_log(logdir, orders_table(), topic="orders", num_partitions=ORDERS_PARTITIONS,
              segment_bytes=128 << 10)
    # Kafka's internal topics as Kafka 3.9 wrote them (the command line page's transcript),
    # and a share-group state partition as Kafka 4.2 writes it.
    for source, name in [(internal_topics_root(), "__consumer_offsets-0"),
                         (internal_topics_root(), "__consumer_offsets-1"),
                         (internal_topics_root(), "__transaction_state-0"),
                         (internal_topics_kafka4_root(), "__share_group_state-0")]:
        shutil.copytree(os.path.join(source, name), os.path.join(logdir, name))
    os.symlink(internal_topics_kafka4_root(), os.path.join(data, "kraft-logs"))
    brokers = broker_disks_root()
    for n in range(3):
        for directory in (backup, work):
            os.symlink(os.path.join(brokers, f"broker-{n}"),
                       os.path.join(directory, f"broker-{n}"))
    os.symlink(tiered_cluster_root(), os.path.join(work, "tiered"))  # a tiered cluster
    os.symlink(os.path.join(brokers, "broker-0"), os.path.join(backup, "a"))
    os.symlink(os.path.join(brokers, "broker-1"), os.path.join(backup, "b"))
    write_log(os.path.join(backup, "kafka-logs"), framed_orders(), topic="orders",
              num_partitions=3, options={"valueFormat": "avro"})
    # The command line page's input files.
    with open(os.path.join(work, "events.jsonl"), "w", encoding="utf-8") as events:
        for n in range(300):
            events.write(json.dumps({"user": f"user-{n % 7}", "page": f"/p/{n}"}) + "\n")
    with open(os.path.join(work, "prices.csv"), "w", encoding="utf-8") as prices:
        prices.write("sku,price\n" + "".join(f"sku-{n},{n * 3 + 0.99}\n" for n in range(50)))
    return root


def copy_sandbox(template: str, target: str) -> str:
    """A page's own copy of the sandbox (its writes stay its own); links stay links."""
    shutil.copytree(template, target, symlinks=True)
    return target
