"""The package's layers import only downwards, and only the Spark adapters import Spark.

    errors  <-  storage  <-  format  <-  read  <-  decode  <-  spark
                             format  <-  writer <-  spark
                             read, decode, writer  <-  cli (the command line, free of Spark)
    errors  <-  schemas  <-  decode, writer, spark, cli (schema languages' cores)

Read from the source files (the checkout's `segmentlog_datasource/` and `writer/`, which
installs as `segmentlog_datasource.writer`), every import counted, also those inside
functions.
"""
import ast
import os

import pytest

from support.paths import CHECKOUT

PACKAGE = "segmentlog_datasource"
ALLOWED = {
    "errors": {"errors"},
    "storage": {"errors", "storage"},
    "format": {"errors", "storage", "format"},
    "read": {"errors", "storage", "format", "read"},
    "schemas": {"errors", "schemas"},
    "decode": {"errors", "storage", "format", "read", "schemas", "decode"},
    "writer": {"errors", "storage", "format", "schemas", "writer"},
    "spark": {"errors", "storage", "format", "read", "schemas", "decode", "writer", "spark",
              "package"},
    "cli": {"errors", "storage", "format", "read", "schemas", "decode", "writer", "cli"},
    # The package's __init__ registers the source (spark) and exports the lookups (read);
    # its __main__ runs the command line (cli).
    "package": {"errors", "storage", "format", "read", "schemas", "decode", "spark", "cli",
                "package"},
}
SPARK_MODULES = ("pyspark", "py4j")


def source_modules():
    """(dotted module name, path) of every module, writer/ under its installed name."""
    roots = [(CHECKOUT / PACKAGE, PACKAGE), (CHECKOUT / "writer", PACKAGE + ".writer")]
    for root, dotted_root in roots:
        for directory, _, files in os.walk(root):
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                relative = os.path.relpath(os.path.join(directory, name), root)[:-3]
                parts = [p for p in relative.split(os.sep) if p != "__init__"]
                yield ".".join([dotted_root] + parts), os.path.join(directory, name), \
                    name == "__init__.py"


def layer_of(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "package"
    return parts[1] if parts[1] in ALLOWED else "package"


def imported_modules(module: str, path: str, is_package: bool):
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                if not node.module:  # from . import x: x may be a module
                    for alias in node.names:
                        yield target + "." + alias.name, node.lineno
                    continue
                yield target, node.lineno
            else:
                yield node.module, node.lineno


MODULES = sorted(source_modules())


def test_every_layer_has_modules():
    layers = {layer_of(module) for module, _, _ in MODULES}
    assert layers == set(ALLOWED), layers


@pytest.mark.parametrize("module,path,is_package", MODULES, ids=[m for m, _, _ in MODULES])
def test_imports_go_down_the_layers(module, path, is_package):
    layer = layer_of(module)
    wrong = []
    for target, line in imported_modules(module, path, is_package):
        top = target.split(".")[0]
        if top in SPARK_MODULES and layer != "spark":
            wrong.append(f"line {line}: {target} (only segmentlog_datasource.spark imports Spark)")
        if top == PACKAGE:
            target_layer = layer_of(target)
            if target_layer not in ALLOWED[layer]:
                wrong.append(f"line {line}: {target} ({layer} may not import {target_layer})")
    assert not wrong, f"{path}: " + "; ".join(wrong)


def test_the_checker_sees_relative_imports():
    imports = dict(imported_modules(PACKAGE + ".read.planning",
                                    str(CHECKOUT / PACKAGE / "read" / "planning.py"), False))
    assert PACKAGE + ".format.log" in imports and PACKAGE + ".errors" in imports
    imports = dict(imported_modules(PACKAGE + ".writer.errors",
                                    str(CHECKOUT / "writer" / "errors.py"), False))
    assert PACKAGE + ".errors" in imports
