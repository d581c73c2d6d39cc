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


def test_ci_keeps_a_contributors_venv_and_uses_a_directory_of_its_own():
    script = (CHECKOUT / ".ci" / "run").read_text(encoding="utf-8")
    removals = [line.split()[2:] for line in script.splitlines() if line.startswith("rm ")]
    assert removals == [[".ci/venv"]], removals
    command = script.strip().splitlines()[-1]
    assert command == ('python3 -m venv .ci/venv '
                       '&& .ci/venv/bin/pip install --no-compile ".[test]" '
                       "&& .ci/venv/bin/pytest -q -n 2 --dist loadgroup --durations=15 tests")
    # CI runs exactly the README's test command.
    assert f"```bash\n{command}\n```" in (CHECKOUT / "README.md").read_text(encoding="utf-8")
