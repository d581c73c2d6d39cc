"""`segmentlog share-groups`: share groups' progress from Kafka 4.2's share-state partition,
as a table and as JSON, against the manifest's replay (tests/read/test_share_groups.py)."""
import json

from click.testing import CliRunner

from segmentlog_datasource.cli.main import main as cli
from support.fixtures import internal_topics_kafka4_root
from support.share_state import replayed_from_manifest


def test_share_groups_as_json_and_as_a_table(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["share-groups", internal_topics_kafka4_root(), "--json"])
    assert result.exit_code == 0, result.output
    partitions = json.loads(result.output)["partitions"]
    expected = replayed_from_manifest()
    assert {(p["group"], p["topic_id"], p["partition"]): (p["start_offset"],
                                                          p["delivery_complete_count"])
            for p in partitions} == \
        {key: (state["startOffset"], state["deliveryCompleteCount"])
         for key, state in expected.items()}
    assert all(isinstance(p["state_batches"], list) for p in partitions)
    text = runner.invoke(cli, ["share-groups", internal_topics_kafka4_root()],
                         env={"COLUMNS": "200"})
    assert text.exit_code == 0, text.output
    rows = [line for line in text.output.splitlines() if line.startswith("│")]
    assert len(rows) == len(expected)
    group, topic_id, partition = sorted(expected)[0]
    first = [cell.strip() for cell in rows[0].strip("│").split("│")]
    assert first[:4] == [group, topic_id, str(partition),
                         str(expected[group, topic_id, partition]["startOffset"])]
    missing = runner.invoke(cli, ["share-groups", str(tmp_path)])
    assert missing.exit_code == 2 and "no __share_group_state partition" in missing.output
