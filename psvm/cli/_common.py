"""What the command lines share: strict option parsing and the error/exit protocol.

A command's options are one table, ``flag -> (name, kind, help)``, that drives
both parsing (:func:`parse_options`) and the usage text (:func:`usage`). The
kind is ``int``, ``float`` or ``str`` (how the one value is parsed), or:

- ``SWITCH``: a flag without a value, ``opts[name]`` True when given, else False;
- ``WEIGHTS``: the ``-wi`` row, LIBSVM's ``-w<label> <weight>`` pairs collected
  in the dict ``opts[name]`` (argparse cannot express it).
"""

from __future__ import annotations

import difflib
import gc
import importlib.util
import json
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SWITCH = "switch"  # table kinds besides int, float and str: see the module docstring
WEIGHTS = "weights"


class UsageError(ValueError):
    """Bad command line; raised identically on every rank."""

    collective = True


class HelpRequested(UsageError):
    """``--help``, ``-h`` without a value, or either as the last word: the usage goes to
    standard output, exit 0."""

    def __init__(self):
        super().__init__("help")


class ArgumentsDifferError(ValueError):
    """The ranks were given different command lines; raised identically on every rank."""

    collective = True


_DESCRIPTOR = re.compile(r"/(dev|proc/self)/fd/\d+")  # a process's own: per rank


def agree_on_argv(
    comm, argv: list[str], per_rank: frozenset[str] = frozenset(), no_value=frozenset()
) -> None:
    """Refuse command lines that differ between ranks (collective). mpiexec's ``-n 1 cmd A :
    -n 1 cmd B`` or a wrapper script can give ranks different options; one rank would then
    refuse what another accepts, or make other collectives, and the others would wait for
    it. Each rank's own: a ``per_rank`` option (its threads) among the options whose value is
    a count, and the numbers of descriptors' names, ``/dev/fd/N``. ``no_value``: the
    command's flags without a value (:func:`switches`), to tell options from values."""
    if comm.size == 1:
        return
    pairs, positional = split_options(argv, no_value)
    own = {f for f, v in pairs if f in per_rank and v is not None and v.isdigit()}
    kept = [t for f, v in pairs if f not in own for t in (f, v) if t is not None]
    given = comm.allgather_obj([_DESCRIPTOR.sub(r"/\1/fd/N", a) for a in kept + positional])
    other = next((r for r, a in enumerate(given) if a != given[0]), None)
    if other is not None:
        import shlex
        from itertools import zip_longest

        k = next(k for k, (a, b) in enumerate(zip_longest(given[0], given[other])) if a != b)
        rest = [repr(shlex.join(g[k:])) if g[k:] else "nothing" for g in (given[other], given[0])]
        aside = "".join(f"; {f} N may differ" for f in sorted(per_rank))
        raise ArgumentsDifferError(
            f"the ranks' command lines differ from word {k + 1} on: rank {other} has {rest[0]}, "
            f"rank 0 {rest[1]}; every rank needs the same arguments{aside}"
        )


HELP = "--help"  # -h too, where no option -h takes its value (svm-train's -h is shrinking)


# svm-train's and svm-predict's line for a regressor's probability model (then sigma)
LAPLACE = (
    "Prob. model for test data: target value = predicted value + z,\n"
    "z: Laplace distribution e^(-|z|/sigma)/(2sigma),sigma"
)


def number(flag: str, text: str, kind=float):
    """Parse strictly: ``-c abc`` is an error, not LIBSVM's silent 0."""
    try:
        return kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise UsageError(f"option {flag} expects {what}, got {text!r}") from None


def usage(head: str, flags: dict) -> str:
    """``head``, then one line per table row, in table order."""
    lines = []
    for flag, (name, kind, text) in flags.items():
        what = "" if kind is SWITCH else "weight" if kind is WEIGHTS else name
        lines.append(f"{flag} {what}: {text}")
    return head + "\noptions:\n" + "\n".join(lines)


def switches(flags: dict) -> set[str]:
    """The flags of a table that take no value."""
    return {flag for flag, (_, kind, _) in flags.items() if kind is SWITCH}


def split_options(argv: list[str], no_value: set[str]) -> tuple[list[tuple[str, str | None]], list]:
    """LIBSVM's token rules: (flag, value) pairs up to the first positional, then the positionals.

    Every option takes the next token as its value, except those in ``no_value``;
    their value is None, as is that of a last option missing its value.
    """
    pairs = []
    k = 0
    while k < len(argv) and argv[k].startswith("-") and len(argv[k]) > 1:
        if argv[k] in no_value or k + 1 >= len(argv):
            pairs.append((argv[k], None))
            k += 1
        else:
            pairs.append((argv[k], argv[k + 1]))
            k += 2
    return pairs, argv[k:]


