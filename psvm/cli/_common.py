"""What both command lines share: strict option parsing and the error/exit protocol."""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable


class UsageError(ValueError):
    """Bad command line; raised identically on every rank."""

    collective = True


def number(flag: str, text: str, kind=float):
    """Parse strictly: ``-c abc`` is an error, not LIBSVM's silent 0."""
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise UsageError(f"option {flag} expects {what}, got {text!r}") from None


def run_main(prog: str, usage: str, body: Callable[[list[str]], int], argv) -> int:
    """Run ``body`` under the exit protocol shared by every rank.

    Errors that every rank raises alike (bad options, parameters, input agreed
    through ``Comm.agree``) print once on rank 0 and exit 1 on every rank.
    Anything else is a bug or a failure on one rank: print it and abort the
    whole job, so that no rank waits forever in a collective.
    """
    from psvm.comm import world

    comm = world()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return body(argv)
    except UsageError as e:
        if comm.rank == 0:
            print(f"{prog}: {e}\n\n{usage}", file=sys.stderr)
        return 1
    except Exception as e:
        if not getattr(e, "collective", False):
            _abort(prog, comm)
        if comm.rank == 0:
            print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        _abort(prog, comm, 130)
    return 1


def _abort(prog: str, comm, code: int = 1) -> None:
    print(f"{prog}: rank {comm.rank}: unexpected error", file=sys.stderr)
    traceback.print_exc()
    sys.stderr.flush()
    comm.abort(code)
