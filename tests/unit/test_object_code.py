"""psvm.object_code: a cached function's symbols read from its object code, its bitcode
parsed only when another function links it in."""

import pickle
import subprocess
import sys

import llvmlite.binding as ll
import numba
import numpy as np
import pytest

from psvm import object_code
from tests._helpers import checkout_env


@numba.njit
def _scaled(a, k):
    return a.sum() * k + 1.0


def _serialized():
    """(serialized library, its entry points) of a freshly compiled function."""
    _scaled(np.arange(3.0), 2.0)
    cres = _scaled.overloads[_scaled.signatures[0]]
    entries = {cres.fndesc.llvm_func_name, cres.fndesc.llvm_cpython_wrapper_name}
    return cres.library.serialize_using_object_code(), entries


def _module_definitions(module) -> set[str]:
    """numba's list of a module's symbols (``JitEngine._load_defined_symbols``)."""
    return {g.name for gs in (module.functions, module.global_variables) for g in gs
            if not g.is_declaration}  # fmt: skip


def test_the_object_code_defines_what_the_module_exports():
    """Every symbol of the module that the object code can export (numba's list, less what
    LLVM keeps internal to it) is among the ELF symbols, the entry points included."""
    (_, kind, (obj, bitcode)), entries = _serialized()
    assert kind == "object"
    names = object_code.defined_symbols(obj)
    module = ll.parse_bitcode(bitcode)
    exported = {
        g.name
        for gs in (module.functions, module.global_variables)
        for g in gs
        if not g.is_declaration and g.linkage.name not in ("internal", "private")
    }
    assert entries <= exported <= names <= _module_definitions(module)


def test_other_object_code_is_left_to_numba():
    """Mach-O, 32-bit or big-endian ELF, and ELF without a plain section table (a count of 0
    stands for 65,280 sections or more) load as numba loads them."""
    (_, _, (obj, _)), _ = _serialized()
    assert object_code.defined_symbols(b"\xcf\xfa\xed\xfe\x07\x00\x00\x01" + bytes(64)) is None
    assert object_code.defined_symbols(b"\x7fELF\x01\x01" + obj[6:]) is None  # 32-bit
    assert object_code.defined_symbols(b"\x7fELF\x02\x02" + obj[6:]) is None  # big-endian
    assert object_code.defined_symbols(obj[:0x3C] + bytes(2) + obj[0x3E:]) is None
    assert object_code.defined_symbols(obj[:0x3A] + bytes(2) + obj[0x3C:]) is None


LINKED = """
import sys
import numba
import numpy as np
import psvm.object_code
if sys.argv[1] == "numba":  # another numba: its own loads
    psvm.object_code.LEAN = psvm.object_code.KEPT_RUNTIME = False
from psvm.kernels import row_sq_norms
from psvm.object_code import _LazyLinking
out = np.empty(2)
row_sq_norms(np.array([0, 1, 2]), np.array([3.0, 4.0]), out)  # loaded from the cache
overload = row_sq_norms.overloads[row_sq_norms.signatures[0]]
library, name = overload.library, overload.fndesc.llvm_func_name
lean = type(library) is _LazyLinking
print(lean, library.__dict__.get("_linking") is None if lean else lean)
if lean:  # a name the object's table lacked: the module's list, as numba's
    library._codegen._engine._defined_symbols.discard(name)
print(library.get_pointer_to_function(name) != 0)


@numba.njit
def caller(indptr, data):  # compiled here: links the loaded library in
    out = np.empty(indptr.size - 1)
    row_sq_norms(indptr, data, out)
    return out.sum()


print(caller(np.array([0, 2, 3]), np.array([1.0, 2.0, 3.0])))
linking = library._get_module_for_linking()
print(linking is library._get_module_for_linking(), bool(linking.get_function(name)))
"""


@pytest.mark.parametrize("numbas", [False, True])
def test_a_function_compiled_later_links_a_lean_loaded_one(numbas):
    """A fresh process loads row_sq_norms lean (its bitcode not parsed), then compiles a
    caller of it: that compile parses the bitcode it links (once) and computes the right
    sums. Without numba's parts that lean loads use: numba's own load, the same sums."""
    mode = "numba" if numbas else "lean"
    runs = [
        subprocess.run(
            [sys.executable, "-c", LINKED, mode], env=checkout_env(), capture_output=True, text=True
        )
        for _ in range(2)  # (the first may compile row_sq_norms into the cache)
    ]
    assert runs[-1].returncode == 0, runs[-1].stderr
    lean = str(object_code.LEAN and not numbas)
    assert runs[-1].stdout.split() == [lean, lean, "True", "14.0", "True", "True"]  # 1 + 4 + 9


RUNTIME = """
import numba
import numpy as np
from numba.core.runtime import rtsys
from psvm.kernels import row_sq_norms
from psvm.object_code import _LazyLinking
out = np.empty(2)
row_sq_norms(np.array([0, 1, 2]), np.array([3.0, 4.0]), out)  # the runtime, then the function


@numba.njit
def made(n):  # compiled here: allocates through the runtime, and links its library in
    return np.arange(n) * 2.0


print(isinstance(rtsys.library, _LazyLinking), made(3).sum() + out.sum())
"""


def test_the_runtime_is_compiled_once_then_loaded(tmp_path):
    """The first process compiles numba's runtime and keeps its machine code in the cache
    folder; the next loads it, and compiled code allocates through it. A copy cut short, or
    one that does not load, is compiled again and replaced."""
    from numba.core.registry import cpu_target

    env = checkout_env(NUMBA_CACHE_DIR=str(tmp_path))

    def run() -> list[str]:
        r = subprocess.run([sys.executable, "-c", RUNTIME], env=env, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    name = object_code.runtime_path(cpu_target.target_context.codegen()).rsplit("/", 1)[-1]
    path = tmp_path / name
    assert run() == ["False", "31.0"] and object_code._kept(str(path)) is not None
    assert run() == [str(object_code.LEAN), "31.0"]  # 2 x (0 + 1 + 2) + 9 + 16
    path.write_bytes(path.read_bytes()[:100])
    assert object_code._kept(str(path)) is None
    assert run() == ["False", "31.0"] and object_code._kept(str(path)) is not None
    garbage = ("nrt", "object", (b"\x7fELF\x02\x01" + bytes(100), b"not bitcode"))
    path.write_bytes(pickle.dumps(garbage))  # whole, but does not load
    assert object_code._kept(str(path)) == garbage
    assert run() == ["False", "31.0"] and object_code._kept(str(path)) != garbage