def unknown_option(
    flag: str, flags, prog: str, advice: dict | None = None, context: str = ""
) -> UsageError:
    """``unknown option -x``, then what to use instead: ``advice[flag]``, the closest of
    ``flags``, or the pointer to the usage."""
    hint = (advice or {}).get(flag)
    if hint is None:
        names = [f for f in flags if f != "-wi"]
        close = [f for f in names if len(flag) > 2 and f.startswith(flag)]  # an abbreviation
        close = close or difflib.get_close_matches(flag, names, n=1, cutoff=0.7)
        hint = f"did you mean {close[0]}?" if close else f"{prog} --help lists the options"
    return UsageError(f"unknown option {flag}{context}: {hint}")


def parse_options(
    argv: list[str],
    flags: dict,
    *,
    context: str = "",
    prog: str = "psvm-train",
    advice: dict | None = None,
) -> tuple[dict, list]:
    """Strict parsing by a flag table: (values by name, positionals); errors in argv order.

    ``--help`` anywhere among the options, ``-h`` without a value (or where the table has
    no ``-h``), or either as the last word (``psvm-train data -h``: svm-train would name its
    model ``-h``) raises :class:`HelpRequested` first. An unknown option says what to
    use instead (:func:`unknown_option`, with ``advice``: flag -> hint); ``context`` ends
    its flag (``unknown option -v for --solver sgd: ...``).
    """
    opts: dict = {name: False for name, kind, _ in flags.values() if kind is SWITCH}
    weights = next((name for name, kind, _ in flags.values() if kind is WEIGHTS), None)
    if weights is not None:
        opts[weights] = {}
    help_flags = {HELP} | ({"-h"} if "-h" not in flags else set())
    pairs, rest = split_options(argv, switches(flags) | help_flags)
    last = argv[-1:] in ([HELP], ["-h"])
    if last or any(f in help_flags or (f == "-h" and v is None) for f, v in pairs):
        raise HelpRequested()
    for flag, value in pairs:
        name, kind, _ = flags.get(flag, (None, None, None))
        if kind is SWITCH:
            opts[name] = True
        elif value is None:
            raise UsageError(f"option {flag} needs a value")
        elif kind in (None, WEIGHTS) and weights and flag.startswith("-w") and len(flag) > 2:
            label = number(flag, flag[2:])  # repeated: the weights multiply, as in LIBSVM
            if not label.is_integer():  # (svm-train's atoi would weight class 1 for -w1.5)
                raise UsageError(f"option {flag}: class labels are integers, got {flag[2:]!r}")
            opts[weights][label] = opts[weights].get(label, 1.0) * number(flag, value)
        elif kind in (int, float):
            opts[name] = number(flag, value, kind)
        elif kind is str:
            opts[name] = value
        else:
            raise unknown_option(flag, flags, prog, advice, context)
    return opts, rest


def parse_train_args(
    argv: list[str], flags: dict, *, context: str = "", advice: dict | None = None
) -> dict:
    """Options by ``flags``, then ``training_set_file [model_file]`` as LIBSVM's svm-train."""
    opts, rest = parse_options(argv, flags, context=context, advice=advice)
    if len(rest) not in (1, 2):
        raise UsageError("expected training_set_file [model_file]" + late_options(rest))
    opts["train"] = rest[0]
    opts["model"] = rest[1] if len(rest) == 2 else default_model_name(rest[0])
    return opts


def late_options(files: list[str]) -> str:
    """A hint when what follows the first file name looks like an option."""
    late = next((a for a in files[1:] if a.startswith("-") and len(a) > 1), None)
    return "" if late is None else f" (options go before the file names: {late!r} came after)"


def default_model_name(train: str) -> str:
    """svm-train's default, the base name plus ``.model``; ``NAME.xz`` gives ``NAME.model`` too."""
    from psvm.io.libsvm_format import COMPRESSED  # (what the reader decompresses)

    base = os.path.basename(train)
    stem, suffix = os.path.splitext(base)
    return (stem if suffix.lower() in COMPRESSED and stem else base) + ".model"


