"""The long sweep of damaged internal-topic records (issue #46); the CI run is
tests/format/test_internal_damage.py, the damage and the oracle are in
tests/support/internal_damage.py.

    python tests/fuzz_internal_records.py [--cases 100000] [--seed N]
    python tests/fuzz_internal_records.py --seconds 600

Damages records of every type of the fixtures' internal topics and decodes each with
segmentlog and with the independent reader of what Kafka's code does; prints the
verdicts per stratum and every case where the two disagree (with its bytes, to replay
with support.internal_damage.judge); exits with status 1 if any did.
"""
import argparse
import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from support.internal_damage import AGREED, load_seeds, run_cases  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seconds", type=float, default=None,
                        help="run batches of 5,000 cases until this much time has passed")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    seeds = load_seeds()
    verdicts = collections.Counter()
    labels = collections.defaultdict(collections.Counter)
    failed = []
    started = time.monotonic()
    seed, done = args.seed, 0
    while True:
        count = 5000 if args.seconds else min(5000, args.cases - done)
        if count <= 0:
            break
        for verdict, case, kafka, ours in run_cases(seed, count, seeds):
            verdicts[verdict] += 1
            labels[case["label"]][verdict] += 1
            if verdict not in AGREED:
                failed.append((verdict, case, kafka.reason, ours.reason))
        done += count
        seed += 1
        if args.seconds and time.monotonic() - started >= args.seconds:
            break
    elapsed = time.monotonic() - started
    for label, counts in sorted(labels.items()):
        print(f"{label}: {dict(counts)}")
    print(f"\n{done} cases in {elapsed:.1f} s from seed {args.seed}: {dict(verdicts)}")
    for verdict, case, kafka_reason, our_reason in failed[:50]:
        print(f"\n{verdict}: {json.dumps(case)}\n  Kafka: {kafka_reason}\n  segmentlog: "
              f"{our_reason}")
    if failed:
        print(f"\n{len(failed)} cases disagree")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
