"""tests/fixtures/kafka-written is an exact copy of the shared Kafka-written fixtures."""
import filecmp
import os

import pytest

from support.fixtures import BUNDLED
from support.paths import CHECKOUT

SHARED = CHECKOUT.parent / "shared" / "fixtures" / "kafka-written"


def relative_files(root):
    return sorted(os.path.relpath(os.path.join(directory, name), root)
                  for directory, _, files in os.walk(root) for name in files)


def test_the_bundled_copy_holds_every_case_with_its_manifest():
    names = relative_files(BUNDLED)
    partitions = {n.split(os.sep)[1] for n in names if n.startswith("logdir" + os.sep)
                  and n.count(os.sep) == 2}
    manifests = {n.split(os.sep)[1][: -len(".manifest.json")] for n in names
                 if n.endswith(".manifest.json")}
    assert "README.md" in names and len(partitions) == 14 and partitions == manifests


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"no shared fixtures beside the checkout "
                                                 f"({SHARED}) to compare the copy with")
def test_the_bundled_copy_equals_the_shared_fixtures():
    assert relative_files(BUNDLED) == relative_files(SHARED)
    for name in relative_files(SHARED):
        assert filecmp.cmp(os.path.join(BUNDLED, name), os.path.join(SHARED, name),
                           shallow=False), name
