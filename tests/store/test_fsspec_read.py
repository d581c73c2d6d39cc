"""A store pyarrow has no filesystem for is read through fsspec when a package registers
its scheme: here fsspec's own in-memory filesystem, holding copies of the fixtures."""
import os

import fsspec
import pytest

from support.manifest import arrow_rows, expected_rows, load_manifest, partition_names
from segmentlog_datasource.errors import StoreError
from segmentlog_datasource.format.scan import ScanOptions
from segmentlog_datasource.read.fragments import scan_fragments
from segmentlog_datasource.read.options import parse_read_options
from segmentlog_datasource.read.planning import Constraints, plan_fragments


@pytest.fixture(scope="module")
def in_memory(kafka_logdir):
    memory = fsspec.filesystem("memory")
    for name in partition_names(kafka_logdir):
        for file_name in os.listdir(os.path.join(kafka_logdir, name)):
            with open(os.path.join(kafka_logdir, name, file_name), "rb") as handle:
                memory.pipe(f"/segmentlog-fixtures/{name}/{file_name}", handle.read())
    yield "memory://segmentlog-fixtures"
    memory.rm("/segmentlog-fixtures", recursive=True)


@pytest.mark.parametrize("isolation", ["read_uncommitted", "read_committed"])
def test_fixtures_in_an_fsspec_filesystem_read_as_kafka_read_them(in_memory, kafka_logdir,
                                                                   isolation):
    for name in partition_names(kafka_logdir):
        topic, _, partition = name.rpartition("-")
        read = parse_read_options({"path": in_memory, "includeHeaders": "true",
                                   "isolationLevel": isolation,
                                   "assign": '{"%s": [%s]}' % (topic, partition)})
        fragments = plan_fragments(read, Constraints())
        rows = arrow_rows(list(scan_fragments(fragments, ScanOptions(include_headers=True))))
        assert rows == expected_rows(load_manifest(kafka_logdir, name), isolation), name


def test_a_scheme_no_filesystem_knows_is_a_clear_error():
    with pytest.raises(StoreError, match=r"^nosuchfs://bucket/: cannot set up the store: "):
        plan_fragments(parse_read_options({"path": "nosuchfs://bucket/logs"}), Constraints())
