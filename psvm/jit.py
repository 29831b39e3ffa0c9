"""``inner``: numba's njit for helpers that only compiled code calls.

The first run after install compiles every helper of the engine (#14). numba builds two
wrappers for each compiled function, one for Python callers and one for first-class
function use, and compiles one specialisation per literal argument (``f(x, 0)`` and
``f(x, k)`` are two). A helper that only compiled code calls needs neither wrapper nor the
literal copies: ``inner`` drops them, which cuts the README job's cold compile by about a
quarter (docs/design.md). A call from Python (tests do it) compiles a separate, uncached
twin with the wrappers, once per process; ``PSVM_JIT_TWIN_LOG=FILE`` appends each such
helper and its caller to FILE, to find production callers that should use ``njit`` instead.
"""

from __future__ import annotations

import os
import sys

from numba import njit
from numba.core import types
from numba.core.registry import CPUDispatcher

__all__ = ["inner"]

_NO_WRAPPERS = dict(no_cpython_wrapper=True, no_cfunc_wrapper=True)
_SKIP = {"nopython", *_NO_WRAPPERS}  # njit sets nopython itself


class InnerDispatcher(CPUDispatcher):
    """A CPUDispatcher without Python entry, typed on non-literal arguments."""

    _twin = None

    def __call__(self, *args, **kws):
        if self._twin is None:
            log = os.environ.get("PSVM_JIT_TWIN_LOG")
            if log:
                caller = sys._getframe(1).f_code
                with open(log, "a") as f:
                    print(
                        self.py_func.__module__,
                        self.py_func.__qualname__,
                        caller.co_filename,
                        caller.co_name,
                        file=f,
                    )
            options = {k: v for k, v in self.targetoptions.items() if k not in _SKIP}
            self._twin = njit(**options)(self.py_func)  # not cached: it shares inner's cache key
        return self._twin(*args, **kws)

    def get_call_template(self, args, kws):
        args = tuple(types.unliteral(a) for a in args)
        kws = {k: types.unliteral(v) for k, v in kws.items()}
        return super().get_call_template(args, kws)


def inner(func=None, **options):
    """``njit(cache=True, nogil=True, **options)`` for helpers called only from compiled code."""

    def wrap(f):
        target = dict(nopython=True, nogil=True, **_NO_WRAPPERS, **options)
        dispatcher = InnerDispatcher(f, targetoptions=target)
        dispatcher.enable_caching()
        return dispatcher

    return wrap(func) if func is not None else wrap
