"""Parallel SGD under mpiexec: sequential equivalence, reproducibility, MSF counters, accuracy."""

import json

import numpy as np
import pytest

import psvm
from psvm.io.linear_model_file import read_linear_model
from tests._svm import load_head, run_cli, write_head

TRAIN = "psvm.cli.train"
PREDICT = "psvm.cli.predict"


def train(tmp_path, data, n, flags, tag):
    """psvm-train --solver sgd under mpiexec -n n (None: no launcher); (model path, stats)."""
    model = tmp_path / f"{tag}-{n}.model"
    stats = tmp_path / f"{tag}-{n}.json"
    r = run_cli(TRAIN, ["--solver", "sgd", *flags, "-q", "--stats", stats, data, model], n)
    assert r.returncode == 0, r.stderr
    return model, json.loads(stats.read_text())


def accuracy(model, X, y) -> float:
    return float(np.mean(read_linear_model(model).predict(X) == y))


@pytest.fixture(scope="module")
def a9a_small(shared_data, tmp_path_factory):
    d = tmp_path_factory.mktemp("a9a")
    return (
        write_head(shared_data / "a9a.xz", d / "train.txt", 6000),
        write_head(shared_data / "a9a.t.xz", d / "test.txt", 6000),
    )


def test_p1_under_mpiexec_is_the_sequential_run(tmp_path, a9a_small):
    data, test = a9a_small
    flags = ["--epochs", "4", "--sync-every", "8", "--seed", "3"]
    plain, _ = train(tmp_path, data, None, flags, "plain")
    one, stats = train(tmp_path, data, 1, flags, "mpi")
    auto, _ = train(tmp_path, data, 1, ["--epochs", "4", "--seed", "3"], "auto")
    assert plain.read_bytes() == one.read_bytes() == auto.read_bytes()
    assert stats["counts"].get("n_sync", 0) == 0 and stats["counts"]["n_iter"] == 4
    # psvm-predict reads the LIBLINEAR file under mpiexec and agrees with the in-process model
    out = tmp_path / "pred.txt"
    r = run_cli(PREDICT, [test, one, out], 2)
    assert r.returncode == 0, r.stderr
    X, y = load_head(test, n_features=123)
    np.testing.assert_array_equal(np.loadtxt(out), read_linear_model(one).predict(X))
    assert r.stdout.startswith(f"Accuracy = {100 * accuracy(one, X, y):g}%")


@pytest.mark.parametrize("schedule", ["pegasos", "optimal", "constant", "epoch"])
def test_every_schedule_under_the_msf_probe(tmp_path, shared_data, schedule):
    """At P > 1 the default period is measured first, by steps on a copy of the model: the
    'epoch' schedule's rate read epoch 0 there, 1 / (lambda * 0), and every such run ended in
    a ZeroDivisionError. Each schedule now trains, as at P = 1."""
    data = write_head(shared_data / "heart_scale.xz", tmp_path / "d.txt", 270)
    flags = ["--schedule", schedule, "--epochs", "3"]
    model, stats = train(tmp_path, data, 2, flags, schedule)
    assert stats["counts"]["n_iter"] == 3
    X, y = load_head(data, n_features=13)
    assert accuracy(model, X, y) > 0.7


