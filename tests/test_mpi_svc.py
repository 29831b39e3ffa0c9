"""Training under mpiexec: the model does not depend on the number of ranks."""

import hashlib
import json
import lzma
import shutil
from pathlib import Path

import numpy as np
import pytest

import psvm
from psvm.io.model_file import read_model
from tests._helpers import run_mpi
from tests._svm import assert_models_equal, load_head, run_cli, write_head

TRAIN = "psvm.cli.train"
PREDICT = "psvm.cli.predict"


def train(tmp_path, data, n, flags, tag):
    model = tmp_path / f"{tag}-{n}.model"
    stats = tmp_path / f"{tag}-{n}.json"
    r = run_cli(TRAIN, [*flags, "-q", "--stats", stats, data, model], n)
    assert r.returncode == 0, r.stderr
    return read_model(model), json.loads(stats.read_text())


@pytest.mark.parametrize(
    "name, rows, flags",
    [
        ("heart_scale.xz", None, ["-c", "10", "-g", "0.5", "--heuristic", "earliest"]),
        ("a9a.xz", 3000, ["-c", "1", "-g", "0.05", "--heuristic", "percent-5",
                          "--reconstruction", "multi"]),
        ("usps.t.xz", 500, ["-c", "10", "-g", "0.01", "--heuristic", "none"]),
        ("heart_scale.xz", None, ["-t", "0", "-c", "0.5", "--selection", "first", "-h", "0"]),
    ],
)  # fmt: skip
def test_same_model_for_1_2_3_ranks(tmp_path, shared_data, name, rows, flags):
    data = write_head(shared_data / name, tmp_path / "train.txt", rows)
    ref, ref_stats = train(tmp_path, data, 1, flags, "p")
    X, _ = load_head(data)
    for n in (2, 3):
        model, stats = train(tmp_path, data, n, flags, "p")
        assert_models_equal(model, ref)
        np.testing.assert_allclose(
            stats["values"]["objective"], ref_stats["values"]["objective"], rtol=1e-6
        )
        if name.startswith("usps"):  # ten classes: each rank solves whole pairs (pairs.deal)
            assert stats["values"]["pairs_dealt"] == n
            assert stats["counts"] == ref_stats["counts"]  # each pair's, counted once
        else:
            assert stats["comm"]["allgather"]["calls"] > 0  # really distributed
        assert (model.predict(X) == ref.predict(X)).all()
    assert ref_stats["counts"]["n_iter"] == stats["counts"]["n_iter"]


def test_more_ranks_than_rows(tmp_path):
    data = tmp_path / "tiny.txt"
    data.write_text("1 1:1 2:0.5\n-1 1:-1\n1 2:1\n-1 1:-0.5 2:-0.5\n")
    ref, _ = train(tmp_path, data, 1, ["-c", "1", "-g", "0.5"], "tiny")
    model, _ = train(tmp_path, data, 5, ["-c", "1", "-g", "0.5"], "tiny")
    assert_models_equal(model, ref)
    # five classes of a row each on six ranks: their ten pairs dealt, the sixth rank idle
    data.write_text("1 1:1\n2 1:2 2:1\n3 2:3\n4 1:-1\n5 2:-2 3:1\n")
    ref, _ = train(tmp_path, data, 1, [], "five")
    model, stats = train(tmp_path, data, 6, [], "five")
    assert_models_equal(model, ref)
    assert stats["values"]["pairs_dealt"] == 6


@pytest.mark.parametrize("reconstruction", ["single", "multi"])
def test_a_rank_whose_rows_all_leave_its_window(tmp_path, reconstruction):
    """The last third of the rows lie deep in the +1 class: with `earliest` a rank's window
    empties and rows later rejoin it (this crashed the cache); the model is still P = 1's."""
    rng = np.random.default_rng(0)
    near = rng.normal(size=(120, 2))
    labels = np.where(near[:, 0] + near[:, 1] > 0, 1, -1)
    deep = rng.uniform(2.0, 3.0, size=(60, 2))
    rows = [f"{c} 1:{a:.6g} 2:{b:.6g}" for c, (a, b) in zip(labels, near, strict=True)]
    rows += [f"1 1:{a:.6g} 2:{b:.6g}" for a, b in deep]
    data = tmp_path / "deep.txt"
    data.write_text("\n".join(rows) + "\n")
    flags = ["-c", "10", "-g", "0.1", "--heuristic", "earliest", "--reconstruction", reconstruction]
    ref, _ = train(tmp_path, data, 1, flags, "deep")
    model, stats = train(tmp_path, data, 3, flags, "deep")
    assert min(min(r["traces"]["active"]) for r in stats["per_rank"]) == 0
    assert stats["counts"]["n_reconstruct"] > 0
    assert_models_equal(model, ref)


