"""The compiled decoder's layout constants and run states equal the Python ones.

Kafka's layout (format/layout.py) and decode_run()'s states (fastpath/protocol.py) are
defined once, in Python; setup.py compiles the values fastpath/buildinfo.py lists into
_fastrecords.c as macros, and the module exports the values it was built with.
"""
import os
import shlex
import shutil
import subprocess
import sysconfig

import pytest

from segmentlog_datasource.format import fastpath, layout
from segmentlog_datasource.format.fastpath import buildinfo, protocol
from support.paths import CHECKOUT

from support.compiled import compiled
from support.compiled import requires_compiled as requires_fast

_fastrecords = compiled._fastrecords if compiled is not None else None

DEFINED_IN = {"layout.py": layout, "protocol.py": protocol}
COMPILED = [(name, DEFINED_IN[os.path.basename(relative)])
            for relative, names in buildinfo.COMPILED_CONSTANTS.items() for name in names]
C_SOURCE = CHECKOUT / "segmentlog_datasource" / "format" / "fastpath" / "_fastrecords.c"


@requires_fast
@pytest.mark.parametrize("name,module", COMPILED, ids=[name for name, _ in COMPILED])
def test_c_layout_constant_equals_the_python_one(name, module):
    assert getattr(_fastrecords, name) == getattr(module, name)


def test_the_package_reads_the_values_setup_py_compiles_in():
    assert buildinfo.compiled_constants() == {name: getattr(module, name)
                                              for name, module in COMPILED}
    # The facade re-exports the run states; it defines none of its own.
    for name in buildinfo.COMPILED_CONSTANTS["protocol.py"]:
        assert getattr(fastpath, name) is getattr(protocol, name)


def test_run_states_are_distinct_flags():
    flags = [protocol.RUN_FLUSH, protocol.RUN_DONE, protocol.RUN_END]
    assert protocol.RUN_ENTRY_FOR_PYTHON == 0
    assert all(flag and flag & (flag - 1) == 0 for flag in flags) and len(set(flags)) == 3


def _syntax_check(macros):
    """(returncode, stderr) of compiling _fastrecords.c, syntax only, with `macros`."""
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if shutil.which(compiler[0]) is None:
        pytest.skip(f"no C compiler ({compiler[0]})")
    command = compiler + ["-fsyntax-only", "-I", sysconfig.get_paths()["include"]]
    command += [f"-D{name}={value}" for name, value in macros]
    result = subprocess.run(command + [str(C_SOURCE)], capture_output=True, text=True,
                            timeout=120)
    return result.returncode, result.stderr


def test_c_source_compiles_only_with_every_value_passed():
    returncode, stderr = _syntax_check(buildinfo.define_macros(str(C_SOURCE.parent)))
    assert returncode == 0, stderr
    returncode, stderr = _syntax_check([])
    assert returncode != 0
    for name, _ in COMPILED:
        assert f"{name} is not defined" in stderr, (name, stderr[:2000])
