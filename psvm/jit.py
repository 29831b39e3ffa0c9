"""psvm's numba decorators: ``njit`` (cached, lean cache loads) and ``inner``.

Warm start (#14). numba refreshes its whole target context before it loads a function from
its disk cache: it imports every registry of numba (arraymath, linalg and so on, which import
scipy.linalg, cffi and pycparser), about two thirds of a warm psvm-train's first compiled
call. A cached nopython function needs none of it, only numba's runtime (NRT) to link
against; numba's compiler refreshes the context itself before it compiles anything. So
:class:`LeanCache` loads after initialising the NRT alone, and every psvm function uses it.

Cold start. numba builds two wrappers for each compiled function, one for Python callers and
one for first-class function use, and compiles one specialisation per literal argument of a
compiled caller (``f(x, 0)`` and ``f(x, k)`` are two). psvm passes no functions to compiled
code and needs no literal copies: no psvm function gets either. A helper that only compiled
code calls needs no Python wrapper either: ``inner`` drops it.

Allocation. numba allocates an array through a helper of ``numba.np.arrayobj``, so a cached
function that allocates one loads only after that module (65-114 ms, with numba's unicode,
hashing and random implementations). The compiled functions a small training run calls
allocate nothing: their callers pass the arrays in. The parallel sums allocate their own
scratch, which LLVM then knows aliases nothing (:func:`psvm.kernels.sums._scratch`).

A Python call of an ``inner`` helper raises TypeError. Helpers that Python (tests included)
calls stay ``njit``: a second, Python-callable compilation of an ``inner`` helper in a process
that loaded the helper from numba's cache corrupted the heap (glibc aborts; reproduced with
tests/unit/test_engine.py then test_kernels.py), so there is none.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os

from numba.core import config, types
from numba.core.caching import FunctionCache
from numba.core.registry import CPUDispatcher

from psvm.object_code import initialize_runtime, lean_loads

__all__ = ["compile_first_on_one_rank", "inner", "njit"]


class LeanCache(FunctionCache):
    """numba's function cache, loading without refreshing the whole target context, and
    stale when any psvm module changed (see :func:`psvm_sources_stamp`)."""

    def __init__(self, py_func):
        super().__init__(py_func)
        stamped = getattr(self, "_cache_file", None)
        if hasattr(stamped, "_source_stamp"):  # numba's: the function's file
            stamped._source_stamp = (stamped._source_stamp, psvm_sources_stamp())

    def save_overload(self, sig, data):
        """numba's save under a lock on the cache folder: two processes adding entries to one
        index at once (psvm.precompile's parts, ranks) could lose one, or point one's key at
        the other's data file."""
        try:
            self._impl.locator.ensure_cache_path()
            lock = open(os.path.join(self._cache_path, "psvm-save.lock"), "a")
        except OSError:  # numba's own save reports an unwritable folder
            return super().save_overload(sig, data)
        with lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            super().save_overload(sig, data)

    def load_overload(self, sig, target_context):
        if not _LEAN:  # another numba: its own load
            return super().load_overload(sig, target_context)
        with self._guard_against_spurious_io_errors(), lean_loads(target_context.codegen()):
            initialize_runtime(target_context)  # what a cached nopython function links against
            return self._load_overload(sig, target_context)


# the private parts of numba's Cache that LeanCache uses (as in numba 0.68); without them it
# falls back to numba's own load
_LEAN = all(
    hasattr(FunctionCache, name) for name in ("_load_overload", "_guard_against_spurious_io_errors")
)


@functools.cache
def psvm_sources_stamp(root: str = os.path.dirname(os.path.abspath(__file__))) -> str:
    """A digest of the text of every psvm module, by its path in psvm.

    numba's own stamp covers the function's file only: ``engine.run`` inlines helpers of
    select.py and update.py and reads constants of elimination.py, and its cache kept the old
    helpers after only they changed (a ``git pull``). Text, not times (numba 0.68's own stamp
    is the file's text too): the cache that setup.py compiles into a wheel stays
    valid where pip installs the wheel, with new times."""
    digest = hashlib.sha1()
    for folder, _, files in sorted(os.walk(root)):
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                digest.update(os.path.relpath(path, root).encode() + b"\0" + f.read() + b"\0")
    return digest.hexdigest()


class LazyCache:
    """A function's :class:`LeanCache`, made when numba first uses it. Making one finds the
    cache folder, writes and deletes a probe file there and stamps the source: 0.2 ms, and a
    CLI run imports about 130 compiled functions to call about 10 of them."""

    def __init__(self, py_func):
        self._py_func, self._made = py_func, None

    def __getattr__(self, name: str):  # load_overload, save_overload, flush, cache_path, ...
        if self._made is None:
            self._made = LeanCache(self._py_func)
        return getattr(self._made, name)


class Dispatcher(CPUDispatcher):
    """numba's CPU dispatcher with :class:`LeanCache`, typed on non-literal arguments."""

    def enable_caching(self):
        self._cache = LazyCache(self.py_func)

    def get_call_template(self, args, kws):
        args = tuple(types.unliteral(a) for a in args)
        kws = {k: types.unliteral(v) for k, v in kws.items()}
        return super().get_call_template(args, kws)


class InnerDispatcher(Dispatcher):
    """A dispatcher without Python entry."""

    def __call__(self, *args, **kws):
        raise TypeError(
            f"{self.py_func.__qualname__} is compiled for compiled callers only "
            "(psvm.jit.inner): declare it with njit to call it from Python"
        )


def _decorator(cls, func, cache, options):
    def wrap(f):
        if config.DISABLE_JIT:  # NUMBA_DISABLE_JIT=1, as numba's njit: plain Python
            return f
        # no wrapper for first-class function use: psvm passes no functions to compiled code
        targetoptions = dict(nopython=True, boundscheck=None, no_cfunc_wrapper=True, **options)
        dispatcher = cls(f, targetoptions=targetoptions)
        if cache:
            dispatcher.enable_caching()
        return dispatcher

    return wrap(func) if func is not None else wrap


def njit(func=None, *, cache: bool = False, **options):
    """``numba.njit`` (no signatures, no ``locals``) whose cache loads lean (see above)."""
    return _decorator(Dispatcher, func, cache, options)


def inner(func=None, **options):
    """``njit(cache=True, nogil=True, **options)`` for helpers called only from compiled code."""
    options = dict(nogil=True, no_cpython_wrapper=True, **options)
    return _decorator(InnerDispatcher, func, True, options)


def compile_first_on_one_rank(comm, dispatcher, args: tuple) -> None:
    """Before ``dispatcher``'s first call with ``args`` (collective): if numba's cache has
    nothing for it on some rank, one rank per node compiles it while the node's others wait,
    then load it from the cache. Ranks compiling the same code at once share the cores: the
    README's first run took 15.7 s at P = 2 against 10.1 s at P = 1 (docs/performance.md)."""
    if comm.size == 1 or dispatcher in comm.first_calls or config.DISABLE_JIT:
        return
    comm.first_calls.add(dispatcher)  # the ranks of a communicator call it alike
    if not comm.max_(int(not _in_disk_cache(dispatcher))):
        return
    signature = tuple(dispatcher.typeof_pyval(a) for a in args)
    comm.leader_first(lambda: dispatcher.compile(signature))


def _in_disk_cache(dispatcher) -> bool:
    """Whether numba's disk cache holds a fresh entry of ``dispatcher`` (any signature);
    True when that cannot be told (another numba), which leaves numba's own way."""
    index = getattr(getattr(dispatcher._cache, "_cache_file", None), "_load_index", None)
    return True if index is None else bool(index())
