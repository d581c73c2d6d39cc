"""Install hints name commands that work: each extra they name exists, quoted for shells."""
import os

from support.paths import CHECKOUT


def test_every_install_hint_names_an_extra_the_package_declares():
    import importlib.metadata
    import re

    extras = set(importlib.metadata.metadata("segmentlog").get_all("Provides-Extra"))
    hints = set()
    unquoted = []
    sources = [os.path.join(root, name)
               for top in ("segmentlog_datasource", "writer")
               for root, _, files in os.walk(CHECKOUT / top) for name in files
               if name.endswith(".py")]
    for source in sources:
        text = open(source, encoding="utf-8").read()
        hints.update(re.findall(r'pip install \\?"segmentlog\[(\w+)\]\\?"', text))
        unquoted.extend(re.findall(r"pip install '?segmentlog\[\w+\]", text))
    assert {"zstd", "snappy", "s3", "spark"} <= hints
    assert hints <= extras, hints - extras
    # Unquoted, the brackets are a glob to zsh, which then refuses the command.
    assert not unquoted, unquoted


README_TEST_COMMAND = ('python3 -m venv .ci/venv '
                       '&& .ci/venv/bin/pip install --no-compile ".[test]" '
                       "&& .ci/venv/bin/pytest -q -n 2 --dist loadgroup --durations=15 tests")


def test_ci_keeps_a_contributors_venv_and_uses_a_directory_of_its_own():
    script = (CHECKOUT / ".ci" / "run").read_text(encoding="utf-8")
    removals = [line.split()[2:] for line in script.splitlines() if line.startswith("rm ")]
    assert removals == [[".ci/venv"]], removals
    # CI runs exactly the README's test command, once, as a command of its own.
    assert script.splitlines().count(README_TEST_COMMAND) == 1
    assert f"```bash\n{README_TEST_COMMAND}\n```" in \
        (CHECKOUT / "README.md").read_text(encoding="utf-8")


def test_ci_runs_the_compatibility_subset_on_spark_40_beside_the_suite():
    lines = (CHECKOUT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    suite = lines.index(README_TEST_COMMAND)
    install = next(n for n, line in enumerate(lines) if ".ci/compat --install-only" in line)
    run = next(n for n, line in enumerate(lines) if ".ci/compat --no-install" in line)
    background = next(n for n in range(run, suite) if lines[n].rstrip().endswith("&"))
    waited = next(n for n, line in enumerate(lines) if line.startswith('wait "$compat"'))
    # installed, then run, in the background from before the suite; waited for after it
    assert install <= run <= background < suite < waited
    assert " 4.0 " in lines[install] and " 4.0" in lines[run]
    assert lines[-1].startswith("exit ") and "compat" in lines[-1]  # its failure fails CI
    assert (CHECKOUT / ".ci" / "compat").stat().st_mode & 0o111  # executable, like .ci/run
