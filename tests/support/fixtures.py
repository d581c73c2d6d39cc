"""Where the Kafka-written fixtures are: SEGMENTLOG_FIXTURES, else the copy in tests/."""
import os

FIXTURES_ENV = "SEGMENTLOG_FIXTURES"
BUNDLED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                       "fixtures", "kafka-written")


def fixtures_root() -> str:
    """The fixtures' log dir: $SEGMENTLOG_FIXTURES (a set with a logdir/ inside, or a log
    dir itself), or the copy of ../shared/fixtures/kafka-written kept in tests/fixtures."""
    root = os.environ.get(FIXTURES_ENV) or BUNDLED
    return os.path.join(root, "logdir") if os.path.isdir(os.path.join(root, "logdir")) else root
