"""``inner``: numba's njit for helpers that only compiled code calls.

The first run after install compiles every helper of the engine (#14). numba builds two
wrappers for each compiled function, one for Python callers and one for first-class
function use, and compiles one specialisation per literal argument (``f(x, 0)`` and
``f(x, k)`` are two). A helper that only compiled code calls needs neither wrapper nor the
literal copies: ``inner`` drops them.

A Python call raises TypeError. Helpers that Python (tests included) calls stay ``njit``:
a second, Python-callable compilation of an ``inner`` helper in a process that loaded the
helper from numba's cache corrupted the heap (glibc aborts; reproduced with
tests/unit/test_engine.py then test_kernels.py), so there is none.
"""

from __future__ import annotations

from numba.core import types
from numba.core.registry import CPUDispatcher

__all__ = ["inner"]


class InnerDispatcher(CPUDispatcher):
    """A CPUDispatcher without Python entry, typed on non-literal arguments."""

    def __call__(self, *args, **kws):
        raise TypeError(
            f"{self.py_func.__qualname__} is compiled for compiled callers only "
            "(psvm.jit.inner): declare it with njit to call it from Python"
        )

    def get_call_template(self, args, kws):
        args = tuple(types.unliteral(a) for a in args)
        kws = {k: types.unliteral(v) for k, v in kws.items()}
        return super().get_call_template(args, kws)


def inner(func=None, **options):
    """``njit(cache=True, nogil=True, **options)`` for helpers called only from compiled code."""

    def wrap(f):
        target = dict(nopython=True, nogil=True, no_cpython_wrapper=True, no_cfunc_wrapper=True)
        dispatcher = InnerDispatcher(f, targetoptions={**target, **options})
        dispatcher.enable_caching()
        return dispatcher

    return wrap(func) if func is not None else wrap
