"""The long fuzz run of damaged segments and indexes (issue #9); the CI run is
tests/format/test_fuzz.py, and the model and oracle are in tests/support/fuzzing.py.

    python tests/fuzz_segments.py --seconds 600 [--seed N] [--workers 2]
    python tests/fuzz_segments.py --replay '<case JSON from a report>'
    python tests/fuzz_segments.py --atheris --seconds 600 [libFuzzer flags, crash files]

By default cases come from the random mutation model, each run in a worker process
(crashes and hangs are failing cases); with --atheris (when atheris is installed) the
same model takes its choices from atheris' coverage-guided input, in this process, and
libFuzzer keeps any crashing input as a file to pass back in. Prints cases per second and
every failing case with its reproducer; exits with status 1 if any case failed.
"""
import argparse
import collections
import itertools
import json
import logging
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from support.fuzzing import (  # noqa: E402
    AtherisChooser, CaseRunner, Fixtures, RandomChooser, draw_case, reproducer, run_case,
)

SEEDS_PER_RUN = 1_000_003  # case i of a run with --seed s uses seed s * SEEDS_PER_RUN + i


class Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.cases = 0
        self.failed = 0
        self.statuses = collections.Counter()
        self.outcomes = collections.Counter()

    def add(self, case, seed, result):
        with self.lock:
            self.cases += 1
            self.statuses[result["status"]] += 1
            self.outcomes.update(result.get("outcomes", []))
            if result["status"] != "ok":
                self.failed += 1
                print(f"\nFAILED ({result['status']}, case seed {seed}): {result['detail']}\n"
                      f"{reproducer(case)}\n", flush=True)


def random_run(args) -> int:
    fixtures = Fixtures()
    tally = Tally()
    numbers = itertools.count()
    deadline = time.monotonic() + args.seconds
    started = time.monotonic()

    def work():
        runner = CaseRunner(fixtures.root, timeout=args.timeout)
        try:
            while time.monotonic() < deadline:
                seed = args.seed * SEEDS_PER_RUN + next(numbers)
                case = draw_case(RandomChooser(seed), fixtures)
                tally.add(case, seed, runner.run(case))
        finally:
            runner.close()

    threads = [threading.Thread(target=work, daemon=True) for _ in range(args.workers)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        next(thread for thread in threads if thread.is_alive()).join(timeout=10)
        elapsed = time.monotonic() - started
        print(f"{tally.cases} cases, {tally.cases / elapsed:.1f}/s, {tally.failed} failed",
              flush=True)
    elapsed = time.monotonic() - started
    print(f"\nseed {args.seed}: {tally.cases} cases in {elapsed:.0f} s "
          f"({tally.cases / elapsed:.1f} cases/s, {args.workers} workers); "
          f"{dict(tally.statuses)}")
    print("accepted outcomes: " + ", ".join(
        f"{name or 'rejected'}: {count}" for name, count in tally.outcomes.most_common()))
    return 1 if tally.failed else 0


def replay(args) -> int:
    case = json.loads(args.replay)
    runner = CaseRunner(timeout=args.timeout)
    try:
        result = runner.run(case)
    finally:
        runner.close()
    print(f"{result['status']}: {result['detail'] or result.get('outcomes')}")
    return 0 if result["status"] == "ok" else 1


def atheris_run(args, libfuzzer_args) -> int:
    import atheris

    with atheris.instrument_imports():
        import segmentlog_datasource.format  # noqa: F401  (instrumented for coverage)
        import segmentlog_datasource.read.planning  # noqa: F401
        import segmentlog_datasource.read.fragments  # noqa: F401
    import tempfile

    fixtures = Fixtures()
    workdir = tempfile.mkdtemp(prefix="segmentlog-atheris-")

    def one_input(data: bytes):
        case = draw_case(AtherisChooser(atheris.FuzzedDataProvider(data)), fixtures)
        result = run_case(fixtures, case, workdir)
        if result["status"] != "ok":
            print(f"\nFAILED: {result['detail']}\n{reproducer(case)}\n", flush=True)
            raise AssertionError(result["detail"])

    flags = [f"-max_total_time={int(args.seconds)}", f"-timeout={int(args.timeout)}"]
    atheris.Setup([sys.argv[0]] + flags + libfuzzer_args, one_input)
    atheris.Fuzz()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--seed", type=int, default=None, help="default: from the clock")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60,
                        help="seconds a case may take before it counts as a hang")
    parser.add_argument("--replay", help="run one case (JSON, as a report prints it)")
    parser.add_argument("--atheris", action="store_true",
                        help="coverage-guided, when atheris is installed")
    args, rest = parser.parse_known_args()
    # The reader warns where an active segment's data ends; the oracle judges that.
    logging.getLogger("segmentlog_datasource").setLevel(logging.ERROR)
    if args.replay:
        return replay(args)
    if args.atheris:
        try:
            import atheris  # noqa: F401
        except ImportError:
            print("atheris is not installed: using the random mutation model", flush=True)
        else:
            return atheris_run(args, rest)
    if rest:
        parser.error(f"unknown arguments {rest}")
    if args.seed is None:
        args.seed = int(time.time())
    print(f"fuzzing for {args.seconds:.0f} s with seed {args.seed} and {args.workers} "
          f"workers (fixtures: {Fixtures().root})", flush=True)
    return random_run(args)


if __name__ == "__main__":
    sys.exit(main())
