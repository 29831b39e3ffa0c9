"""Atomic file writes: a temporary file in the same directory, fsynced, then ``os.replace``.

Readers see the old file or the whole new one, never a partial write; a failed
write leaves the destination untouched and removes its temporary file.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO


@contextmanager
def write_atomic(path: str | os.PathLike, mode: str = "w", **open_kwargs) -> Iterator[IO]:
    """Open a temporary file next to ``path``; on a clean exit it replaces ``path``.

    Parameters
    ----------
    path : str or path-like
        Destination file.
    mode : {'w', 'wb'}, default='w'
        Text or binary; ``open_kwargs`` (``encoding``, ``newline``...) go to
        :func:`os.fdopen` as to :func:`open`.

    Yields
    ------
    file : file object
        Write to it; it is flushed, fsynced and closed before the rename.

    Examples
    --------
    >>> with write_atomic("m.model", encoding="ascii", newline="\\n") as f:  # doctest: +SKIP
    ...     f.write("svm_type c_svc\\n")
    >>> with write_atomic("state.npz", "wb") as f:  # doctest: +SKIP
    ...     np.savez(f, alpha=alpha)
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    path = os.fspath(path)
    directory, name = os.path.split(os.path.abspath(path))
    tmp = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
    # O_EXCL: never clobber; mode 0o666 lets the umask decide, as for a plain open().
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, mode, **open_kwargs) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(directory)


def _fsync_dir(directory: str) -> None:
    """Make the rename durable where the OS allows it (POSIX); best effort."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
