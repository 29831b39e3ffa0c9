"""Checkpoint and resume (issue 7): after ``kill -9`` or SIGTERM mid-training, ``--resume``
finishes with the model of an uninterrupted run, with another number of ranks too.

Real data (a9a, usps) under mpiexec. A save changes no step of the run, so the models
must agree to the last bit apart from rho and the objectives, which are sums over ranks.
"""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from psvm.io.model_file import read_model
from tests._helpers import gone, mpiexec, rank_pids, run_mpi, until_exists
from tests._svm import assert_models_equal, load_head, run_cli, write_head

TRAIN = "psvm.cli.train"


def _assert_same_run(ref, got, X_test):
    a, b = read_model(ref), read_model(got)
    assert_models_equal(a, b, rtol=1e-12)
    np.testing.assert_allclose(b.meta["objective"], a.meta["objective"], rtol=1e-6)
    assert b.meta["n_iter"] == a.meta["n_iter"]
    assert np.array_equal(a.predict(X_test), b.predict(X_test))


@pytest.fixture(scope="module")
def a9a(shared_data, tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpt")
    train = write_head(shared_data / "a9a.xz", d / "a9a.12k", 12000)
    X_test, _ = load_head(shared_data / "a9a.t.xz", 2000, n_features=123)
    return train, X_test


FLAGS = ["-q", "-c", "4", "-g", "0.5", "--n-features", "123", "--checkpoint-iters", "300"]


@pytest.fixture(scope="module")
def a9a_ref(a9a, tmp_path_factory):
    """The uninterrupted run's model (FLAGS, one process)."""
    train, _ = a9a
    d = tmp_path_factory.mktemp("ref")
    r = run_cli(TRAIN, [*FLAGS, "--checkpoint", d / "ref.ckpt", train, d / "ref.model"], 1)
    assert r.returncode == 0, r.stderr
    return d / "ref.model"


def test_kill_9_then_resume_with_other_rank_counts(tmp_path, a9a, a9a_ref):
    train, X_test = a9a
    flags, ref = FLAGS, a9a_ref

    ckpt, model = tmp_path / "run.ckpt", tmp_path / "run.model"
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    cmd = [
        mpiexec(),
        "-n",
        "2",
        sys.executable,
        "-m",
        TRAIN,
        *flags,
        "--checkpoint",
        str(ckpt),
        str(train),
        str(model),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        ranks = rank_pids(proc.pid, 2)
        assert until_exists(ckpt, proc, 120), "no checkpoint was written"
        os.kill(ranks[1], signal.SIGKILL)
        assert proc.wait(timeout=30) != 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 5
    while not all(gone(p) for p in ranks.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not model.exists(), "training finished before the kill: the test proves nothing"
    assert os.listdir(tmp_path) == ["run.ckpt"]

    for n in (3, 1):  # resume twice from the same file: other rank counts, same model
        saved = ckpt.read_bytes()
        r = run_cli(TRAIN, [*flags, "--checkpoint", ckpt, "--resume", train, model], n)
        assert r.returncode == 0, r.stderr
        _assert_same_run(ref, model, X_test)
        ckpt.write_bytes(saved)


def _terminated(args: list, n: int | None, ready) -> str:
    """psvm-train's stderr after a SIGTERM once ``ready(proc)``: one process (``n`` None) or
    ``mpiexec -n n``; it exits with 143 (or 9, as in test_failing_rank.py: mpiexec may reap
    a rank it killed first)."""
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", TRAIN, *args]
    if n is not None:
        cmd = [mpiexec(), "-n", str(n), *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert ready(proc), "not running when it should be stopped"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (143, 9) if n else proc.returncode == 143, err
    return err.decode()


@pytest.mark.parametrize("n", [None, 2, 3])
def test_sigterm_saves_a_checkpoint_that_resumes_to_the_same_model(tmp_path, a9a, a9a_ref, n):
    """A batch scheduler's time limit: SIGTERM (mpiexec forwards it to every rank; srun sends
    it to each), then SIGKILL after a grace period. Every rank stops at the same engine
    return, the checkpoint is saved there, one line is printed and the job exits 143 with no
    model; ``--resume`` finishes with the model of an uninterrupted run. ``n`` None: one
    process, no mpiexec."""
    train, X_test = a9a
    # saves by rank 0's clock: SIGTERM's save falls on any iteration, not on FLAGS' hundreds
    flags = [*FLAGS[:-2], "--checkpoint-seconds", "0.3"]
    ckpt, model = tmp_path / "run.ckpt", tmp_path / "run.model"
    cmd = [*flags, "--checkpoint", str(ckpt), str(train), str(model)]
    line = _terminated(cmd, n, lambda proc: until_exists(ckpt, proc, 120))
    prefix = "psvm-train: terminated; checkpoint saved at iteration "
    assert line.startswith(prefix) and line.endswith(" (--resume goes on)\n"), line
    with np.load(ckpt) as z:  # the state of the moment, not the last periodic save's
        saved = json.loads(str(z["state_scalars"]))["n_iter"]
    assert saved == int(line[len(prefix) :].split()[0]) and saved > 0
    assert os.listdir(tmp_path) == ["run.ckpt"]  # no model, no temporary file

    r = run_cli(TRAIN, [*flags, "--checkpoint", ckpt, "--resume", train, model], 2)
    assert r.returncode == 0, r.stderr
    _assert_same_run(a9a_ref, model, X_test)


def _saved_pair(ckpt) -> int:
    """The pair of the checkpoint's solver state (-1: no file yet; a file is replaced whole)."""
    try:
        with np.load(ckpt) as z:
            return int(z["pair"])
    except (OSError, ValueError, KeyError):
        return -1


@pytest.mark.parametrize("n", [None, 2])
def test_sigterm_in_the_probability_folds_keeps_the_solved_pairs(tmp_path, a9a, n):
    """-b 1: the class pairs are saved once solved, before LIBSVM's internal 5-fold
    cross-validation, which keeps no checkpoint. A SIGTERM in the folds says so, and the
    resume solves the folds alone, to the uninterrupted run's model and probabilities (at
    another P too)."""
    train, X_test = a9a
    flags = [*FLAGS[:-2], "-b", "1"]  # (no periodic saves: the one save is the pairs')
    ref, ckpt, model = tmp_path / "ref.model", tmp_path / "run.ckpt", tmp_path / "run.model"
    r = run_cli(TRAIN, [*flags, "--stats", tmp_path / "ref.json", train, ref], 1)
    assert r.returncode == 0, r.stderr

    def pairs_saved(proc) -> bool:
        deadline = time.monotonic() + 120
        while _saved_pair(ckpt) != 1 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        return _saved_pair(ckpt) == 1

    cmd = [*flags, "--checkpoint", str(ckpt), str(train), str(model)]
    line = "psvm-train: terminated; the checkpoint holds every class pair; --resume redoes only "
    assert _terminated(cmd, n, pairs_saved) == line + "-b 1's folds\n"
    with np.load(ckpt) as z:  # one pair (a9a), solved: no solver state
        assert int(z["pair"]) == 1 and "pair0_alpha" in z.files and "state_alpha" not in z.files
    stats = tmp_path / "run.json"
    resume = ["--checkpoint", ckpt, "--resume", "--stats", stats]
    r = run_cli(TRAIN, [*flags, *resume, train, model], 2)
    assert r.returncode == 0, r.stderr
    _assert_same_run(ref, model, X_test)
    a, b = read_model(ref), read_model(model)
    assert b.meta["probA"] == a.meta["probA"] and b.meta["probB"] == a.meta["probB"]
    # the resume's iterations are the folds' alone: the uninterrupted run's but the pair's
    every = json.loads((tmp_path / "ref.json").read_text())["counts"]["n_iter"]
    assert json.loads(stats.read_text())["counts"]["n_iter"] == every - a.meta["n_iter"][0] > 0


@pytest.mark.parametrize("k", [3, 14])
def test_multiclass_crash_after_a_checkpoint_then_resume(tmp_path, shared_data, k):
    """usps: 45 class pairs; the checkpoint holds the solved pairs and the current one."""
    train = write_head(shared_data / "usps.t.xz", tmp_path / "usps", 1000)
    flags = ["-q", "--checkpoint-iters", "40"]
    ref, got, ckpt = tmp_path / "ref.model", tmp_path / "got.model", tmp_path / "c.ckpt"
    r = run_cli(TRAIN, [*flags, "--checkpoint", tmp_path / "ref.ckpt", train, ref], 2)
    assert r.returncode == 0, r.stderr
    r = run_mpi("run_train_fault.py", ["ckpt-exit", k, *flags, "--checkpoint", ckpt, train, got], 3)
    assert r.returncode != 0 and not got.exists()
    with np.load(ckpt) as z:
        assert int(z["pair"]) > 0 and "pair0_alpha" in z.files  # a later pair, earlier results
    r = run_cli(TRAIN, [*flags, "--checkpoint", ckpt, "--resume", train, got], 2)
    assert r.returncode == 0, r.stderr
    X, _ = load_head(train, None, n_features=256)
    _assert_same_run(ref, got, X)


def test_seconds_trigger_and_counters(tmp_path, a9a):
    train, _ = a9a
    stats, ckpt = tmp_path / "s.json", tmp_path / "c.ckpt"
    r = run_cli(
        TRAIN,
        [
            "-q",
            "-c",
            "64",  # a longer solve (45,000 iterations, 0.8 s; C = 8's took 0.2 s on a Xeon)
            "--checkpoint",
            ckpt,
            "--checkpoint-seconds",
            "0.01",
            "--stats",
            stats,
            train,
            tmp_path / "m",
        ],
        2,
    )
    assert r.returncode == 0, r.stderr
    counts = json.loads(stats.read_text())["counts"]
    assert counts["n_checkpoint"] > 10  # rank 0's clock, agreed through the packet
    with np.load(ckpt) as z:
        assert 0 < json.loads(str(z["state_scalars"]))["n_iter"] <= counts["n_iter"]


@pytest.mark.parametrize("n", [1, 2])
def test_resume_refuses_another_runs_checkpoint(tmp_path, a9a, n):
    train, _ = a9a
    ckpt = tmp_path / "c.ckpt"
    r = run_cli(
        TRAIN,
        ["-q", "-c", "1", "--checkpoint", ckpt, "--checkpoint-iters", "200", train, tmp_path / "m"],
        n,
    )
    assert r.returncode == 0 and ckpt.exists(), r.stderr
    # what C-SVC and rbf do not read (-n, -p, -d, -r) is no other run (a user's trial)
    unread = ["-n", "0.3", "-p", "0.5", "-d", "5", "-r", "2"]
    args = ["-q", "-c", "1", *unread, "--checkpoint", ckpt, "--resume", train, tmp_path / "m1"]
    r = run_cli(TRAIN, args, n)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "m1").read_bytes() == (tmp_path / "m").read_bytes()
    r = run_cli(
        TRAIN, ["-q", "-c", "2", "--checkpoint", ckpt, "--resume", train, tmp_path / "m2"], n
    )
    assert r.returncode != 0
    assert r.stderr.count("was written by a run with other data or parameters") == 1, r.stderr
    assert not (tmp_path / "m2").exists()
    ckpt.write_bytes(ckpt.read_bytes()[:100])  # truncated: a clear error, not a traceback
    r = run_cli(
        TRAIN, ["-q", "-c", "1", "--checkpoint", ckpt, "--resume", train, tmp_path / "m3"], n
    )
    assert r.returncode != 0 and "cannot be read" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("n", [1, 2])
def test_resume_refuses_a_damaged_solver_state(tmp_path, a9a, n):
    """A valid .npz whose solver state was damaged after psvm wrote it (an array cut short or
    gone, NaN in alpha) is one clear error on every rank, not a traceback or a kernel to
    blame (a user's trial)."""
    train, _ = a9a
    ckpt = tmp_path / "c.ckpt"
    flags = ["-q", "-c", "1", "--checkpoint", ckpt]
    r = run_cli(TRAIN, [*flags, "--checkpoint-iters", "200", train, tmp_path / "m"], n)
    assert r.returncode == 0 and ckpt.exists(), r.stderr
    with np.load(ckpt) as z:
        saved = {k: z[k] for k in z.files if not k.startswith("pair0_")}
    saved["finished"] = np.array("[]")  # the pair not finished: its state is read
    cut = dict(saved, state_alpha=saved["state_alpha"][:10])
    nan = dict(saved, state_alpha=np.full_like(saved["state_alpha"], np.nan))
    no_g = {k: v for k, v in saved.items() if k != "state_G"}
    for damaged, why in ((cut, "'alpha' holds"), (nan, "not finite"), (no_g, "no 'G'")):
        with open(ckpt, "wb") as f:
            np.savez(f, **damaged)
        r = run_cli(TRAIN, [*flags, "--resume", train, tmp_path / "m2"], n)
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
        lines = r.stderr.strip().splitlines()
        assert lines == [lines[0]] and "its solver state is damaged" in lines[0], lines
        assert why in lines[0], lines
        assert not (tmp_path / "m2").exists()


def test_resume_without_a_file_starts_afresh(tmp_path, a9a):
    train, _ = a9a
    r = run_cli(
        TRAIN,
        ["-q", "--checkpoint", tmp_path / "none.ckpt", "--resume", train, tmp_path / "m"],
        None,
    )
    assert r.returncode == 0 and (tmp_path / "m").exists(), r.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--resume"], "--resume needs --checkpoint FILE"),
        (["--checkpoint-iters", "5"], "--checkpoint-iters needs --checkpoint FILE"),
        (["--checkpoint", "c", "--checkpoint-iters", "-1"], "checkpoint_iters must be >= 0"),
        (["--checkpoint", "c", "--checkpoint-seconds", "nan"], "checkpoint_seconds must be"),
    ],
)
def test_bad_checkpoint_options(tmp_path, a9a, args, message):
    train, _ = a9a
    r = run_cli(TRAIN, [*args, train, tmp_path / "m"], 2)
    assert r.returncode != 0 and r.stderr.count(message) == 1, r.stderr


def test_estimator_resumes_to_the_same_model(tmp_path, a9a):
    from psvm import SVC

    train, X_test = a9a
    X, y = load_head(train, 3000, n_features=123)
    ckpt = tmp_path / "est.ckpt"
    ref = SVC(C=4, gamma=0.5, checkpoint=ckpt, checkpoint_iters=200).fit(X, y)
    assert ref.fit_stats_["counts"]["n_checkpoint"] >= 2 and ckpt.exists()
    got = SVC(C=4, gamma=0.5, checkpoint=ckpt, checkpoint_iters=200, resume=True).fit(X, y)
    assert 0 < got.fit_stats_["values"]["resumed_at_iter"] < ref.n_iter_[0]
    np.testing.assert_array_equal(got.support_, ref.support_)
    np.testing.assert_allclose(got.dual_coef_.toarray(), ref.dual_coef_.toarray(), rtol=1e-12)
    np.testing.assert_array_equal(got.n_iter_, ref.n_iter_)
    np.testing.assert_array_equal(got.predict(X_test), ref.predict(X_test))
    with pytest.raises(ValueError, match="checkpoint_iters must be >= 0"):
        SVC(checkpoint=ckpt, checkpoint_iters=-5).fit(X, y)
    with pytest.raises(ValueError, match="resume needs a checkpoint path"):
        SVC(resume=True).fit(X, y)
    with pytest.raises(ValueError, match="other data or parameters"):
        SVC(C=1, checkpoint=ckpt, resume=True).fit(X, y)
    for other in ("text.ckpt", "other.npz", "objects.npz"):  # not psvm's: no pickle hint
        path = tmp_path / other
        if other == "objects.npz":
            np.savez(path, alpha=np.array([object()], dtype=object))
        elif other.endswith(".npz"):
            np.savez(path, alpha=np.zeros(3))
        else:
            path.write_text("hello\n")
        with pytest.raises(ValueError, match="it is not an .npz file that psvm wrote") as exc:
            SVC(checkpoint=path, resume=True).fit(X, y)
        assert "pickle" not in str(exc.value)


@pytest.mark.parametrize("kind", ["SVR", "NuSVR"])
def test_regressor_resumes_to_the_same_model(tmp_path, shared_data, kind):
    """Two variables per row: the checkpoint's fingerprint takes one bound per row."""
    import psvm

    X, y = load_head(shared_data / "abalone_scale.xz")
    ckpt = tmp_path / "svr.ckpt"
    est = getattr(psvm, kind)
    kw = dict(C=10, gamma=0.5, checkpoint=ckpt, checkpoint_iters=1000)
    ref = est(**kw).fit(X, y)
    assert ref.fit_stats_["counts"]["n_checkpoint"] >= 2 and ckpt.exists()
    got = est(**kw, resume=True).fit(X, y)
    assert 0 < got.fit_stats_["values"]["resumed_at_iter"] < ref.n_iter_
    np.testing.assert_array_equal(got.support_, ref.support_)
    np.testing.assert_array_equal(got.dual_coef_.toarray(), ref.dual_coef_.toarray())
    np.testing.assert_array_equal(got.intercept_, ref.intercept_)


@pytest.mark.parametrize("kind", ["SVR", "NuSVR"])
def test_checkpoints_change_no_step(tmp_path, shared_data, kind):
    """A save keeps the stale rows' gradients and departures as they are (the file holds the
    departures' snapshots): the checkpointed fit, and a fit resumed from its file, take the
    steps of a fit without checkpoints. (Saves that brought the stale gradients up to date
    changed their rounding, and with it an epsilon-SVR's path: 60,018 against 60,431
    iterations here.)"""
    import psvm

    X, y = load_head(shared_data / "abalone_scale.xz", 500)
    est = getattr(psvm, kind)
    plain = est(C=1000, gamma=1).fit(X, y)
    kw = dict(C=1000, gamma=1, checkpoint=tmp_path / "c.ckpt", checkpoint_iters=1000)
    saved = est(**kw).fit(X, y)
    resumed = est(**kw, resume=True).fit(X, y)
    assert saved.fit_stats_["counts"]["n_checkpoint"] >= 50
    assert resumed.fit_stats_["values"]["resumed_at_iter"] >= 50_000
    for got in (saved, resumed):
        assert got.n_iter_ == plain.n_iter_
        np.testing.assert_array_equal(got.dual_coef_.toarray(), plain.dual_coef_.toarray())
        np.testing.assert_array_equal(got.intercept_, plain.intercept_)