@pytest.mark.parametrize("n", [2, 3])
def test_reproducible_run_to_run(tmp_path, a9a_small, n):
    data, _ = a9a_small
    flags = ["--epochs", "3", "--sync-every", "64", "--seed", "1"]
    first, stats = train(tmp_path, data, n, flags, "a")
    second, _ = train(tmp_path, data, n, flags, "b")
    assert first.read_bytes() == second.read_bytes()
    assert stats["counts"]["n_sync"] >= 3 * (6000 // n // 64)  # averaged every 64 samples
    seq, _ = train(tmp_path, data, 1, flags, "seq")
    assert seq.read_bytes() != first.read_bytes()


@pytest.mark.parametrize("n, rows", [(2, 6000), (3, 3000)])
def test_auto_cuts_communication_by_90_percent(tmp_path, shared_data, n, rows):
    """Counters, not wall times: syncs and bytes (deterministic); the seconds of Allreduce only
    fall (by how much is the benchmarks' to say: at P = 3 on 2 cores a rank waits for another's
    time slice, and on a fast CPU the cut read 87%)."""
    data = write_head(shared_data / "a9a.xz", tmp_path / "train.txt", rows)
    flags = ["--epochs", "3", "--tol", "0", "--seed", "0"]
    every, s1 = train(tmp_path, data, n, [*flags, "--sync-every", "1"], "every")
    auto, sa = train(tmp_path, data, n, [*flags, "--sync-every", "auto"], "auto")
    c1, ca = s1["counts"], sa["counts"]
    assert c1["n_sync"] >= 3 * (rows // n)
    assert ca["n_sync"] <= 0.1 * c1["n_sync"]
    assert ca["bytes_sync"] <= 0.1 * c1["bytes_sync"]
    assert sa["seconds_max"]["comm"] < s1["seconds_max"]["comm"]
    assert sa["values"]["msf"]["policy"] == "auto" and sa["values"]["period"] >= 16
    # each epoch's trace has the period it ran with: the start's, then each epoch's choice
    history = [h["period"] for h in sa["values"]["msf"]["history"]]
    assert sa["traces"]["period"] == history[:3], history
    X, y = load_head(shared_data / "a9a.t.xz", n_features=123)
    assert abs(accuracy(auto, X, y) - accuracy(every, X, y)) <= 0.005


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_accuracy_within_half_a_point_of_linearsvc(tmp_path, a9a_small):
    """P = 2, lambda = 1/n (the default) against LinearSVC(C = 1/(n lambda) = 1, hinge), on
    6,000 rows; the full sets are benchmarks/bench_sgd.py's."""
    from sklearn.svm import LinearSVC

    data, test = a9a_small
    model, stats = train(tmp_path, data, 2, ["--seed", "0", "--n-features", "123"], "a9a")
    assert stats["values"]["C"] == pytest.approx(1.0)
    X, y = load_head(data, n_features=123)
    Xt, yt = load_head(test, n_features=123)
    ref = LinearSVC(C=1.0, loss="hinge", max_iter=5000, tol=1e-4).fit(X, y)
    ours = accuracy(model, Xt, yt)
    assert ours >= ref.score(Xt, yt) - 0.005, (ours, ref.score(Xt, yt))


def test_msf_sweep_writes_csv_and_plots(tmp_path, a9a_small):
    import csv

    data, test = a9a_small
    out = tmp_path / "sweep"
    args = [
        "--ranks",
        "1,2",
        "--periods",
        "1,64",
        "--epochs",
        "1",
        "--validation",
        test,
        "--out",
        out,
        data,
    ]
    r = run_cli("benchmarks/msf_sweep.py", args, None)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(out / "msf_sweep.csv")))
    assert [(row["ranks"], row["period"]) for row in rows] == [("1", "1"), ("2", "1"), ("2", "64")]
    assert int(rows[1]["n_sync"]) > 10 * int(rows[2]["n_sync"]) > 0
    assert (out / "msf_time_split.png").stat().st_size and (out / "msf_accuracy.png").stat().st_size


@pytest.mark.parametrize("n", [2, 3])
def test_estimator_agrees_on_input_errors_and_frees_its_comm(n):
    """SGDSVC(distributed='sharded'): one rank's bad rows fail every rank, none hangs; a
    rank may pass no rows."""
    from tests._helpers import run_mpi

    r = run_mpi("run_sgd_estimator.py", [], n, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["same_model"]
    assert out["narrow"] == {"same_model": True, "n_features_in": 5, "coef_width": 5}
    empty = out["empty rank"]  # rank 0 passed no rows: the others' rows are the data set
    assert empty["same_model"] and empty["n_samples"] == 300 - 300 // n
    assert empty["accuracy"] > 0.9
    errors = out["errors"]
    assert errors["nan"].startswith(f"rank {n - 1}: Input X contains NaN"), errors
    negative = f"rank {n - 1}: sample_weight must be finite and non-negative"
    assert errors["negative weight"] == negative
    assert errors["unknown label"] == f"rank {n - 1}: y holds labels [7] that are not in classes"
    assert errors["other classes"] == (
        f"partial_fit needs the same classes on every rank, but rank(s) [{n - 1}] differ "
        "from rank 0 ([0, 1])"
    )
    warm = out["warm start"]
    assert warm["same_model"] and warm["n_iter"] == 2 and warm["accuracy"] > 0.9
    assert (
        errors["warm start, other width"] == "warm_start: X has 4 features, the last fit 5; "
        "fit with warm_start=False to start afresh"
    )
    # early stopping holds out the same rows for every P (by their global index)
    from sklearn.datasets import make_blobs

    X, y = make_blobs(n_samples=300, centers=2, n_features=5, random_state=0, cluster_std=2.0)
    one = psvm.SGDSVC(alpha=1e-3, random_state=0, early_stopping=True, validation_fraction=0.2)
    early = out["early stopping"]
    n_train = one.fit(X, y).fit_stats_["values"]["n_samples"]
    assert early["same_model"] and early["n_samples"] == n_train < 300
    weighted = out["weighted early stopping"]  # the ranks' held-out weights, summed
    assert weighted["traced"] == pytest.approx(weighted["weighted"])
    # the same rows held out as in one process, stratified (30% of each class)
    noisy = np.where(np.random.default_rng(1).random(300) < 0.2, 1 - y, y)
    w = np.random.default_rng(2).uniform(0.1, 5.0, 300)
    masks, held_out = [], psvm.SGDSVC._held_out
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            psvm.SGDSVC,
            "_held_out",
            staticmethod(lambda *a: masks.append(held_out(*a)) or masks[-1]),
        )
        params = dict(early_stopping=True, validation_fraction=0.3, max_iter=2, tol=None)
        psvm.SGDSVC(alpha=1e-3, random_state=0, **params).fit(X, noisy, sample_weight=w)
    assert out["held-out rows"] == np.flatnonzero(masks[0]).tolist()
    assert np.bincount(noisy[masks[0]]).tolist() == [round(0.3 * c) for c in np.bincount(noisy)]
    assert out["freed"] == [n] * 13  # one duplicate per fit, each freed
