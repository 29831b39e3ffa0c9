"""What the benchmark scripts and the heuristics study share.

The data-set table (file names in ``../shared/data``, C, gamma, n_features),
head-of-file subsets in psvm's decompression cache (never in the repository),
the launch of :mod:`heuristics.worker` under ``mpiexec -n P``, LIBSVM's commands
(:func:`libsvm_tool`), the scikit-learn SVC reference, the dual objective of a fitted
model and the machine description printed with every result. Used by
``psvm-report heuristics`` (:mod:`heuristics.study`), ``benchmarks/run_all.py`` and
``benchmarks/bench_svc.py``.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def _checkout() -> Path | None:
    """The repository this package runs from; None when installed from a wheel."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() and (root / "psvm").is_dir() else None


CHECKOUT = _checkout()


class DataNotFoundError(FileNotFoundError):
    """No folder of data sets: the message names ``$PSVM_SHARED_DATA`` and the folders tried."""


@dataclass(frozen=True)
class Dataset:
    """A LIBSVM benchmark set: files in the shared data directory and its SVM parameters."""

    name: str
    train: str
    test: str | None  # None: accuracy is measured on the training rows
    C: float
    gamma: float
    n_features: int


DATASETS = {
    d.name: d
    for d in (
        Dataset("a9a", "a9a.xz", "a9a.t.xz", 1.0, 0.05, 123),
        Dataset("w8a", "w8a.xz", "w8a.t.xz", 1.0, 0.05, 300),
        Dataset("ijcnn1", "ijcnn1.xz", "ijcnn1.t.xz", 1.0, 1.0, 22),
        Dataset("skin_nonskin", "skin_nonskin.xz", None, 1.0, 1e-3, 3),
        Dataset("mushrooms", "mushrooms.xz", None, 1.0, 0.05, 112),
        Dataset("heart_scale", "heart_scale.xz", None, 1.0, 0.05, 13),
        Dataset("usps.t", "usps.t.xz", None, 1.0, 1 / 256, 256),  # 10 classes; svm-train's gamma
    )
}


def data_dir() -> Path:
    """The folder of the data sets (``NAME.xz``): ``$PSVM_SHARED_DATA`` when set, else
    ``../shared/data`` from the current directory, else next to the checkout running this.

    An installed package has no repository to start from, hence the current directory.
    """
    env = os.environ.get("PSVM_SHARED_DATA")
    if env:
        if Path(env).is_dir():
            return Path(env)
        raise DataNotFoundError(
            f"data sets not found: $PSVM_SHARED_DATA={env} is not a folder; point it at the "
            "data sets, or unset it to use ../shared/data"
        )
    tried = [Path.cwd().parent / "shared" / "data"]
    if CHECKOUT is not None and CHECKOUT.parent / "shared" / "data" not in tried:
        tried.append(CHECKOUT.parent / "shared" / "data")
    for path in tried:
        if path.is_dir():
            return path
    raise DataNotFoundError(
        "data sets not found: set $PSVM_SHARED_DATA to their folder, or run from a folder "
        f"with ../shared/data (tried {', '.join(map(str, tried))})"
    )


def head_path(src: str | Path, rows: int | None) -> str:
    """A plain-text path holding the first ``rows`` lines of ``src`` (all if None).

    Subsets live in psvm's cache (``$PSVM_CACHE_DIR``, :func:`_subset_path`), so they are
    made once per version of the file and never enter the repository or a user's folder.
    """
    from psvm.io.libsvm_format import uncompressed_path

    plain = uncompressed_path(str(src))
    if rows is None:
        return plain
    target = _subset_path(plain, f"head{rows}")
    if not os.path.exists(target):
        tmp = f"{target}.tmp{os.getpid()}"
        with open(plain, "rb") as f, open(tmp, "wb") as out:
            for k, line in enumerate(f):
                if k >= rows:
                    break
                out.write(line)
        os.replace(tmp, target)
    return target


