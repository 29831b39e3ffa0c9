"""psvm.jit.inner: one specialisation per argument types, no wrappers, callable from Python."""

import numpy as np
from numba import njit

from psvm.jit import inner


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


def test_a_python_call_runs_a_twin_with_the_same_result():
    a = np.arange(5.0)
    assert _total(a, 3) == 3.0
    assert _total(a, 5) == _twice(a) - _total(a, 2) == 10.0


def test_the_twin_logs_its_caller_when_asked(tmp_path, monkeypatch):
    @inner
    def helper(x):
        return x + 1

    log = tmp_path / "twin.log"
    monkeypatch.setenv("PSVM_JIT_TWIN_LOG", str(log))
    assert helper(1) == 2
    assert "helper" in log.read_text() and __name__.rsplit(".", 1)[-1] in log.read_text()
