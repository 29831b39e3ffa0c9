"""Suite-wide settings: real data paths, the install's precompiled cache, and a run in which
nothing passed fails."""

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from heuristics.bench import LIBSVM_TOOLS, fetched_libsvm_tools

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("PSVM_SHARED_DATA", REPO.parent / "shared" / "data"))


PRECOMPILED = pytest.StashKey[Path]()


def pytest_sessionstart(session):
    """A copy of the cache that psvm's install precompiled, while the tree still holds exactly
    that (a fresh install, as CI's): tests compile more into the tree as they run."""
    from psvm.precompile import MANIFEST, ROOT, manifest

    try:
        written = json.loads(MANIFEST.read_text())
    except (OSError, ValueError):
        return
    if ROOT != REPO / "psvm" or manifest() != written:  # (edited sources: a stale cache)
        return
    copy = Path(tempfile.mkdtemp(prefix="psvm-precompiled-"))
    for name in written["files"]:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, copy / name)
    session.config.stash[PRECOMPILED] = copy


@pytest.fixture(scope="session")
def precompiled_cache(request) -> Path | None:
    """The install's precompiled cache files (paths relative to psvm/), or None."""
    return request.config.stash.get(PRECOMPILED, None)


def pytest_sessionfinish(session, exitstatus):
    copy = session.config.stash.get(PRECOMPILED, None)
    if copy is not None:
        shutil.rmtree(copy, ignore_errors=True)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and exitstatus == 0 and not reporter.stats.get("passed"):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


NO_DATA = (
    f"real LIBSVM data sets not found at {SHARED_DATA}: set PSVM_SHARED_DATA to a folder "
    "holding them as NAME.xz (README.md, 'Running the tests')"
)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Every skip for missing data at one location (this file), so -ra folds them into one line."""
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and NO_DATA in report.longrepr[2]:
        report.longrepr = (__file__, None, report.longrepr[2])
    return report


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of real data sets; tests that need it skip (not fail) without it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(NO_DATA)
    return SHARED_DATA


@pytest.fixture(scope="session")
def libsvm_tools() -> dict[str, str]:
    """Debian's LIBSVM commands (svm-train, svm-predict, svm-scale; grid.py and easy.py as
    the Python scripts svm-grid and svm-easy), all from one place: PATH, else the copy the
    benchmarks fetch once into the user's cache (:func:`heuristics.bench.fetched_libsvm_tools`).
    Tests that need them skip without them."""
    found = {t: shutil.which(t) for t in LIBSVM_TOOLS}
    if all(found.values()):
        return found
    fetched = fetched_libsvm_tools()
    if fetched is None:
        pytest.skip("LIBSVM's tools (Debian's libsvm-tools) not on PATH and not fetched")
    return fetched
