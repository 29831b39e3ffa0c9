"""Load a cached function's machine code without parsing its LLVM module (#14, start-up).

numba caches a compiled function as its object code plus the LLVM bitcode of its module, and
on loading parses that bitcode: to link the function into code compiled later in the process,
and to list the symbols it defines. psvm's engine carries 0.5 MB of bitcode, and parsing it
took 25 ms of every process (psvm-train on heart_scale: 0.39 s; 0.33 s without the parse).
:func:`lean_loads` reads the defined symbols from the object code's ELF symbol table instead
and parses the bitcode only if something links the function in. Object code that is not
ELF64 little-endian (macOS, Windows) loads as numba loads it.

numba's runtime (NRT), which every cached function links against, is not cached: each process
builds its LLVM IR in Python and compiles it, 19 ms. :func:`initialize_runtime` keeps its
machine code beside psvm's cache (:func:`runtime_path`) and loads it from there.

Both use numba 0.68's internals: where they are missing (another numba), numba's own ways.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Iterator
from contextlib import contextmanager

import llvmlite
import llvmlite.binding as ll
import numba
import numpy as np
from numba.core import codegen, config
from numba.core.compiler_lock import global_compiler_lock
from numba.core.runtime import nrtdynmod, rtsys

# ELF64 little-endian section headers and symbols
_SECTION = np.dtype(
    [("name", "<u4"), ("type", "<u4"), ("flags", "<u8"), ("addr", "<u8"), ("offset", "<u8"),
     ("size", "<u8"), ("link", "<u4"), ("info", "<u4"), ("align", "<u8"), ("entsize", "<u8")]
)  # fmt: skip
_SYMBOL = np.dtype(
    [("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"), ("value", "<u8"),
     ("size", "<u8")]
)  # fmt: skip
SHT_SYMTAB, STT_SECTION, STT_FILE, SHN_UNDEF = 2, 3, 4, 0


def defined_symbols(obj: bytes) -> set[str] | None:
    """The symbols that ELF64 little-endian object code ``obj`` defines: numba's list from
    the module's definitions, less the names LLVM keeps private to the object (which no one
    looks up). None for other object code, or one without a plain section table."""
    if obj[:6] != b"\x7fELF\x02\x01" or obj[0x3A:0x3C] != _SECTION.itemsize.to_bytes(2, "little"):
        return None
    offset = int.from_bytes(obj[0x28:0x30], "little")
    count = int.from_bytes(obj[0x3C:0x3E], "little")  # (0: 65,280 or more, counted elsewhere)
    sections = np.frombuffer(obj, _SECTION, count, offset)
    tables = sections[sections["type"] == SHT_SYMTAB]
    if not tables.size:
        return None
    names = set()
    for table in tables:
        symbols = np.frombuffer(obj, _SYMBOL, int(table["size"]) // _SYMBOL.itemsize,
                                int(table["offset"]))  # fmt: skip
        kind = symbols["info"] & 0xF
        defined = (kind != STT_SECTION) & (kind != STT_FILE) & (symbols["shndx"] != SHN_UNDEF)
        strings = sections[table["link"]]
        text = obj[int(strings["offset"]) : int(strings["offset"] + strings["size"])]
        for start in symbols["name"][defined & (symbols["name"] > 0)].tolist():
            names.add(text[start : text.index(b"\0", start)].decode())
    return names


# the parts of numba 0.68 that the lean load uses; without them numba's own load
LEAN = hasattr(codegen, "JITCodeLibrary") and all(
    hasattr(codegen.JITCodeLibrary, name)
    for name in ("enable_object_caching", "_set_compiled_object", "_finalize_final_module")
)


class _LazyLinking(codegen.JITCodeLibrary if LEAN else object):
    """A library loaded from object code whose module for linking is parsed when first asked
    for (numba's ``_get_module_for_linking``, a later compile that calls the function)."""

    @property
    def _shared_module(self):
        state = self.__dict__
        if state.get("_linking") is None and state.get("_bitcode") is not None:
            state["_linking"] = ll.parse_bitcode(state["_bitcode"])
            del state["_bitcode"]
        return state.get("_linking")

    @_shared_module.setter
    def _shared_module(self, module) -> None:
        self.__dict__["_linking"] = module

    def get_pointer_to_function(self, name):
        """numba's, after listing the module's symbols as numba does if the object's table
        lacked ``name`` (never seen: a safety net, at no cost otherwise)."""
        engine = self._codegen._engine
        if not engine.is_symbol_defined(name) and self.__dict__.get("_bitcode") is not None:
            engine._load_defined_symbols(self._shared_module)
        return super().get_pointer_to_function(name)


def _unserialize(gen, serialized):
    """numba's ``JITCodeLibrary._unserialize`` of object code, the bitcode left unparsed."""
    name, kind, data = serialized
    names = defined_symbols(data[0]) if kind == "object" else None
    if names is None:
        return type(gen).unserialize_library(gen, serialized)
    library = _LazyLinking(gen, name)
    library.enable_object_caching()
    library._set_compiled_object(data[0])
    library.__dict__["_bitcode"] = data[1]
    library._finalize_final_module()
    gen._engine._defined_symbols |= names
    return library


@contextmanager
def lean_loads(gen) -> Iterator[None]:
    """Within the block, libraries that codegen ``gen`` loads from the cache skip parsing
    their bitcode (under numba's compiler lock: no compile runs meanwhile)."""
    lean = (
        LEAN
        and getattr(gen, "_library_class", None) is codegen.JITCodeLibrary
        and isinstance(getattr(getattr(gen, "_engine", None), "_defined_symbols", None), set)
    )
    if not lean or "unserialize_library" in vars(gen):  # (numba's; or an outer block's)
        yield
        return
    with global_compiler_lock:
        gen.unserialize_library = _unserialize.__get__(gen)
        try:
            yield
        finally:
            del gen.unserialize_library


# the parts of numba 0.68 that keeping the runtime uses; without them numba's initialize
KEPT_RUNTIME = (
    LEAN
    and all(hasattr(nrtdynmod, name) for name in ("create_nrt_module", "compile_nrt_functions"))
    and isinstance(getattr(rtsys, "_init", None), bool)
)


def runtime_path(gen) -> str:
    """Where the runtime's machine code for codegen ``gen`` is kept: numba's cache folder
    (``NUMBA_CACHE_DIR``), else psvm's ``__pycache__`` (not writable: compiled in each
    process, as by numba); named by numba's and LLVM's versions, the CPU's name and features
    and the settings that change the runtime's code."""
    settings = (config.DEBUG_NRT, config.DEBUG_NRT_STACK_LIMIT, config.OPT)
    key = repr((numba.__version__, llvmlite.__version__, gen.magic_tuple(), settings))
    name = f"psvm-nrt-{hashlib.sha1(key.encode()).hexdigest()[:16]}.bin"
    folder = config.CACHE_DIR or os.path.join(os.path.dirname(__file__), "__pycache__")
    return os.path.join(folder, name)


def _compiled_runtime(ctx):
    """numba's ``compile_nrt_functions``, keeping the machine code for :func:`runtime_path`."""
    module, library = nrtdynmod.create_nrt_module(ctx)
    library.enable_object_caching()
    library.add_ir_module(module)
    library.finalize()
    return library


def initialize_runtime(ctx) -> None:
    """numba's ``rtsys.initialize(ctx)``, its library loaded from :func:`runtime_path` when a
    process left it there, else compiled and left there."""
    with global_compiler_lock:  # (re-entrant: a load holds it already)
        if not KEPT_RUNTIME or rtsys._init:  # (numba's own; or initialised already)
            return rtsys.initialize(ctx)
        gen = ctx.codegen()
        path = runtime_path(gen)
        serialized = _kept(path)
        if serialized is not None:
            try:  # (lean when lean_loads is on)
                return _initialize(ctx, lambda _: gen.unserialize_library(serialized))
            except Exception:  # a copy that does not load: compiled again, and replaced
                pass
        _initialize(ctx, _compiled_runtime)
        _keep(path, rtsys.library.serialize_using_object_code())


def _initialize(ctx, make) -> None:
    """``rtsys.initialize(ctx)`` with ``make(ctx)`` giving its library."""
    numbas = nrtdynmod.compile_nrt_functions
    nrtdynmod.compile_nrt_functions = make
    try:
        rtsys.initialize(ctx)
    finally:
        nrtdynmod.compile_nrt_functions = numbas


def _kept(path: str) -> tuple | None:
    """The runtime's machine code at ``path`` as numba serialises a library, if it is there
    and whole."""
    try:
        with open(path, "rb") as f:
            name, kind, (obj, bitcode) = serialized = pickle.load(f)
    except Exception:  # (missing, unreadable, cut short, or not this shape)
        return None
    whole = kind == "object" and isinstance(obj, bytes) and isinstance(bitcode, bytes)
    return serialized if whole and isinstance(name, str) else None


def _keep(path: str, serialized) -> None:
    """Write the runtime's machine code to ``path``, if its folder lets us."""
    from psvm.io.atomic import write_atomic  # (psvm.io imports psvm's compiled code)

    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with write_atomic(path, "wb") as f:
            pickle.dump(serialized, f)
    except OSError:
        pass
