"""Collectives and a clock callable from numba-compiled loops.

MPI's C entry points are passed in as runtime integers (their addresses, the
communicator's and datatype's handles), never held as globals: numba will not
cache a function that reaches ctypes pointers through globals, and an
uncacheable solver loop would be recompiled at every start. Each call here is
an LLVM ``inttoptr`` and an indirect call, so the loop costs MPI's latency
and nothing more. Handles are C ints, as in MPICH's ABI (checked by
:meth:`psvm.comm.Comm.compiled`).
"""

from __future__ import annotations

import ctypes

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from psvm.jit import inner, njit

_I8P = ir.IntType(8).as_pointer()
_I32 = ir.IntType(32)


@intrinsic
def _allgather(typingctx, fn, send, count, dtype, recv, comm):
    """int MPI_Allgather(send, count, dtype, recv, count, dtype, comm) through address ``fn``."""
    sig = types.int32(types.int64, types.intp, types.int32, types.int32, types.intp, types.int32)

    def codegen(context, builder, signature, args):
        fn, send, count, dtype, recv, comm = args
        fnty = ir.FunctionType(_I32, [_I8P, _I32, _I32, _I8P, _I32, _I32, _I32])
        f = builder.inttoptr(fn, fnty.as_pointer())
        s, r = builder.inttoptr(send, _I8P), builder.inttoptr(recv, _I8P)
        return builder.call(f, [s, count, dtype, r, count, dtype, comm])

    return sig, codegen


@intrinsic
def _clock_gettime(typingctx, fn, ts):
    """int clock_gettime(CLOCK_MONOTONIC, ts) through address ``fn``."""
    sig = types.int32(types.int64, types.intp)

    def codegen(context, builder, signature, args):
        fn, ts = args
        fnty = ir.FunctionType(_I32, [_I32, _I8P])
        f = builder.inttoptr(fn, fnty.as_pointer())
        return builder.call(f, [ir.Constant(_I32, 1), builder.inttoptr(ts, _I8P)])

    return sig, codegen


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def allgather(mpi, send, recv):
    """recv[r] = rank r's ``send`` (float64; recv C-contiguous (P, send.size)); MPI's code.

    ``mpi`` is :meth:`psvm.comm.Comm.compiled`'s tuple; one process copies.
    """
    fn, handle, dtype, size = mpi
    if size == 1:
        for k in range(send.size):
            recv[0, k] = send[k]
        return 0
    return _allgather(fn, send.ctypes.data, np.int32(send.size), dtype, recv.ctypes.data, handle)


@inner(_nrt=False)
def now(clock_fn, ts):
    """Monotonic seconds (``ts``: int64[2] scratch, ``clock_fn``: :data:`CLOCK_FN`)."""
    _clock_gettime(clock_fn, ts.ctypes.data)
    return ts[0] + 1e-9 * ts[1]


CLOCK_FN = ctypes.cast(ctypes.CDLL(None).clock_gettime, ctypes.c_void_p).value