def _subset_path(plain: str, suffix: str) -> str:
    """The cache's name for a subset of the plain-text file ``plain``: beside a decompressed
    copy (named by its source's path, size and time), else keyed the same way by ``plain``'s
    own, so that a user's folder gets no file and an edited file no stale subset."""
    from psvm.io.libsvm_format import cache_dir, version_key

    cache = cache_dir()
    if os.path.dirname(os.path.abspath(plain)) == os.path.abspath(cache):
        return f"{plain}.{suffix}"
    os.makedirs(cache, exist_ok=True)
    return os.path.join(cache, f"{os.path.basename(plain)}.{version_key(plain)}.{suffix}")


def sample_path(src: str | Path, rows: int | None, seed: int = 0) -> str:
    """A plain-text path holding ``rows`` lines of ``src`` drawn per class in proportion
    (stratified, with ``seed``; file order kept), or the whole file if None.

    The first N lines of a file sorted by class would hold one class only. Made once per
    version of the file, in psvm's cache, like :func:`head_path`.
    """
    from psvm.io.libsvm_format import uncompressed_path

    plain = uncompressed_path(str(src))
    if rows is None:
        return plain
    target = _subset_path(plain, f"strat{rows}-{seed}")
    if not os.path.exists(target):
        with open(plain, "rb") as f:
            lines = [ln for ln in f if ln.strip() and not ln.lstrip().startswith(b"#")]
        labels = np.array([ln.split(None, 1)[0] for ln in lines])
        rng = np.random.default_rng(seed)
        keep = []
        for label in np.unique(labels):
            where = np.flatnonzero(labels == label)
            k = max(1, round(min(rows, len(lines)) * where.size / len(lines)))
            keep.append(rng.choice(where, size=min(k, where.size), replace=False))
        tmp = f"{target}.tmp{os.getpid()}"
        with open(tmp, "wb") as out:
            out.writelines(lines[i] for i in np.sort(np.concatenate(keep)))
        os.replace(tmp, target)
    return target


def user_dataset(path: str | Path) -> Dataset:
    """A LIBSVM file of the user's as a data set: C = 1 and LIBSVM's gamma, 1/n_features."""
    return _user_dataset(str(Path(path).resolve()))


@functools.cache
def _user_dataset(resolved: str) -> Dataset:
    """Read once per process: psvm-report checks its --data, then the study uses them."""
    from sklearn.utils.multiclass import type_of_target

    from psvm.io.libsvm_format import read_libsvm

    path = Path(resolved)
    X, y = read_libsvm(resolved)
    kind = type_of_target(y)
    if kind not in ("binary", "multiclass"):  # scikit-learn's SVC is the reference
        raise ValueError(
            f"{resolved}: labels are {kind}, not classes (a regression file?): "
            "the study compares classifiers"
        )
    if np.unique(y).size < 2:
        raise ValueError(f"{resolved}: one class only ({y[0]:g}); a classifier needs two")
    name = path.name.split(".")[0] or path.name
    return Dataset(name, str(path), None, 1.0, 1.0 / max(X.shape[1], 1), X.shape[1])


def resolve_dataset(entry: str) -> Dataset:
    """A built-in data set by name (:data:`DATASETS`), else a LIBSVM file by path."""
    if entry in DATASETS:
        return DATASETS[entry]
    if os.path.isfile(entry):
        return user_dataset(entry)
    raise ValueError(f"{entry!r} is neither a known data set {sorted(DATASETS)} nor a file")


def dataset_paths(
    ds: Dataset, rows: int | None, test_rows: int | None, seed: int | None = None
) -> tuple[str, str]:
    """Train and test files (test: the training subset when the set has no split): the first
    ``rows`` / ``test_rows`` lines, or stratified samples of that many with ``seed``."""

    def subset(src, n):
        return head_path(src, n) if seed is None else sample_path(src, n, seed)

    def where(file):  # a user's file has an absolute path; built-in ones live in data_dir()
        return Path(file) if os.path.isabs(file) else data_dir() / file

    train = subset(where(ds.train), rows)
    test = subset(where(ds.test), test_rows) if ds.test else train
    return train, test


def count_lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def load_csr(path: str, n_features: int | None):
    """A LIBSVM file as CSR with 32-bit indices (scikit-learn's SVC refuses 64-bit ones)."""
    import scipy.sparse as sp
    from sklearn.datasets import load_svmlight_file

    X, y = load_svmlight_file(path, n_features=n_features, zero_based=False)
    X = sp.csr_matrix((X.data, X.indices.astype(np.int32), X.indptr.astype(np.int32)), X.shape)
    return X, y


