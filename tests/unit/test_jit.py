"""psvm.jit: one specialisation per argument types, no wrappers for first-class use, no
Python entry for inner helpers, and cache loads without numba's registries."""

import os
import subprocess
import sys

import numpy as np
import pytest

from psvm.jit import inner, njit
from tests._helpers import REPO, checkout_env


@inner
def _total(a, n):
    s = 0.0
    for k in range(n):
        s += a[k]
    return s


@njit
def _twice(a):
    return _total(a, 2) + _total(a, a.size)  # a literal and a variable n


def test_literal_and_variable_arguments_share_one_specialisation():
    assert _twice(np.arange(4.0)) == 1.0 + 6.0
    assert len(_total.signatures) == 1
    assert _total.targetoptions["no_cpython_wrapper"] and _total.targetoptions["no_cfunc_wrapper"]


def test_a_python_call_is_refused_not_a_crash():
    with pytest.raises(TypeError, match="compiled callers only"):
        _total(np.arange(5.0), 3)


@njit
def _head(a, n):
    return a[:n].sum()


@njit
def _heads(a):
    return _head(a, 1) + _head(a, a.size)


def test_njit_helpers_also_share_one_specialisation_for_literals():
    assert _heads(np.arange(4.0)) == 0.0 + 6.0
    assert len(_head.signatures) == 1
    assert _head.targetoptions["no_cfunc_wrapper"] and not _head.targetoptions.get(
        "no_cpython_wrapper"
    )


WARM = """
import sys
import numpy as np
from psvm.kernels import row_sq_norms
out = np.empty(2)
row_sq_norms(np.array([0, 1, 2]), np.array([3.0, 4.0]), out)
assert out.tolist() == [9.0, 16.0], out
print(sorted(m for m in ("numba.np.arraymath", "scipy.linalg", "cffi") if m in sys.modules))
"""


def test_a_warm_process_loads_cached_functions_without_numba_registries():
    """The second process finds row_sq_norms in numba's cache and loads it without numba's
    registries (which import scipy.linalg and cffi, 0.3 s of a warm start)."""
    env = checkout_env()
    runs = [
        subprocess.run([sys.executable, "-c", WARM], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    assert runs[1].stdout.strip() == "[]"


def test_without_numbas_private_load_the_cache_loads_as_numba_does():
    """Another numba without the private parts LeanCache uses: numba's own load, same result
    (its registries imported again)."""
    env = checkout_env()
    code = "import psvm.jit\npsvm.jit._LEAN = False\n" + WARM
    runs = [
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        for _ in range(2)
    ]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    assert "numba.np.arraymath" in runs[1].stdout


def test_the_cache_goes_stale_when_any_psvm_module_changes(tmp_path):
    """engine.run inlines other modules' helpers and constants, which numba's own stamp (the
    function's file) does not see: psvm's stamp covers every module, by its text (a wheel's
    cache stays valid where pip installs it, with new file times)."""
    from psvm.jit import psvm_sources_stamp

    def stamp(root):
        return psvm_sources_stamp.__wrapped__(str(root))

    text = open(os.path.join(REPO, "psvm", "svc", "select.py"), "rb").read()
    for root in (tmp_path / "a", tmp_path / "b"):
        (root / "svc").mkdir(parents=True)
        (root / "svc" / "select.py").write_bytes(text)
        (root / "constants.py").write_text("NEVER = 0\n")
    before = stamp(tmp_path / "a")
    os.utime(tmp_path / "a" / "svc" / "select.py", ns=(1, 1))
    assert stamp(tmp_path / "a") == before == stamp(tmp_path / "b")  # another place and time
    (tmp_path / "a" / "constants.py").write_text("NEVER = 1\n")
    assert stamp(tmp_path / "a") != before
    (tmp_path / "a" / "constants.py").write_text("NEVER = 0\n")
    assert stamp(tmp_path / "a") == before
    (tmp_path / "a" / "svc" / "select.py").write_bytes(text + b"\n# a change\n")
    assert stamp(tmp_path / "a") != before
