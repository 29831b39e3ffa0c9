"""Atomic file writes: a temporary file in the same directory, fsynced, then ``os.replace``.

Readers see the old file or the whole new one, never a partial write; a failed
write leaves the destination untouched and removes its temporary file.
:func:`agree_writable` finds an output that cannot be written before any work
is done, rather than after a whole training.

Only a regular file is replaced: a symbolic link's target is (the link stays),
with its permission bits, and an existing path that is not a regular file
(``/dev/null``, a named pipe) is written in place, as LIBSVM's commands write every
path. A path that names one of the process's open descriptors (``/dev/stdout``,
``/dev/fd/N``) is written through that descriptor, at its position (after what a shell's
``>`` or ``>>`` put there): the file a shell sent stdout to is neither replaced nor
truncated.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO


class OutputPathError(OSError):
    """An output file cannot be written; the message names it and says why, in one line."""


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
        Write to it; it is flushed, fsynced and closed before the rename (a path naming a
        descriptor of this process is written through it, without either).

    Examples
    --------
    >>> with write_atomic("m.model", encoding="ascii", newline="\\n") as f:  # doctest: +SKIP
    ...     f.write("svm_type c_svc\\n")
    >>> with write_atomic("state.npz", "wb") as f:  # doctest: +SKIP
    ...     np.savez(f, alpha=alpha)
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    fd = descriptor(path)
    if fd is not None:  # what Python buffered for it goes first
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
        f = os.fdopen(os.dup(fd), mode, **open_kwargs)
        try:
            yield f
            f.flush()
        except BrokenPipeError:  # the reader left (``| head``): the rest is not wanted
            pass
        finally:
            try:
                f.close()
            except BrokenPipeError:
                pass
        return
    path, st = _target(path)
    if st is not None and not stat.S_ISREG(st.st_mode):  # a device or a pipe: no file to swap
        with open(path, mode, **open_kwargs) as f:
            yield f
        return
    directory, name = os.path.split(path)
    tmp = _temporary(directory, name)
    # O_EXCL: never clobber; mode 0o666 lets the umask decide, as for a plain open().
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as e:  # (named as open(path) would: the temporary name means nothing)
        raise type(e)(e.errno, e.strerror, path) from None
    try:
        if st is not None:  # the file it replaces keeps its permissions
            os.chmod(fd, stat.S_IMODE(st.st_mode))
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


def _temporary(directory: str, name: str) -> str:
    """A new temporary file's path for ``name`` in ``directory`` (:func:`remove_leftovers`
    knows the form)."""
    return os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")


def remove_leftovers(path: str | os.PathLike) -> None:
    """Remove the temporary files that :func:`write_atomic` left next to ``path`` when its
    process was killed (SIGKILL: nothing runs to remove them); for a file that one run owns,
    as a checkpoint, before its first write."""
    directory, name = os.path.split(os.fspath(path))
    pattern = re.compile(rf"\.{re.escape(name)}\.[0-9a-f]{{12}}\.tmp")  # (_temporary's)
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return
    for other in names:
        if pattern.fullmatch(other):
            try:
                os.unlink(os.path.join(directory, other))
            except OSError:
                pass


def writable_error(path: str | os.PathLike, what: str = "output file") -> OutputPathError | None:
    """Why :func:`write_atomic` could not write ``path`` now, else None.

    Creates and removes the temporary file it would use, so a read-only or
    full file system, missing permissions, a missing folder and a path that is
    a folder are all found.
    """
    path = os.fspath(path)
    fd = descriptor(path)
    real, st = _target(path)
    directory, name = os.path.split(real)
    reason = None
    if fd is not None:
        try:
            reason = descriptor_error(path)
            if reason is None and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
                reason = "its descriptor is open for reading only"
        except OSError as e:
            reason = e.strerror or str(e)
    elif st is not None and stat.S_ISDIR(st.st_mode):
        reason = "it is a folder"
    elif st is not None and not stat.S_ISREG(st.st_mode):  # written in place
        if not os.access(real, os.W_OK):
            reason = os.strerror(errno.EACCES)
    elif not os.path.isdir(directory):
        reason = f"folder {directory!r} does not exist"
    else:
        tmp = _temporary(directory, name)
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            os.unlink(tmp)
        except OSError as e:  # (procfs: ENOENT; a folder without write permission: EACCES)
            reason = (
                f"its folder {directory!r} takes no new file ({e.strerror or e}); psvm "
                "writes a new file there and renames it over the output"
            )
            if e.errno == errno.ENAMETOOLONG:  # (the temporary name is 21 characters longer)
                reason = f"its name is too long for psvm's temporary file beside it ({e.strerror})"
    return None if reason is None else OutputPathError(f"cannot write {what} {path!r}: {reason}")


def agree_writable(comm, outputs: dict, inputs: dict | None = None) -> None:
    """Raise on every rank if rank 0, which writes them, cannot write one of ``outputs``.

    ``outputs`` maps a description (``"the model file"``) to a path or None; two that name
    one file are refused, and so is one that names a file of ``inputs`` (alike), which it
    would replace (``psvm-train f f``). Collective: one agreement (nothing with one process).
    """
    error, files = None, {}
    if comm.rank == 0:
        for what, path in (inputs or {}).items():
            key = None if path is None else _file_key(path)
            if isinstance(key, tuple):  # an existing regular file
                files.setdefault(key, what)
        for what, path in outputs.items():
            if path is None or error is not None:
                continue
            error = writable_error(path, what)
            key = _file_key(path)
            if key is not None and key in files:  # the later write would replace the first
                reason = f"it is {files[key]} too"
                error = OutputPathError(f"cannot write {what} {os.fspath(path)!r}: {reason}")
            if key is not None:
                files.setdefault(key, what)
    comm.agree(error)


def _file_key(path) -> tuple | str | None:
    """What names the file a write to ``path`` lands in: an existing regular file's device
    and inode (links, hard links and descriptors alike), a new file's real path; None for
    a device or pipe, which several outputs may share (``/dev/null``)."""
    fd = descriptor(path)
    try:
        st = os.fstat(fd) if fd is not None else os.stat(path)
    except OSError:
        return None if fd is not None else _target(path)[0]
    return (st.st_dev, st.st_ino) if stat.S_ISREG(st.st_mode) else None


_STD_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
# the descriptors a command was started with (:func:`inherit_descriptors`); None: any
_inherited: frozenset[int] | None = None


def inherit_descriptors(fds: frozenset[int] | None) -> None:
    """The descriptors a command was started with (None: any): a path may name only these
    (``/dev/fd/5`` for a shell's ``5>``), not one MPI opened (a socket, shared memory)."""
    global _inherited
    _inherited = fds


def descriptor_error(path: str | os.PathLike) -> str | None:
    """Why ``path``, naming a descriptor, is none of those a command was started with."""
    fd = descriptor(path)
    if fd is None or _inherited is None or fd in _inherited:
        return None
    return f"descriptor {fd} was not open when the command started"


def descriptor(path: str | os.PathLike) -> int | None:
    """The descriptor of this process that ``path`` names (``/dev/stdout``, ``/dev/fd/N``,
    ``/proc/self/fd/N``), else None. Opened by name, such a path would reach the file
    behind the descriptor: replaced, the shell's redirection would write to a deleted file."""
    path = os.path.abspath(os.fspath(path))
    if path in _STD_STREAMS:
        return _STD_STREAMS[path]
    folder, _, n = path.rpartition("/")
    own = ("/dev/fd", "/proc/self/fd", f"/proc/{os.getpid()}/fd")
    return int(n) if n.isdigit() and folder in own else None


def _target(path: str | os.PathLike) -> tuple[str, os.stat_result | None]:
    """Where a write to ``path`` goes, and its status (None: no file there yet): a file's
    real path (a symbolic link's target); a device or pipe's own path (``/dev/stdout``
    leads to ``pipe:[...]``, which no path names)."""
    path = os.path.abspath(os.fspath(path))
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is None or stat.S_ISREG(st.st_mode):
        path = os.path.realpath(path)
    return path, st


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