def dual_objective(SV, coef, gamma: float, block: int = 512) -> float:
    """1/2 c'Kc - sum|c| of a binary RBF model (c = y_t alpha_t), by row blocks of K."""
    from sklearn.metrics.pairwise import rbf_kernel

    c = np.asarray(coef.toarray() if hasattr(coef, "toarray") else coef, dtype=np.float64).ravel()
    quad = 0.0
    for s in range(0, c.size, block):
        quad += c[s : s + block] @ (rbf_kernel(SV[s : s + block], SV, gamma=gamma) @ c)
    return float(0.5 * quad - np.abs(c).sum())


def sklearn_svc_fit(X, y, Xt, yt, ds: Dataset, *, shrinking: bool, tol: float, cache: float):
    """Fit scikit-learn's SVC (LIBSVM inside); wall and CPU times cover ``fit`` only."""
    from sklearn.svm import SVC

    clf = SVC(C=ds.C, gamma=ds.gamma, tol=tol, cache_size=cache, shrinking=shrinking)
    c, t = time.process_time(), time.perf_counter()
    clf.fit(X, y)
    seconds, cpu = time.perf_counter() - t, time.process_time() - c
    binary = len(clf.classes_) == 2
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "accuracy": float(np.mean(clf.predict(Xt) == yt)),
        "n_support": int(clf.n_support_.sum()),
        "n_iter": int(np.sum(clf.n_iter_)),
        "objective": dual_objective(clf.support_vectors_, clf.dual_coef_, ds.gamma)
        if binary
        else None,
        "command": f"sklearn.svm.SVC(C={ds.C:g}, gamma={ds.gamma:g}, tol={tol:g}, "
        f"cache_size={cache:g}, shrinking={shrinking}).fit(X, y)",
    }


def tool(name: str, hint: str) -> str:
    """The command ``name`` next to this Python (what pip installed), else on PATH."""
    found = shutil.which(name, path=os.path.dirname(sys.executable)) or shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} not found: {hint}")
    return found


def mpiexec() -> str:
    """The mpiexec of the mpich wheel."""
    return tool("mpiexec", "install the mpich wheel")


# LIBSVM's commands as Debian's libsvm-tools names them (grid.py and easy.py: svm-grid, svm-easy)
LIBSVM_TOOLS = ("svm-train", "svm-predict", "svm-scale", "svm-grid", "svm-easy")


def fetch_libsvm_tools(dest: Path) -> dict[str, str]:
    """Debian's LIBSVM commands fetched into ``dest`` (``apt-get download`` of libsvm-tools
    and its library libsvm3, unpacked by ``dpkg -x``, never installed), each program behind a
    script that finds the library. Raises OSError or SubprocessError if they cannot be had."""
    dest.mkdir(parents=True, exist_ok=True)
    run = dict(check=True, capture_output=True, timeout=180)
    subprocess.run(["apt-get", "download", "libsvm-tools", "libsvm3"], cwd=dest, **run)
    for deb in dest.glob("*.deb"):
        subprocess.run(["dpkg", "-x", str(deb), str(dest / "x")], **run)
    lib = ":".join(dict.fromkeys(str(p.parent) for p in (dest / "x").rglob("libsvm.so*")))
    tools = {}
    for t in LIBSVM_TOOLS:
        exe, wrapper = dest / "x" / "usr" / "bin" / t, dest / t
        if not exe.exists():
            raise FileNotFoundError(f"Debian's libsvm-tools has no {t}")
        if exe.read_bytes()[:4] != b"\x7fELF":  # grid.py, easy.py
            tools[t] = str(exe)
            continue
        wrapper.write_text(f'#!/bin/sh\nLD_LIBRARY_PATH={lib} exec {exe} "$@"\n')
        wrapper.chmod(0o755)
        tools[t] = str(wrapper)
    return tools


