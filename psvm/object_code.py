"""Load a cached function's machine code without parsing its LLVM module (#14, start-up).

numba caches a compiled function as its object code plus the LLVM bitcode of its module, and
on loading parses that bitcode: to link the function into code compiled later in the process,
and to list the symbols it defines. psvm's engine carries 0.5 MB of bitcode, and parsing it
took 25 ms of every process (psvm-train on heart_scale: 0.39 s; 0.32 s without the parse).
:func:`lean_loads` reads the defined symbols from the object code's ELF symbol table instead
and parses the bitcode only if something links the function in. Object code that is not
ELF64 little-endian (macOS, Windows) loads as numba loads it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import llvmlite.binding as ll
import numpy as np
from numba.core import codegen

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
    count = int.from_bytes(obj[0x3C:0x3E], "little")
    sections = np.frombuffer(obj, _SECTION, count, offset)
    names = set()
    for table in sections[sections["type"] == SHT_SYMTAB]:
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
