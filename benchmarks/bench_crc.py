"""CRC32C implementations side by side: the compiled decoder's (format/crc.py picks it
first), the `crc32c` package's and crcmod's, on one core, in turns; and what importing the
`crc32c` package costs a fresh interpreter.

    python benchmarks/bench_crc.py
    python benchmarks/bench_crc.py --sizes 4096,1048576 --rounds 9
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def implementations():
    import crcmod.predefined

    from segmentlog_datasource.format.fastpath import _compiled

    found = {}
    compiled = _compiled(warn=False)
    if compiled is not None and compiled.crc32c is not None:
        found["compiled"] = compiled.crc32c
    try:
        import crc32c

        found["crc32c package"] = crc32c.crc32c
    except ImportError:
        pass
    found["crcmod"] = crcmod.predefined.mkPredefinedCrcFun("crc-32c")
    return found


def gigabytes_per_second(crc, data: bytes, seconds: float = 0.2) -> float:
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        crc(data)
        calls += 1
    return calls * len(data) / (time.perf_counter() - start) / 1e9


def import_seconds(module: str, runs: int = 5) -> float:
    """Best wall time of `import module` in a fresh interpreter, less a bare start's."""
    def best(code):
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True)
            times.append(time.perf_counter() - start)
        return min(times)

    return best(f"import {module}") - best("pass")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="512,4096,65536,1048576")
    parser.add_argument("--rounds", type=int, default=5, help="turns; the best of each is shown")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    found = implementations()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"{'bytes':>9}" + "".join(f"{name + ' GB/s':>22}" for name in found))
    for size in sizes:
        data = os.urandom(size)
        best = {name: 0.0 for name in found}
        for _ in range(args.rounds):  # in turns: the machine's load drifts
            for name, crc in found.items():
                best[name] = max(best[name], gigabytes_per_second(crc, data))
        print(f"{size:>9,}" + "".join(f"{best[name]:>22.2f}" for name in found))
    if "crc32c package" in found:
        print(f"\nimporting the crc32c package: {import_seconds('crc32c') * 1000:.0f} ms "
              "in a fresh interpreter (best of 5, less a bare start)")


if __name__ == "__main__":
    main()
