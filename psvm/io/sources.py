"""Where a rank's lines of a LIBSVM file come from: a byte range of the file (compressed
files decompressed once per node), or, for a stream (a pipe, /dev/stdin, a descriptor's
path), the lines rank 0 reads and deals out. Errors are agreed, so every rank raises alike."""

from __future__ import annotations

import errno
import io
import os
import stat
from typing import TYPE_CHECKING

import numpy as np

from psvm.io.atomic import descriptor, descriptor_error
from psvm.io.libsvm_format import (
    LibsvmFormatError,
    _line_start_at_or_after,
    split_byte_ranges,
    uncompressed_path,
)

if TYPE_CHECKING:
    from psvm.comm import Comm


def open_source(comm: Comm, path: str) -> tuple[str, bool]:
    """(the file to read, whether it is a stream), ``path`` checked readable (collective)."""
    # a pipe or /dev/stdin: only rank 0 reads it (mpiexec gives stdin to rank 0 alone)
    # (a descriptor's path names another file in each process: rank 0's is read, as a stream)
    stream = comm.bcast_obj(comm.rank == 0 and (is_stream(path) or descriptor(path) is not None))
    comm.agree(check_readable(path) if comm.rank == 0 or not stream else None)
    return (path if stream else decompress_once_per_node(comm, path)), stream


def is_stream(path: str) -> bool:
    """Whether ``path`` is read as a stream (a pipe, a terminal, another device): no size,
    no seeking."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False  # (:func:`check_readable` says why)
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def stream_block(comm: Comm, path: str) -> bytes:
    """This rank's lines of a stream: rank 0 reads it whole and deals it out in byte ranges
    that start lines, as :func:`~psvm.io.libsvm_format.split_byte_ranges` and
    :func:`~psvm.io.libsvm_format.read_byte_range` split a file (collective)."""
    data, err = b"", None
    if comm.rank == 0:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            err = e
    comm.agree(err)
    counts = np.zeros(comm.size, dtype=np.int64)
    if comm.rank == 0:
        f, size = io.BytesIO(data), len(data)
        ranges = split_byte_ranges(size, comm.size)
        counts = np.diff([*(_line_start_at_or_after(f, s, size) for s, _ in ranges), size])
    return comm.alltoallv(np.frombuffer(data, dtype=np.uint8), counts).tobytes()


def check_readable(path: str) -> OSError | None:
    """The error every rank should raise if ``path`` cannot be read, else None."""
    if not os.path.exists(path):
        return FileNotFoundError(2, "No such file or directory", path)
    reason = descriptor_error(path)  # (one of MPI's, say)
    if reason is not None:
        return OSError(errno.EBADF, reason, path)
    if os.path.isdir(path):
        return IsADirectoryError(21, "Is a directory", path)
    if not os.access(path, os.R_OK):
        return PermissionError(13, "Permission denied", path)
    return None


def decompress_once_per_node(comm: Comm, path: str) -> str:
    """Node leaders fill the cache; the agree doubles as the barrier."""
    err = None
    if comm.node_leader():
        try:
            uncompressed_path(path)
        except (LibsvmFormatError, OSError) as e:
            err = e
    comm.agree(err)
    return uncompressed_path(path)