@functools.cache
def fetched_libsvm_tools() -> dict[str, str] | None:
    """Debian's LIBSVM commands, fetched once into the user's cache
    (``$XDG_CACHE_HOME/psvm/libsvm-tools``) and kept there; None if they cannot be had."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    dest = cache / "psvm" / "libsvm-tools"
    kept = {t: [p for p in (dest / t, dest / "x/usr/bin" / t) if p.exists()] for t in LIBSVM_TOOLS}
    if all(kept.values()):  # each program's wrapper, or the script
        return {t: str(paths[0]) for t, paths in kept.items()}
    try:
        shutil.rmtree(dest, ignore_errors=True)
        return fetch_libsvm_tools(dest)
    except (OSError, subprocess.SubprocessError) as e:
        print(f"# LIBSVM's commands not on PATH and not fetched ({e!r})", file=sys.stderr)
        return None


def libsvm_tool(name: str, required: bool = True) -> str | None:
    """LIBSVM's command ``name`` (one of :data:`LIBSVM_TOOLS`): on PATH, else Debian's,
    fetched once (:func:`fetch_libsvm_tools`). Without either: a RuntimeError, or None if not
    ``required``."""
    found = shutil.which(name)
    if found is None:
        fetched = fetched_libsvm_tools()
        found = None if fetched is None else fetched[name]
    if found is None and required:
        raise RuntimeError(f"{name} not found: apt-get install libsvm-tools")
    return found


def run_worker(ranks: int, plan: dict, workdir: str | Path, timeout: float | None = None) -> list:
    """Run a plan (see :mod:`heuristics.worker`) under ``mpiexec -n ranks``; its records.

    The environment is passed unchanged, as a user runs psvm: each rank takes its
    share of the node's cores (:mod:`psvm.threads`).
    """
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    plan_path, out = workdir / "plan.json", workdir / "records.jsonl"
    out.unlink(missing_ok=True)
    plan_path.write_text(json.dumps({**plan, "out": str(out), "workdir": str(workdir)}))
    cmd = [mpiexec(), "-n", str(ranks), sys.executable, "-m", "heuristics.worker", str(plan_path)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def versions() -> dict:
    from importlib import metadata

    out = {"psvm git": git_state(), "python": platform.python_version()}
    for pkg in (
        "psvm",
        "numpy",
        "scipy",
        "numba",
        "mpi4py",
        "mpich",
        "scikit-learn",
        "libsvm-official",
        "matplotlib",
    ):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


# what the measuring commands themselves write into the checkout: not a change of the code
OUTPUTS = ("heuristics/records/*", "heuristics/*.png", "heuristics/REPORT.md",
           "heuristics/study.json", "benchmarks/results/*", "docs/benchmarks.md")  # fmt: skip


def git_state() -> str | None:
    """``<commit>`` of the checkout, ``+ N modified files`` when files other than the
    measurements' own :data:`OUTPUTS` differ from it.

    None when installed (no checkout) or without git.
    """
    if CHECKOUT is None:
        return None
    try:
        head = subprocess.run(
            ["git", "-C", str(CHECKOUT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        dirty = subprocess.run(
            ["git", "-C", str(CHECKOUT), "status", "--porcelain", "-z", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    n = sum(
        not all(any(fnmatch.fnmatch(p, pat) for pat in OUTPUTS) for p in paths)
        for paths in _changed(dirty.stdout)
    )
    return head.stdout.strip() + (f" + {n} modified files" if n else "")


def _changed(porcelain_z: str) -> list[tuple[str, ...]]:
    """The paths of each entry of ``git status --porcelain -z`` (unquoted; a rename or copy:
    its new path and its old one)."""
    fields, out, i = porcelain_z.split("\0"), [], 0
    while i < len(fields) and fields[i]:
        xy, path = fields[i][:2], fields[i][3:]
        renamed = "R" in xy or "C" in xy
        out.append((path, fields[i + 1]) if renamed else (path,))
        i += 2 if renamed else 1
    return out


def write_output(path: str | None, text: str) -> None:
    """A benchmark's result file (its folder made); no path (``--md ''``) writes nothing."""
    if not path:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)


def machine() -> dict:
    """Host, CPU model, cores, memory, OS and load at the time of the call."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = round(int(f.readline().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return {
        "host": platform.node(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": mem,
        "os": f"{platform.system()} {platform.release()}",
        "load_avg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }
