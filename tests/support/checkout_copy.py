"""A copy of this checkout's source with no compiled module in it, as a checkout is where
the package was installed with pip, and Python runs started in it: Spark's workers, and a
job started from a checkout's root, put the working directory first on sys.path."""
import os
import shutil
import subprocess
import sys

from support.paths import CHECKOUT

NO_BUILDS = shutil.ignore_patterns("*.so", "*.pyd", "__pycache__")


def copy_checkout_source(target) -> None:
    """The package, writer/ (which a checkout run imports as the package's writer), and
    the files beside them, copied into `target` without any build."""
    for name in ("segmentlog_datasource", "writer"):
        shutil.copytree(os.path.join(CHECKOUT, name), os.path.join(target, name),
                        ignore=NO_BUILDS)
    for name in ("pyspark_segmentlog.py", "setup.py"):
        shutil.copy(os.path.join(CHECKOUT, name), target)


def run_in_copy(copy, script: str) -> subprocess.CompletedProcess:
    """`script` run by this Python in the copy (its working directory first on the path,
    the installed package after it, PYTHONPATH left out)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", script], cwd=str(copy), env=env,
                          capture_output=True, text=True, timeout=120)


def loaded_extension(copy, program: str):
    """(the program module's file, its extension's file) as a run in `copy` loads them,
    every warning an error."""
    run = run_in_copy(copy, "import warnings; warnings.simplefilter('error'); "
                            f"import segmentlog_datasource.decode.{program} as p; "
                            "m = p.extension(); print(p.__file__); print(m.__file__)")
    assert run.returncode == 0, run.stderr
    package, built = run.stdout.split()
    return package, built