@pytest.mark.parametrize(
    "flags",
    [
        ["-c", "1", "-g", "1", "--heuristic", "earliest"],
        ["-s", "1", "-n", "0.1", "-g", "1", "--heuristic", "earliest"],
        ["-s", "2", "-n", "0.2", "-g", "1"],
    ],
)
def test_rows_lent_between_ranks_leave_the_model_unchanged(tmp_path, shared_data, flags):
    """ijcnn1's rows leave the ranks' windows unevenly, so at cuts the ranks lend rows to
    even them out (svc/balance.py): the model file is one process's, byte for byte, and a
    checkpoint saved while rows are lent resumes to it with another P."""
    data = write_head(shared_data / "ijcnn1.xz", tmp_path / "train.txt", 1500)
    ref = tmp_path / "ref.model"
    assert run_cli(TRAIN, ["-q", *flags, data, ref], 1).returncode == 0
    for n in (2, 3):
        model, stats, ckpt = (tmp_path / f"{n}.{ext}" for ext in ("model", "json", "ckpt"))
        run = ["-q", *flags, "--checkpoint", ckpt, "--checkpoint-iters", "50"]
        r = run_cli(TRAIN, [*run, "--stats", stats, data, model], n)
        assert r.returncode == 0, r.stderr
        assert json.loads(stats.read_text())["counts"]["rows_lent"] > 0
        assert model.read_bytes() == ref.read_bytes()
        r = run_cli(TRAIN, [*run, "--resume", "--stats", stats, data, model], 5 - n)
        assert r.returncode == 0, r.stderr
        assert json.loads(stats.read_text())["values"]["resumed_at_iter"] > 0
        assert model.read_bytes() == ref.read_bytes()


def test_ranks_without_rows_of_a_pair_borrow_rows(tmp_path, shared_data):
    """usps.t's classes 1-3 sorted by class, with a checkpoint (the pairs then run together):
    at P = 3 a pair's rows sit on one or two ranks, and the others' windows are borrowed rows
    only. The model is one process's, byte for byte."""
    with lzma.open(shared_data / "usps.t.xz", "rb") as f:
        rows = [line for line in f if line.split()[0] in (b"1", b"2", b"3")]
    data = tmp_path / "sorted.txt"
    data.write_bytes(b"".join(sorted(rows, key=lambda line: int(line.split()[0]))))
    flags = ["-q", "-c", "10", "-g", "0.01", "--heuristic", "earliest"]
    ref = tmp_path / "ref.model"
    assert run_cli(TRAIN, [*flags, data, ref], 1).returncode == 0
    for n in (2, 3):
        model, stats, ckpt = (tmp_path / f"{n}.{ext}" for ext in ("model", "json", "ckpt"))
        r = run_cli(TRAIN, [*flags, "--checkpoint", ckpt, "--stats", stats, data, model], n)
        assert r.returncode == 0, r.stderr
        assert json.loads(stats.read_text())["counts"]["rows_lent"] > 0
        assert model.read_bytes() == ref.read_bytes()


def test_rows_lent_within_the_rbf_table(tmp_path):
    """One-class on 0/1 features, 30 ones a row on the first rank and 3 on the last: the int8
    columns read an rbf table, which covers every rank's rows' norms (kernel_facts), so rows
    lent to the last rank fit it. The model is one process's."""
    rng = np.random.default_rng(0)
    counts = [30] * 1000 + [3] * 2000
    lines = [" ".join(["1"] + [f"{j + 1}:1" for j in np.sort(rng.choice(100, k, False))])
             for k in counts]  # fmt: skip
    data = tmp_path / "ones.txt"
    data.write_text("\n".join(lines) + "\n")
    flags = ["-q", "-s", "2", "-n", "0.3", "-g", "0.05", "--heuristic", "earliest"]
    ref = tmp_path / "ref.model"
    assert run_cli(TRAIN, [*flags, data, ref], 1).returncode == 0
    model, stats = tmp_path / "2.model", tmp_path / "2.json"
    r = run_cli(TRAIN, [*flags, "--stats", stats, data, model], 2)
    assert r.returncode == 0, r.stderr
    assert json.loads(stats.read_text())["counts"]["rows_lent"] > 0
    assert model.read_bytes() == ref.read_bytes()


def test_predict_under_mpiexec_matches_libsvm(tmp_path, shared_data):
    """A psvm model loads in LIBSVM and predicts the same labels as psvm-predict."""
    from libsvm import svmutil

    data = write_head(shared_data / "a9a.xz", tmp_path / "train.txt", 2000)
    test = write_head(shared_data / "a9a.t.xz", tmp_path / "test.txt", 1000)
    model_path = tmp_path / "m.model"
    r = run_cli(TRAIN, ["-q", "-c", "1", "-g", "0.05", data, model_path], 2)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "pred.txt"
    r = run_cli(PREDICT, [test, model_path, out], 3)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Accuracy = ")
    ours = np.loadtxt(out)
    y, x = svmutil.svm_read_problem(str(test))
    theirs, _, _ = svmutil.svm_predict(y, x, svmutil.svm_load_model(str(model_path)), "-q")
    assert (ours == np.array(theirs)).all()
    correct = int(r.stdout.split("(")[1].split("/")[0])
    assert correct == int((ours == np.array(y)).sum())


