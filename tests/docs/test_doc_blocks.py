"""Every code block of the README, BENCHMARKS.md and docs/ runs, so that the docs cannot
drift from the code; a block that cannot run here says why in the Markdown.

What runs, and where its paths point, is in support/doc_blocks.py. A page's Python and SQL
blocks run in order on the test run's one SparkSession, in one namespace per page; then
every DataFrame they made is planned (segmentlog checks a read's options and paths when
Spark plans it, before any task: a DataFrame no action ran would pass unchecked), and
every streaming query they started processes what is there and stops.
Its `segmentlog` command lines run in-process (click's CliRunner), without Spark, so they
run beside the Spark tests. Each page gets its own copy of the sandbox, so its writes are
its own; what a page leaves in the session (tables, views, queries) is removed.

Beside the blocks: every link between the pages finds its file and heading, every file
the README and docs/ name exists, and the layout page (docs/layout.md) describes every
directory of the package.
"""
import contextlib
import io
import os
import re
import shlex

import pytest

from support.doc_blocks import (OUTPUT_LANGUAGES, RUN_LANGUAGES, blocks, build_sandbox,
                                commands, copy_sandbox, pages, python_steps, statements,
                                substitute)
from support.paths import CHECKOUT

PAGES = pages()
BLOCKS = {page: blocks(page) for page in PAGES}
SPARK_PAGES = [page for page in PAGES
               if any(b.runs and b.language in ("python", "sql") for b in BLOCKS[page])]
COMMAND_PAGES = [page for page in PAGES
                 if any(b.runs and (b.language == "bash" or b.transcript) for b in BLOCKS[page])]


def test_every_block_runs_or_says_why_not():
    problems = []
    for page, found in BLOCKS.items():
        for block in found:
            if block.not_run is not None:
                if not block.not_run:
                    problems.append(f"{block.where}: `<!-- not run: -->` without a reason")
            elif block.language == "bash":
                problems += [f"{block.where}: `{line}` is not a segmentlog command: mark the "
                             "block `<!-- not run: why -->`"
                             for line in commands(block) if not line.startswith("segmentlog ")]
            elif block.language not in RUN_LANGUAGES + OUTPUT_LANGUAGES:
                problems.append(f"{block.where}: ```{block.language} does not run here: mark "
                                "it `<!-- not run: why -->`")
    assert not problems, "\n".join(problems)
    assert "README.md" in SPARK_PAGES and "docs/cli.md" in COMMAND_PAGES


