"""Loading one of the compiled modules of this package, from beside its Python twin or,
in a checkout run, from another copy of the package on sys.path.

Run from a checkout (the source tree first on sys.path, as Spark's Python workers put
their working directory), an extension is usually not built beside its source; the build
of an installed copy of the package is then used, but only if it was built from the
checkout's own C source and the Python values compiled into it (setup.py compiles
buildinfo.source_sha256() into the module's SOURCE_SHA256). The record decoder and encoder
here load so, and so do the value decoders of decode/ (load_extension's `package`).
"""
import importlib.machinery
import importlib.util
import os
import sys

from .buildinfo import source_sha256

_HERE = os.path.dirname(os.path.abspath(__file__))


def _spec_in_another_copy(name: str, package: str, here: str):
    """The first build of `package`'s extension `name` in another sys.path entry, or None."""
    for entry in sys.path:
        if not isinstance(entry, str):
            continue
        directory = os.path.join(entry or os.curdir, *package.split("."))
        if not os.path.isdir(directory) or os.path.samefile(directory, here):
            continue
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(directory, name + suffix)
            if os.path.isfile(path):
                return importlib.util.spec_from_file_location(f"{package}.{name}", path)
    return None


def load_extension(name: str, c_source: str, package: str = __package__,
                   here: str = _HERE, checkout_sha256=source_sha256):
    """The compiled module `name` of `package` (whose directory is `here`), built from
    `c_source`; ImportError saying why when there is no usable build. `checkout_sha256`
    computes the sha256 a build of the source in `here` records (None: no source there)."""
    full_name = f"{package}.{name}"
    source = os.path.join(here, c_source)
    checkout_sha256 = checkout_sha256(here, c_source)  # None in an install: no C source
    spec = importlib.util.find_spec(full_name)  # beside the source: an install or in-place build
    if spec is None and checkout_sha256 is not None:
        spec = _spec_in_another_copy(name, package, here)  # a checkout: e.g. the installed build
    if spec is None:
        elsewhere = "" if checkout_sha256 is None else " or in another copy on sys.path"
        raise ImportError(f"not built: no compiled {name} module beside {source}" + elsewhere)
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError as exc:  # e.g. built for another platform or Python
        raise ImportError(f"{spec.origin} does not import: {exc}") from exc
    built_from = getattr(module, "SOURCE_SHA256", None)
    if checkout_sha256 is not None and built_from != checkout_sha256:
        # Its C twin may work differently from the Python code beside this file. Loading
        # a single-phase extension also registers it in sys.modules: undo that.
        if sys.modules.get(full_name) is module:
            del sys.modules[full_name]
        raise ImportError(f"built from other source: {spec.origin} was not built from "
                          f"{source} and the values it compiles in (its source sha256 is "
                          f"{built_from or 'not recorded'}, the checkout's is {checkout_sha256})")
    sys.modules[full_name] = module
    setattr(sys.modules[package], name, module)
    return module
