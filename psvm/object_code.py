"""Load a cached function's machine code without parsing its LLVM module (#14, start-up).

numba caches a compiled function as its object code plus the LLVM bitcode of its module, and
on loading parses that bitcode: to link the function into code compiled later in the process,
and to list the symbols it defines. psvm's engine carries 0.5 MB of bitcode, and parsing it
took 25 ms of every process (psvm-train on heart_scale: 0.39 s; 0.32 s without the parse).
:func:`lean_loads` reads the defined symbols from the object code's ELF symbol table instead
and parses the bitcode only if something links the function in. Object code that is not
ELF64 little-endian (macOS, Windows) loads as numba loads it.

numba's runtime (NRT), which every cached function links against, is not cached: each process
builds its LLVM IR in Python and compiles it, 19 ms. :func:`initialize_runtime` keeps its
machine code beside psvm's cache (:func:`runtime_path`) and loads it from there.
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
SHT_SYMTAB, STT_OBJECT, STT_FUNC, SHN_UNDEF = 2, 1, 2, 0


def defined_symbols(obj: bytes) -> set[str] | None:
    """The functions and data objects that ELF64 little-endian object code ``obj`` defines
    (what numba lists from the module's definitions); None for other object code."""
    if obj[:6] != b"\x7fELF\x02\x01":
        return None
    offset = int.from_bytes(obj[0x28:0x30], "little")
    count = int.from_bytes(obj[0x3C:0x3E], "little")  # (0: 65,280 sections or more)
    sections = np.frombuffer(obj, _SECTION, count, offset)
    tables = sections[sections["type"] == SHT_SYMTAB]
    if not tables.size:  # (nothing to read the symbols from: numba's load)
        return None
    names = set()
    for table in tables:
        symbols = np.frombuffer(obj, _SYMBOL, int(table["size"]) // _SYMBOL.itemsize,
                                int(table["offset"]))  # fmt: skip
        kind = symbols["info"] & 0xF
        defined = ((kind == STT_OBJECT) | (kind == STT_FUNC)) & (symbols["shndx"] != SHN_UNDEF)
        strings = sections[table["link"]]
        text = obj[int(strings["offset"]) : int(strings["offset"] + strings["size"])]
        for start in symbols["name"][defined].tolist():
            names.add(text[start : text.index(b"\0", start)].decode())
    return names


class _LazyLinking(codegen.JITCodeLibrary):
    """A library loaded from object code whose module for linking is parsed when first asked
    for (numba's ``_get_module_for_linking``, a later compile that calls the function)."""

    @property
    def _shared_module(self):
        state = self.__dict__
        if state.get("_linking") is None and state.get("_bitcode") is not None:
            state["_linking"] = ll.parse_bitcode(state.pop("_bitcode"))
        return state.get("_linking")

    @_shared_module.setter
    def _shared_module(self, module) -> None:
        self.__dict__["_linking"] = module


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


# the parts of numba 0.68 that _unserialize uses (and the engine's ``_defined_symbols`` set);
# without them numba's own load
LEAN = all(
    hasattr(codegen.JITCodeLibrary, name)
    for name in ("enable_object_caching", "_set_compiled_object", "_finalize_final_module")
)


@contextmanager
def lean_loads(gen) -> Iterator[None]:
    """Within the block, libraries that codegen ``gen`` loads from the cache skip parsing
    their bitcode (numba's compiler lock held: no compile runs meanwhile)."""
    engine = getattr(gen, "_engine", None)
    if not (LEAN and isinstance(gen, codegen.JITCPUCodegen)) or not isinstance(
        getattr(engine, "_defined_symbols", None), set
    ):
        yield
        return
    gen.unserialize_library = _unserialize.__get__(gen)
    try:
        yield
    finally:
        del gen.unserialize_library


def runtime_path(gen) -> str:
    """Where the runtime's machine code for codegen ``gen`` is kept: numba's cache folder
    (``NUMBA_CACHE_DIR``), else psvm's ``__pycache__``; named by numba's and LLVM's versions
    and the CPU's name and features."""
    key = repr((numba.__version__, llvmlite.__version__, gen.magic_tuple()))
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
    process left it there, else compiled and left there (numba's compiler lock held)."""
    if getattr(rtsys, "_init", True):  # (done; or another numba: its own)
        return rtsys.initialize(ctx)
    gen = ctx.codegen()
    path = runtime_path(gen)
    serialized = _kept(path)
    if serialized is not None:
        try:  # (its lean load: lean_loads is on)
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