# GitHub's anchors: lower case, punctuation but `-` and `_` dropped, spaces as `-`.
def anchor(heading: str) -> str:
    text = re.sub(r"[`*]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page) -> set:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {anchor(line.lstrip("#")) for line in text.split("\n") if line.startswith("#")}


def test_every_link_between_pages_finds_its_page_and_heading():
    broken = []
    for page in PAGES:
        path = CHECKOUT / page
        text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, fragment = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if not linked.exists():
                broken.append(f"{page}: ({target}): no such file")
            elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
                broken.append(f"{page}: ({target}): no such heading")
    assert not broken, "\n".join(broken)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    """The sandbox's template; each page runs in a copy (support/doc_blocks.py)."""
    return build_sandbox(str(tmp_path_factory.mktemp("docs") / "sandbox"))


def plan(frame):
    """Spark's planning of `frame`'s query down to its RDDs, which plans a Python data
    source's read (its reader and partitions), without running a job: adaptive execution
    must be off, or it would run the query's shuffle stages."""
    frame._jdf.queryExecution().executedPlan().execute()


def failed(block, text, error):
    return AssertionError(f"{block.where}: the ```{block.language} block fails:\n{text}\n"
                          f"{type(error).__name__}: {error}")


def run_python(block, text, namespace, frames):
    """Runs a block statement by statement, noting the DataFrames it makes."""
    from pyspark.sql import DataFrame

    for code, is_expression, names in python_steps(text, block.where):
        if is_expression:
            values = [eval(code, namespace)]
        else:
            exec(code, namespace)
            values = [namespace.get(name) for name in names]
        frames += [(value, block) for value in values if isinstance(value, DataFrame)]


@pytest.mark.parametrize("page", SPARK_PAGES)
def test_python_and_sql_blocks_run(page, spark, sandbox, tmp_path):
    root = copy_sandbox(sandbox, str(tmp_path / "sandbox"))
    namespace = {"spark": spark, "__name__": "__docs__"}
    frames, ran = [], []
    views = {table.name for table in spark.catalog.listTables()}
    queries = {query.id for query in spark.streams.active}
    try:
        for block in BLOCKS[page]:
            if not block.runs or block.language not in ("python", "sql"):
                continue
            text = substitute(block.text, root)
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    if block.language == "python":
                        run_python(block, text, namespace, frames)
                    else:
                        for statement in statements(text):
                            spark.sql(statement).collect()
            except Exception as error:
                raise failed(block, text, error) from error
            ran.append(block.where)
        adaptive = spark.conf.get("spark.sql.adaptive.enabled")
        spark.conf.set("spark.sql.adaptive.enabled", "false")
        try:
            seen = set()
            for frame, block in frames:
                if id(frame) in seen or frame.isStreaming:
                    continue
                seen.add(id(frame))
                try:
                    plan(frame)
                except Exception as error:
                    raise failed(block, "(a DataFrame it makes cannot be planned)",
                                 error) from error
        finally:
            spark.conf.set("spark.sql.adaptive.enabled", adaptive)
        for query in spark.streams.active:
            if query.id not in queries:
                query.processAllAvailable()
                assert query.exception() is None, f"{page}: a streaming query failed"
    finally:
        for query in spark.streams.active:
            if query.id not in queries:
                query.stop()
        for table in spark.catalog.listTables():
            if table.name not in views:
                if table.isTemporary:
                    spark.catalog.dropTempView(table.name)
                else:
                    spark.sql(f"DROP TABLE IF EXISTS {table.name}")
    assert ran == [block.where for block in BLOCKS[page]
                   if block.runs and block.language in ("python", "sql")]


@pytest.mark.parametrize("page", COMMAND_PAGES)
def test_command_lines_run(page, sandbox, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from segmentlog_datasource.cli import main

    root = copy_sandbox(sandbox, str(tmp_path / "sandbox"))
    monkeypatch.chdir(f"{root}/work")
    for block in BLOCKS[page]:
        if not block.runs or not (block.language == "bash" or block.transcript):
            continue
        for line in commands(block):
            command = substitute(line, root)
            result = CliRunner().invoke(main, shlex.split(command, comments=True)[1:])
            assert result.exit_code == 0, \
                f"{block.where}: `{line}` exited with {result.exit_code}:\n{result.output}"
            if block.transcript:
                shown = [substitute(out, root).rstrip() for out in block.text.split("\n")[1:]]
                printed = [out.rstrip() for out in result.output.split("\n")]
                missing = [out for out in shown if out and out not in printed]
                assert not missing, f"{block.where}: `{line}` no longer prints:\n" + \
                    "\n".join(missing) + f"\n\nit prints:\n{result.output}"


def source_files():
    """Paths of the checkout's sources (relative), as the layout page names them."""
    found = set()
    for top in ("segmentlog_datasource", "writer", "examples", "benchmarks", "tests", ".ci"):
        for directory, dirs, files in os.walk(CHECKOUT / top):
            dirs[:] = [name for name in dirs if name not in ("__pycache__", "fixtures", "venv")]
            found |= {os.path.relpath(os.path.join(directory, name), CHECKOUT) for name in files}
    return found | {name for name in os.listdir(CHECKOUT) if name.endswith(".py")}


def named_in(text) -> set:
    return set(re.findall(r"`[^`]+`", text))


def test_the_pages_name_only_files_that_exist():
    """Files named in the README and docs/ (the benchmarks' history names past ones)."""
    files = source_files()
    missing = []
    for page in PAGES:
        if page in ("BENCHMARKS.md", "docs/benchmarks-history.md"):
            continue
        text = (CHECKOUT / page).read_text(encoding="utf-8")
        missing += [f"{page}: {name}" for name in sorted(set(re.findall(
            r"`([\w./-]+\.(?:py|c|h))`", text)))
            if not any(path == name or path.endswith("/" + name) for path in files)]
    assert not missing, "files named that are not in the checkout:\n" + "\n".join(missing)


def test_the_layout_page_describes_every_package_directory():
    text = (CHECKOUT / "docs" / "layout.md").read_text(encoding="utf-8")
    directories = {os.path.dirname(path) for path in source_files()
                   if path.startswith(("segmentlog_datasource/", "writer/"))
                   and path.endswith(".py")}
    spans = named_in(text)  # a directory as `fastpath/`, `format/internal/` or its whole path
    unnamed = sorted(directory for directory in directories if not spans & {
        f"`{name}/`" for name in (os.path.basename(directory), directory.split("/", 1)[-1],
                                  directory)})
    assert not unnamed, f"docs/layout.md does not describe these directories: {unnamed}"