@contextmanager
def flag_named(flags: dict) -> Iterator[None]:
    """Parameter errors from validation also name the flag typed: ``option -d: degree must ...``.

    Validation names the parameter first in every message (``degree must be >= 0``).
    """
    from psvm._params import ParameterError

    try:
        yield
    except ParameterError as e:
        name = re.match(r"\w*", str(e)).group()
        flag = next(
            (f for f, (n, kind, _) in flags.items() if n == name and kind is not WEIGHTS), None
        )
        label = re.match(r"class_weight\[(.*?)\]", str(e))  # a -wi weight: its flag, -w1
        if label is not None and any(kind is WEIGHTS for _, kind, _ in flags.values()):
            flag = f"-w{float(label.group(1)):g}"
        if flag is None:
            raise
        raise ParameterError(f"option {flag}: {e}") from None


def apply_cli_threads(comm, opts: dict, prog: str) -> int:
    """``-o``: set this rank's numba threads and return the count, with a warning on rank 0
    (even under -q, as svm-train's warnings) when they will not run as asked: more than
    numba's pool, or more threads than the node's cores."""
    from psvm.threads import apply_threads, thread_warning

    # (the ranks' -o values differ only as valid counts: agree_on_argv compared the rest)
    warning = thread_warning(opts.get("n_threads"), comm, "-o")
    if warning is not None and comm.rank == 0:
        print(f"{prog}: warning: {warning}", file=sys.stderr, flush=True)
    return apply_threads(opts.get("n_threads"), comm, name="-o")


def warn_unknown_weights(comm, class_weight: dict, classes) -> None:
    """LIBSVM's ``WARNING: class label i specified in weight is not found``, for each such -wi.

    Printed by rank 0 to stderr even under -q, as svm-train does; training goes on.
    """
    from psvm._params import unknown_weight_labels

    if comm.rank == 0:
        for message in unknown_weight_labels(class_weight, [float(c) for c in classes]):
            print(f"WARNING: {message}", file=sys.stderr, flush=True)


def run_main(
    prog: str,
    usage: str,
    body: Callable[[list[str]], int],
    argv,
    argv_rules: tuple[frozenset, frozenset] = (frozenset(), frozenset()),
) -> int:
    """Run ``body`` under the exit protocol shared by every rank (:func:`_protocol`).
    ``argv_rules``: the command's options a rank may set for itself and its options without
    a value, for comparing the ranks' command lines (:func:`agree_on_argv`).

    Without ``argv`` this is a console run: the process ends here, without the interpreter's
    teardown (:func:`psvm.comm.process.end_process`).
    """
    if argv is not None:
        return _protocol(prog, usage, body, list(argv), argv_rules=argv_rules)
    try:  # the descriptors it was started with, before MPI opens its own (and MPICH's PMI socket)
        fds = frozenset(fd for fd in map(int, os.listdir("/dev/fd")) if _is_open(fd)) - {
            int(os.getenv("PMI_FD", -1))
        }
    except (OSError, ValueError):
        fds = None
    from psvm.threads import share_blas_threads

    share_blas_threads()  # before numpy loads (psvm.comm imports it)
    from psvm.comm import process
    from psvm.comm.process import (
        LastingStream,
        end_process,
        keep_freed_memory,
        skip_network_memory_hooks,
    )

    skip_network_memory_hooks()  # (the process is psvm's: its environment too)
    keep_freed_memory()  # (and its memory)
    process.WATCH_SIGTERM = True  # (and its signals: SIGTERM stops it as Ctrl-C does)
    reopen_closed_streams()
    sys.stdout, sys.stderr = LastingStream(sys.stdout), LastingStream(sys.stderr)
    gc.set_threshold(10_000, 50, 50)  # numba's and scipy's imports allocate much, free little
    defer_numpy_modules()
    end_process(_protocol(prog, usage, body, sys.argv[1:], fds, argv_rules))


def _is_open(fd: int) -> bool:
    """Whether ``fd`` is open: /dev/fd also lists the descriptor of its own listing, the
    lowest free one (1 under ``>&-``), closed once the listing returns."""
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def reopen_closed_streams() -> None:
    """Point standard output and error that the process was started without (``>&-``; Python
    then has ``sys.stdout`` None) at /dev/null: what is printed goes nowhere and the run
    succeeds, as svm-train's does, and no file the run opens takes their descriptor."""
    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        if _is_open(fd):  # open after all (a library took it): left alone
            setattr(sys, name, open(os.devnull, "w"))
            continue
        null = os.open(os.devnull, os.O_WRONLY)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        setattr(sys, name, open(fd, "w", closefd=False))