def test_libsvm_model_in_psvm_predict(tmp_path, shared_data):
    from libsvm import svmutil

    data = write_head(shared_data / "heart_scale.xz", tmp_path / "h.txt")
    y, x = svmutil.svm_read_problem(data)
    m = svmutil.svm_train(y, x, "-c 2 -g 0.2 -q")
    svmutil.svm_save_model(str(tmp_path / "l.model"), m)
    theirs, _, _ = svmutil.svm_predict(y, x, m, "-q")
    r = run_cli(PREDICT, [data, tmp_path / "l.model", tmp_path / "out"], 2)
    assert r.returncode == 0, r.stderr
    assert (np.loadtxt(tmp_path / "out") == np.array(theirs)).all()


def _cache_without_the_loop(dest) -> None:
    """psvm's compiled functions from numba's cache next to its modules (installing filled it),
    laid out as numba reads NUMBA_CACHE_DIR, except the ranks' loop: a run then compiles that
    alone (the whole fit's functions from nothing took 40 s a test on 2 cores). Without an
    installed cache the copy is empty and the run compiles everything, as before."""
    root = Path(psvm.__file__).parent
    for cache in root.rglob("__pycache__"):
        folder = str(cache.parent)  # numba's user cache folder: the name, then a digest
        target = dest / f"{cache.parent.name}_{hashlib.sha1(folder.encode()).hexdigest()}"
        for f in cache.glob("*.nb[ic]"):
            if not f.name.startswith("engine.run-"):
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(f, target / f.name)


def test_with_an_empty_cache_one_rank_per_node_compiles_the_loop(tmp_path):
    """The others wait, then load the loop from numba's cache: one miss, the rest hits. Three
    ranks: two wait (each P is a compile of the loop, 13 s on 2 cores)."""
    n = 3
    _cache_without_the_loop(tmp_path)
    env = {"NUMBA_CACHE_DIR": str(tmp_path)}
    res = run_mpi("run_first_compile.py", [], n, timeout=600, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = sorted(line.split() for line in res.stdout.splitlines() if line.startswith("rank"))
    assert [(int(w[3]), int(w[5])) for w in lines] == [(1, 0)] + [(0, 1)] * (n - 1), res.stdout
    assert len({w[7] for w in lines}) == 1


@pytest.mark.parametrize("k", [3, 4])
def test_pairs_dealt_to_the_ranks_print_one_process_lines(tmp_path, k):
    """Each rank solves whole class pairs (psvm.svc.pairs.deal), and -b 1's folds of whole
    pairs; three pairs at P = 2 would keep the ranks busy 75% of the time: they step together.
    Either way rank 0 prints LIBSVM's lines of every pair in pair order, the same as one
    process, and the model, probA and probB included, is the same."""
    from sklearn.datasets import dump_svmlight_file, make_classification

    X, y = make_classification(300, 6, n_informative=4, n_classes=k, random_state=0)
    data = tmp_path / "four.txt"
    dump_svmlight_file(X, y, str(data))
    out = {}
    for n in (1, 2, 3):
        stats = tmp_path / f"{n}.json"
        r = run_cli(TRAIN, ["-b", "1", "--stats", stats, data, tmp_path / f"{n}.model"], n)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert lines[-1].startswith("Wrote ")
        out[n] = lines[:-1]
    n_pairs = k * (k - 1) // 2
    assert sum(line.startswith("optimization finished") for line in out[1]) == n_pairs * 6
    assert out[2] == out[1] and out[3] == out[1]
    one = json.loads((tmp_path / "1.json").read_text())
    for n in (2, 3):
        assert (tmp_path / f"{n}.model").read_bytes() == (tmp_path / "1.model").read_bytes()
        stats = json.loads((tmp_path / f"{n}.json").read_text())
        if k == 3 and n == 2:
            assert "pairs_dealt" not in stats["values"]
            continue
        assert stats["values"]["pairs_dealt"] == n and stats["counts"] == one["counts"]
        assert all(r["counts"]["cache_misses"] > 0 for r in stats["per_rank"])  # all solved


def test_pairs_dealt_to_the_ranks_raise_the_first_error_in_pair_order(tmp_path):
    """Classes 3 and 4 overflow the poly kernel: every pair but the first fails. At P = 2 rank
    0 (pairs 1, 3, 5) fails at pair 3, rank 1 (pairs 2, 4, 6) at pair 2; every P reports pair
    2, once, as one process does."""
    rng = np.random.default_rng(0)
    rows = [
        f"{c + 1} 1:{a:.6g} 2:{b:.6g}"
        for c in range(4)
        for a, b in rng.normal(size=(20, 2)) * (1e3 if c >= 2 else 1.0)
    ]
    data = tmp_path / "overflow.txt"
    data.write_text("\n".join(rows) + "\n")
    for n in (1, 2, 3):
        r = run_cli(TRAIN, ["-q", "-t", "1", "-d", "3", "-g", "1e100", data, tmp_path / "m"], n)
        assert r.returncode == 1, r.stderr
        assert r.stderr.count("error:") == 1, r.stderr
        assert "not finite in class pair 2 of 6" in r.stderr, r.stderr
    assert not (tmp_path / "m").exists()
