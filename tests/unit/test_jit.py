"""psvm.jit.inner: one specialisation per argument types, no wrappers, no Python entry."""

import numpy as np
import pytest
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


def test_a_python_call_is_refused_not_a_crash():
    with pytest.raises(TypeError, match="compiled callers only"):
        _total(np.arange(5.0), 3)