# numpy's submodules that scipy's copy of array-api-compat loads and nothing in a CLI run uses
# (numpy.ma, numpy.random and numpy.polynomial: numba's typeof and scipy use them)
DEFERRED_NUMPY = ("numpy.f2py", "numpy.testing")


def defer_numpy_modules() -> None:
    """Make :data:`DEFERRED_NUMPY` lazy modules (``importlib.util.LazyLoader``), loaded at
    their first use.

    ``import scipy.sparse`` clones numpy's namespace (its vendored array-api-compat) and so
    imports numpy's lazy submodules: these two cost 70-80 ms of each CLI run
    (docs/performance.md). A lazy module is numpy's attribute too, as an import would make
    it, so numpy's own ``__getattr__`` does not import it.
    """
    import numpy

    for name in DEFERRED_NUMPY:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            continue
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        setattr(numpy, name.rpartition(".")[2], module)


def _protocol(
    prog: str,
    usage: str,
    body: Callable[[list[str]], int],
    argv: list[str],
    fds: frozenset[int] | None = None,
    argv_rules: tuple[frozenset, frozenset] = (frozenset(), frozenset()),
) -> int:
    """``body(argv)``'s exit code, or the code of its error, reported once.

    Errors that every rank raises alike (bad options, parameters, input agreed
    through ``Comm.agree``) print once on rank 0 and exit 1 on every rank.
    Anything else is a bug or a failure on one rank: under ``mpiexec``,
    ``Comm.guard`` reports it once and ends the whole job, so that no rank waits
    forever in a collective; Ctrl-C prints ``PROG: interrupted`` and exits 130 (SIGTERM, in a
    console run: ``PROG: terminated`` and 143, after the kernel solver saved its checkpoint).
    ``fds``: the descriptors the process started with, which output and input paths may
    name (:func:`psvm.io.atomic.inherit_descriptors`; None: any).
    """
    from psvm.comm import world

    comm = None
    try:
        comm = world()
        with comm.guard(prog):
            if fds is not None:
                from psvm.io.atomic import inherit_descriptors

                inherit_descriptors(fds)
            agree_on_argv(comm, argv, *argv_rules)
            return body(argv)
    except HelpRequested:
        if comm.rank == 0:
            print(usage)
        return 0
    except UsageError as e:
        if comm.rank == 0:  # the usage, then the error where the eye lands: last
            print(f"{usage}\n\n{prog}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as e:  # one process, or before the guard; it ends a job of several
        from psvm.comm.process import stop_line, stop_status

        if comm is None or comm.rank == 0:
            print(stop_line(prog, e), file=sys.stderr)
        return stop_status(e)
    except Exception as e:
        if not getattr(e, "collective", False):  # one process: a bug or a local failure
            print(f"{prog}: unexpected error", file=sys.stderr)
            traceback.print_exc()
            return 1
        if comm.rank == 0:
            print(f"{prog}: error: {_message(e)}", file=sys.stderr)
        return 1


def _message(e: Exception) -> str:
    """An error's line: a file that cannot be opened as svm-train says it, by name."""
    if isinstance(e, OSError) and e.filename is not None and e.strerror:
        return f"cannot open {os.fspath(e.filename)!r}: {e.strerror}"
    return str(e)


def libsvm_class_order(labels):
    """The classes in LIBSVM's order: first appearance, but +1 before -1 for a -1/+1
    problem (``labels``: in order of first appearance)."""
    import numpy as np

    labels = list(labels)
    if len(labels) == 2 and set(labels) == {1.0, -1.0}:
        labels = [1.0, -1.0]
    return np.array(labels)


@contextmanager
def last_output(path: str) -> Iterator[None]:
    """Rank 0's last files (the model, ``--stats``, the predictions): an error writing one
    (a full disk, a file size limit) is one line and exit 1, as a bad option. No other rank
    waits for rank 0 then but in the guard's closing, which rank 0 makes as it leaves."""
    from psvm.io.atomic import OutputPathError

    try:
        yield
    except OSError as e:
        error = OutputPathError(f"cannot write {os.fspath(path)!r}: {e.strerror or e}")
        error.collective = True  # (see above: reported once, no abort)
        raise error from None


def write_json(path: str, obj: dict) -> None:
    """The run statistics file, written atomically."""
    from psvm.io.atomic import write_atomic

    with write_atomic(path) as f:
        json.dump(obj, f, indent=1)
