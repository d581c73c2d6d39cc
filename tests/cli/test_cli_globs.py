"""The command line takes a quoted glob of log dirs as a read's `path` option does: the
same output as the directories it matches, listed."""
import json
import os

from click.testing import CliRunner

from segmentlog_datasource.cli.main import main as cli
from support.fixtures import broker_disks_root


def run(*args):
    result = CliRunner().invoke(cli, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.output


def test_describe_verify_and_dump_expand_a_quoted_glob():
    root = broker_disks_root()
    brokers = [os.path.join(root, f"broker-{n}") for n in range(3)]
    glob = os.path.join(root, "broker-*")
    for command in (["describe", "--json"], ["verify", "--json"]):
        listed = run(*command, *brokers)
        globbed = run(*command, glob)
        assert listed[0] == globbed[0] and listed[0] in (0, 1), listed
        assert json.loads(globbed[1]) == json.loads(listed[1]), command
    partition = sorted(name for name in os.listdir(brokers[0])
                       if os.path.isdir(os.path.join(brokers[0], name)))[0]
    listed = run("dump", "--json", *[os.path.join(b, partition) for b in brokers
                                     if os.path.isdir(os.path.join(b, partition))])
    globbed = run("dump", "--json", os.path.join(root, "broker-?", partition))
    assert globbed == listed and globbed[0] == 0
    code, output = run("describe", os.path.join(root, "nothing-*"))
    assert code == 2 and "matches no directory" in output, output
