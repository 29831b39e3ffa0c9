"""The heuristics report pipeline end to end on a tiny real data set, and its pure parts."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from heuristics.cli import main as psvm_report
from heuristics.report.summary import gmean
from heuristics.study import grid, load_records
from psvm._params import DEFAULT_HEURISTIC, HEURISTICS


def _tables(md: str, heading: str) -> dict[str, list[list[str]]]:
    """Markdown tables after ``heading``: data set name -> rows of cells (header included)."""
    part = md.split(heading, 1)[1].split("\n## ", 1)[0]
    out, name = {}, None
    for line in part.splitlines():
        if line.startswith("### "):
            name = line[4:].strip()
            out[name] = []
        elif line.startswith("|") and name and not line.startswith("|---"):
            out[name].append([c.strip() for c in line.strip("|").split("|")])
    return out


def _label(r):
    return f"{r['heuristic']}/{r['reconstruction']}" + ("/1st" if r["selection"] == "first" else "")


def test_grid_sizes():
    default = grid("default")
    k = len(HEURISTICS) - 1  # those that eliminate
    # none + each x {single, multi} + 2 approximate, second order; 4 first order (single)
    assert len(default) == 1 + 2 * k + 2 + 4 and len(set(default)) == len(default)
    assert ("none", "multi", "second") not in default  # nothing to reconstruct without elimination
    assert len(grid("full")) == 2 * (1 + k * 3)
    assert grid("default", heuristics=["none", "libsvm"], selections=["second"]) == [
        ("none", "single", "second"),
        ("libsvm", "single", "second"),
        ("libsvm", "multi", "second"),
        ("libsvm", "approximate", "second"),
    ]


def test_report_pipeline_on_heart_scale(tmp_path, shared_data, monkeypatch, capsys):
    monkeypatch.setenv("PSVM_SHARED_DATA", str(shared_data))
    monkeypatch.setenv("PSVM_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "heuristics"
    argv = [
        "heuristics",
        "--data",
        "heart_scale",
        "--ranks",
        "1,2",
        "--heuristics",
        "none,libsvm",
        "--reconstructions",
        "single,approximate",
        "--repeats",
        "1",
        "--out",
        str(out),
    ]
    assert psvm_report(argv) == 0
    study, records = load_records(out)
    assert study["command"] == "psvm-report " + " ".join(argv)
    psvm = [r for r in records if r["kind"] == "psvm"]
    assert len(psvm) == 2 * 5  # P in {1, 2} x (3 second-order + 2 first-order configurations)
    assert all(r["returncode"] == 0 and r["command"].startswith("mpiexec -n ") for r in psvm)
    assert {r["ranks"] for r in psvm} == {1, 2}
    assert len([r for r in records if r["kind"] == "sklearn-svc"]) == 2

    md = (out / "REPORT.md").read_text()
    for heading in (
        "## Conclusions",
        "## Time against `none`, and the bound",
        "## Default heuristic",
        "## How this report was produced",
        "## Reference: scikit-learn SVC",
        "## Training time",
        "## Iterations, active set",
        "## Load imbalance",
        "## Accuracy and objective",
        "## Model synchronisation frequency",
    ):
        assert heading in md, heading
    assert study["command"] in md and f"`--heuristic {DEFAULT_HEURISTIC}" in md
    assert study["rows"] and study["seed"] == 0  # the default: stratified samples, said so
    assert "Training rows are a sample stratified by class (seed 0, file order kept)" in md
    for name in (
        "summary",
        "time",
        "iterations",
        "active",
        "elimination",
        "reconstruction",
        "imbalance",
        "quality",
    ):
        png = out / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        assert f"]({name}.png)" in md

    # no `earliest` in this grid, so no bound: said in words, and the figure is drawn without it
    assert "No elimination bound: it needs traced `none/single` and `earliest` runs" in md

    # every number in the tables is the one the JSON records give
    time_rows = _tables(md, "## Training time")["heart_scale"]
    assert time_rows[0][:5] == ["configuration", "P", "train s", "train min-max", "vs none"]
    assert time_rows[0][-2:] == ["CPU s", "vs none (CPU)"]
    assert len(time_rows) - 1 == len(psvm)
    fits = {r["shrinking"]: r for r in records if r["kind"] == "sklearn-svc"}
    for cells in time_rows[1:]:
        (rec,) = [r for r in psvm if _label(r) == cells[0] and r["ranks"] == int(cells[1])]
        assert len(rec["cpu_seconds"]) == rec["ranks"]
        train = rec["stats"]["seconds_max"]["train"]
        assert cells[2] == f"{train:.3f}" and cells[-2] == f"{max(rec['cpu_seconds']):.3f}"
        (none,) = [
            r
            for r in psvm
            if r["heuristic"] == "none"
            and r["ranks"] == rec["ranks"]
            and r["selection"] == rec["selection"]
        ]
        # compared in the wall time a user waits for; CPU seconds add up a rank's threads
        assert cells[4] == f"{train / none['stats']['seconds_max']['train']:.2f}"
        assert cells[5] == f"{train / fits[False]['seconds']:.2f}"
        assert cells[-1] == f"{max(rec['cpu_seconds']) / max(none['cpu_seconds']):.2f}"
    elim_rows = _tables(md, "## Iterations, active set")["heart_scale"]
    for cells in elim_rows[1:]:
        (rec,) = [r for r in psvm if _label(r) == cells[0] and r["ranks"] == 1]
        c = rec["stats"]["counts"]
        assert cells[1:5] == [
            str(c["n_iter"]),
            str(c.get("n_eliminated", 0)),
            str(c.get("n_false_positive", 0)),
            str(c.get("n_reconstruct", 0)),
        ]
    quality = _tables(md, "## Accuracy and objective")["heart_scale"]
    for cells in quality[1:]:
        (rec,) = [r for r in psvm if _label(r) == cells[0] and r["ranks"] == 1]
        assert cells[1] == f"{100 * rec['accuracy']:.2f}"
    svc_rows = [
        line
        for line in md.split("## Reference: scikit-learn SVC")[1].split("\n## ")[0].splitlines()
        if line.startswith("| heart_scale")
    ]
    for line in svc_rows:
        cells = [c.strip() for c in line.strip("|").split("|")]
        fit = fits[cells[1] == "on"]
        assert cells[2] == f"{fit['seconds']:.3f}" and cells[4] == f"{fit['cpu_seconds']:.3f}"

    # the report is a pure function of the records: --build-only gives the same bytes
    (out / "REPORT.md").unlink()
    assert psvm_report(["heuristics", "--build-only", "--out", str(out)]) == 0
    assert (out / "REPORT.md").read_text() == md
    json.loads((out / "study.json").read_text())  # still valid after a rebuild

    # the hook for benchmarks/msf_sweep.py's output: its CSV becomes a table, its plots are linked
    (out / "msf").mkdir()
    (out / "msf" / "msf_sweep.csv").write_text("ranks,period,comm_share\n2,1,0.9\n2,64,0.1\n")
    (out / "msf" / "msf_time_split.png").write_bytes((out / "time.png").read_bytes())
    assert psvm_report(["heuristics", "--build-only", "--no-plots", "--out", str(out)]) == 0
    msf = (out / "REPORT.md").read_text().split("## Model synchronisation frequency")[1]
    assert "| ranks | period | comm_share |" in msf and "| 2 | 64 | 0.1 |" in msf
    assert "](msf/msf_time_split.png)" in msf


def test_data_folder_from_env_then_current_directory(tmp_path, monkeypatch):
    """An installed heuristics has no checkout: $PSVM_SHARED_DATA, else ../shared/data."""
    from heuristics import bench
    from heuristics.cli import main as report

    monkeypatch.setattr(bench, "CHECKOUT", None)  # as from a wheel
    (tmp_path / "shared" / "data").mkdir(parents=True)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    monkeypatch.delenv("PSVM_SHARED_DATA", raising=False)
    assert bench.data_dir() == tmp_path / "shared" / "data"
    monkeypatch.setenv("PSVM_SHARED_DATA", str(tmp_path / "work"))
    assert bench.data_dir() == tmp_path / "work"

    monkeypatch.setenv("PSVM_SHARED_DATA", str(tmp_path / "missing"))
    with pytest.raises(bench.DataNotFoundError, match=r"\$PSVM_SHARED_DATA=.*missing.*shared/data"):
        bench.data_dir()
    monkeypatch.delenv("PSVM_SHARED_DATA")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(bench.DataNotFoundError, match=r"PSVM_SHARED_DATA.*\.\./shared/data"):
        bench.data_dir()
    # psvm-report says so in one line, before it clears OUT/records
    (tmp_path / "out" / "records").mkdir(parents=True)
    (tmp_path / "out" / "records" / "a9a.P1.jsonl").write_text("{}\n")
    with pytest.raises(SystemExit, match="^psvm-report: data sets not found"):
        report(["heuristics", "--out", str(tmp_path / "out")])
    assert (tmp_path / "out" / "records" / "a9a.P1.jsonl").exists()
    # a file of a built-in's name here: the name is the built-in's, and the line says so
    (tmp_path / "w8a").write_text("1 1:1\n")
    with pytest.raises(SystemExit, match="'w8a' names the built-in data set: --data ./w8a"):
        report(["heuristics", "--data", "w8a", "--out", str(tmp_path / "out")])


def test_report_on_a_users_file_sorted_by_class(tmp_path, monkeypatch):
    """Any LIBSVM file, without the shared data; --rows samples per class, so a file sorted by
    class still gives both classes (the first N rows would hold one)."""
    monkeypatch.setenv("PSVM_SHARED_DATA", str(tmp_path / "none"))
    monkeypatch.setenv("PSVM_CACHE_DIR", str(tmp_path / "cache"))
    bundled = Path(__file__).resolve().parents[1] / "data" / "breast_cancer.train"
    lines = bundled.read_text().splitlines(keepends=True)
    mine = tmp_path / "mine.txt"
    mine.write_text("".join(sorted(lines, key=lambda ln: float(ln.split()[0]))))
    out = tmp_path / "report"
    argv = [
        "heuristics",
        "--data",
        str(mine),
        "--rows",
        "120",
        "--test-rows",
        "0",
        "--ranks",
        "1",
        "--heuristics",
        "none,libsvm,frequent",
        "--reconstructions",
        "single",
        "--selections",
        "second",
        "--repeats",
        "1",
        "--no-plots",
        "--out",
        str(out),
    ]
    assert psvm_report(argv) == 0
    study, records = load_records(out)
    assert [d["name"] for d in study["datasets"]] == ["mine"] and study["seed"] == 0
    psvm = [r for r in records if r["kind"] == "psvm"]
    assert psvm and all(r["returncode"] == 0 for r in psvm)
    md = (out / "REPORT.md").read_text()
    assert "### mine" in md and "No elimination bound" in md
    # one run per configuration: no difference is called beyond a noise never measured
    assert "(0%)" not in md and "one run per configuration, so the noise is not measured" in md
    assert "by more than" not in md and "beyond" not in md


COMMITTED = Path(__file__).resolve().parents[1] / "heuristics"
BUNDLED = ("breast_cancer.train", "breast_cancer.test")


def _committed_a9a(tmp_path: Path) -> Path:
    """The committed study restricted to a9a: real records, no solver run."""
    study = json.loads((COMMITTED / "study.json").read_text())
    study["datasets"] = [d for d in study["datasets"] if d["name"] == "a9a"]
    out = tmp_path / "a9a"
    (out / "records").mkdir(parents=True)
    (out / "study.json").write_text(json.dumps(study))
    for path in (COMMITTED / "records").glob("a9a.*.jsonl"):
        (out / "records" / path.name).write_text(path.read_text())
    return out


def _traced(records, heuristic, ranks):
    (r,) = [
        r
        for r in records
        if r["kind"] == "psvm" and r["repeat"] == 0 and r["ranks"] == ranks
        and (r["heuristic"], r["reconstruction"], r["selection"]) == (heuristic, "single", "second")
    ]  # fmt: skip
    return r["stats"]


def _train(records, heuristic, ranks):
    """Median training seconds (the slowest rank's) of heuristic/single/second over the
    repeats."""
    return np.median([
        r["stats"]["seconds_max"]["train"] for r in records
        if r["kind"] == "psvm" and r["ranks"] == ranks and r["selection"] == "second"
        and (r["heuristic"], r["reconstruction"]) == (heuristic, "single")
    ])  # fmt: skip


def test_summary_and_bound_from_the_committed_records(tmp_path):
    """The bound of benchmarks/elimination_bound.py, from the study's own traces: `none`'s
    share of time before `earliest` has half of the rows out, in REPORT.md and summary.png."""
    from matplotlib.colors import to_rgb
    from PIL import Image

    from heuristics.report import write_report
    from heuristics.report.style import color
    from heuristics.report.summary import bounds, build, rule_ceiling
    from heuristics.report.versus import _per_heuristic, summary_figure, time_figure

    out = _committed_a9a(tmp_path)
    write_report(out)
    for name in ("summary", "time", "active"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "REPORT.md").read_text()
    study, records = load_records(out)
    section = md.split("## Time against `none`, and the bound")[1].split("\n## ")[0]
    assert "](summary.png)" in section and "No elimination bound" not in section
    default = f"{DEFAULT_HEURISTIC}/single"
    header, *body = [
        [c.strip() for c in ln.strip("|").split("|")]
        for ln in section.splitlines()
        if ln.startswith("|") and not ln.startswith("|---")
    ]
    assert header[5] == f"saving of the default `{default}`"
    assert [row[:2] for row in body] == [["a9a", "1"], ["a9a", "2"]]
    for row in body:
        P = int(row[1])
        none, early = _traced(records, "none", P), _traced(records, "earliest", P)
        n = none["values"]["n_samples"]
        half = next(
            i
            for i, a in zip(early["traces"]["iter"], early["traces"]["active"], strict=True)
            if a <= n / 2
        )
        t = none["traces"]
        share = np.interp(half, t["iter"], t["seconds"]) / t["seconds"][-1]
        assert row[2:5] == [f"{half:,}", f"{share:.2f}", f"{1 - share:.0%}"]
        saving = 1 - _train(records, DEFAULT_HEURISTIC, P) / _train(records, "none", P)
        assert row[5] == f"{saving:.0%}" and row[6] == f"{saving / (1 - share):.0%}"
        ceiling = rule_ceiling(t, early["traces"], n)
        assert row[7] == f"{(1 - ceiling) / (1 - share):.0%}"

    # the figures: the default named and in bold, the bound drawn only when there is one
    rows, svc = build(study, records)
    # every heuristic's colour survives the PNG's palette (median cut had merged thin lines)
    pixels = np.asarray(Image.open(out / "active.png").convert("RGB"), dtype=float).reshape(-1, 3)
    for h in {r["heuristic"] for r in rows}:
        rgb = 255 * np.array(to_rgb(color(h)))
        assert (np.abs(pixels - rgb).max(axis=1) <= 10).any(), f"{h}'s colour is missing"
    labels = _per_heuristic(rows)
    assert default in labels and len(labels) == len({lab.split("/")[0] for lab in labels})
    for bound, expect in ((bounds(rows), True), ({}, False)):
        fig, axes = summary_figure(study, rows, labels, bound)
        legend = {t.get_text(): t for t in axes[0][-1].get_legend().get_texts()}
        assert legend[f"{default} (default)"].get_fontweight() == "bold"
        assert ("out of reach of every exact heuristic (elimination bound)" in legend) is expect
        assert any("bound" in t.get_text() for t in axes[0][0].texts) is expect
    fig, axes = time_figure(study, rows, svc)
    ticks = list(axes[0][0].get_yticklabels())
    (mine,) = [t for t in ticks if t.get_text() == f"{default} (default)"]
    assert mine.get_fontweight() == "bold"
    # within a group, fastest first: the geometric mean of time / none over P rises down the axis
    exact = [t.get_text().removesuffix(" (default)") for t in ticks[1:]]
    exact = exact[: exact.index("approximate (no reconstruction)")]
    ratio = {lab: gmean(r["vs_none"] for r in rows if r["label"] == lab) for lab in exact}
    assert [ratio[lab] for lab in exact] == sorted(ratio.values())


def test_elimination_bound_script_prints_the_share(shared_data):
    """benchmarks/elimination_bound.py on heart_scale: the bound, then the default's saving
    against `none` (alternated in one worker), that saving's share of the bound, the share
    without reconstructions and cuts, and the active rows against `earliest`'s."""
    from tests._svm import run_cli

    r = run_cli("benchmarks/elimination_bound.py", ["--data", "heart_scale", "--repeat", "2"], None)
    assert r.returncode == 0, r.stderr[-3000:]
    header, line = r.stdout.strip().splitlines()[-2:]
    assert header.split()[-11:] == [
        "ceiling", "frequent", "s", "saving", "share", "overhead", "s", "share", "w/o",
        "rows/earliest", "ceiling+overhead",
    ]  # fmt: skip
    cells = line.split()
    assert cells[:2] == ["heart_scale", "270"]
    best, saving, share, free = (int(cells[i].rstrip("%")) for i in (6, -6, -5, -3))
    ceiling, paid = int(cells[8].rstrip("%")), int(cells[-1].rstrip("%"))
    assert 0 < best <= 100 and float(cells[-7]) >= 0
    assert abs(share - 100 * saving / best) <= 100 / best + 1  # (each printed rounded)
    assert float(cells[-4]) >= 0 and free >= share and float(cells[-2]) > 0
    assert ceiling > 0 and paid <= ceiling  # (above 100%: savings before the half-way point)
    # the same at another P and thread count (analysis): one worker under mpiexec -n 2
    flags = ["--data", "heart_scale", "--heuristic", "", "--ranks", "2", "--threads", "1"]
    r = run_cli("benchmarks/elimination_bound.py", flags, None)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1].split()[:3] == ["heart_scale", "270", cells[2]]


def test_elimination_bound_without_usable_traces():
    """No bound, not an error: missing traces, or a multiclass run whose traces restart."""
    from heuristics.report.summary import elimination_bound

    none = {"iter": [0, 100, 200], "seconds": [0.0, 1.0, 2.0]}
    early = {"iter": [0, 100, 200], "active": [10, 5, 2]}
    assert elimination_bound(none, early, 10) == {"half_iter": 100, "share": 0.5}
    assert elimination_bound(none, {"iter": [0, 100, 200], "active": [10, 9, 8]}, 10)["share"] == 1
    assert elimination_bound({}, early, 10) is None
    restart = {"iter": [0, 100, 0, 100], "active": [10, 5, 10, 5]}
    assert elimination_bound(none, restart, 10) is None


def test_rule_ceiling_counts_earliests_windows_at_nones_cost_a_row():
    """Each of `earliest`'s iterations costs its active rows at what a row of `none`'s
    window costs at that iteration (from `none`'s trace segments)."""
    from heuristics.report.summary import rule_ceiling

    none = {"iter": [0, 100, 200], "seconds": [0.0, 1.0, 3.0]}  # 1e-3 s, then 2e-3 s a row
    assert rule_ceiling(none, {"iter": [0, 200], "active": [10, 10]}, 10) == pytest.approx(1.0)
    half = {"iter": [0, 200], "active": [5, 5]}
    assert rule_ceiling(none, half, 10) == pytest.approx(0.5)
    # 10, 9.95, ..., 5.05 rows, then 5 (1e-3 s, then 2e-3 s a row-iteration): 752.5 + 1000 ms
    steps = {"iter": [0, 100, 200], "active": [10, 5, 5]}
    assert rule_ceiling(none, steps, 10) == pytest.approx((0.7525 + 1.0) / 3.0)
    # iterations past `none`'s last cost as its last segment's did
    longer = {"iter": [0, 300], "active": [5, 5]}
    assert rule_ceiling(none, longer, 10) == pytest.approx((0.5 + 1.0 + 1.0) / 3.0)


def test_subsets_of_a_user_file_live_in_the_cache_and_follow_its_edits(tmp_path, monkeypatch):
    """The study's samples of a plain file go to psvm's cache, keyed by the file's path,
    size and time: nothing is written beside the user's file, and an edited file gets a new
    sample (the old one was reused by name)."""
    from heuristics.bench import head_path, sample_path

    monkeypatch.setenv("PSVM_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "user" / "d.txt"
    data.parent.mkdir()
    data.write_text("".join(f"{1 - 2 * (k % 2)} 1:{k}\n" for k in range(40)))
    first, head = sample_path(data, 10), head_path(data, 5)
    assert sorted(p.name for p in data.parent.iterdir()) == ["d.txt"]
    assert Path(first).parent == Path(head).parent == tmp_path / "cache"
    assert {ln.split()[0] for ln in Path(first).read_text().splitlines()} == {"1", "-1"}
    data.write_text("".join(f"1 1:{k}\n" for k in range(41)))  # edited: one class now
    again = sample_path(data, 10)
    assert again != first and {ln.split()[0] for ln in Path(again).read_text().splitlines()} == {
        "1"
    }


def test_benchmarks_find_libsvm_on_path_then_in_their_cache(tmp_path, monkeypatch):
    """The benchmarks take LIBSVM's command from PATH, else from the copy an earlier run
    fetched into the user's cache (no second download), else say how to get it."""
    import heuristics.bench as hb

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no apt-get, no LIBSVM
    hb.fetched_libsvm_tools.cache_clear()  # (again at the end: no fake paths left behind)
    with pytest.raises(RuntimeError, match="svm-train not found: apt-get install libsvm-tools"):
        hb.libsvm_tool("svm-train")
    assert hb.libsvm_tool("svm-predict", required=False) is None

    dest = tmp_path / "cache" / "psvm" / "libsvm-tools"
    (dest / "x/usr/bin").mkdir(parents=True)
    for t in hb.LIBSVM_TOOLS:  # programs behind wrappers, the scripts as they are
        (dest / ("x/usr/bin/" + t if t in ("svm-grid", "svm-easy") else t)).write_text("")
    hb.fetched_libsvm_tools.cache_clear()
    assert hb.libsvm_tool("svm-train") == str(dest / "svm-train")
    assert hb.libsvm_tool("svm-grid") == str(dest / "x/usr/bin/svm-grid")

    (tmp_path / "bin").mkdir()
    own = tmp_path / "bin" / "svm-train"
    own.write_text("#!/bin/sh\n")
    own.chmod(0o755)
    assert hb.libsvm_tool("svm-train") == str(own)
    hb.fetched_libsvm_tools.cache_clear()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--ranks", "0"], "--ranks 0: process counts >= 1"),
        (["--ranks", "one"], "--ranks one: process counts >= 1"),
        (["--cache", "0"], "--cache 0: must be a number > 0"),
        (["--cache", "nan"], "--cache nan: must be a number > 0"),
        (["--cache", "inf"], "--cache inf: must be a number > 0"),
        (["--seed", "-1"], "--seed -1: must be >= 0"),
        (
            ["--ranks", "1,2,1", "--repeats", "1", "--heuristics", "none", "--no-plots"],
            "--ranks 1,2,1: P=1 given twice",
        ),
        (["--data", "{train},{test}"], "--data {train} and {test} are both named"),
        (["--heuristics", "bogus,frequent"], "--heuristics bogus: unknown; one of none,"),
        (["--selections", "third"], "--selections third: unknown; one of first,second"),
        (["--build-only"], "--build-only: no study in"),
    ],
)
def test_bad_study_options_stop_before_any_run(tmp_path, args, message):
    """One line before the records folder is touched (--ranks 0 ran one rank labelled P=0;
    --cache 0, nan or inf failed in every run, after the old records were cleared; two files
    of one name went into one data set's records; --seed -1 was numpy's traceback; a P given
    twice wrote its records file twice)."""
    train, test = (Path(__file__).resolve().parents[1] / "data" / f for f in BUNDLED)
    files = dict(train=train, test=test)
    args = [a.format(**files) for a in args]
    out = tmp_path / "study"
    with pytest.raises(SystemExit, match=f"^psvm-report: {re.escape(message.format(**files))}"):
        psvm_report(["heuristics", "--data", str(train), *args, "--out", str(out)])
    assert not out.exists()


@pytest.mark.parametrize(
    "lines, message",
    [
        ("0.5 1:1\n1.25 1:2\n2.5 1:3\n", "labels are continuous, not classes"),
        ("3 1:1\n3 1:2\n", "one class only (3); a classifier needs two"),
    ],
)
def test_a_file_that_is_not_a_classification_stops_before_any_run(tmp_path, lines, message):
    """scikit-learn's SVC, the study's reference, refused it with a traceback mid-study."""
    data = tmp_path / "labels.txt"
    data.write_text(lines)
    out = tmp_path / "study"
    with pytest.raises(
        SystemExit, match=f"^psvm-report: {re.escape(str(data))}: .*{re.escape(message)}"
    ):
        psvm_report(["heuristics", "--data", str(data), "--out", str(out)])
    assert not out.exists()


def test_the_report_names_the_machine_it_ran_on(tmp_path):
    """The core count comes from the study's machine record (it was written as 2)."""
    from heuristics.report import write_report

    out = _committed_a9a(tmp_path)
    study = json.loads((out / "study.json").read_text())
    study["machine"]["cores"] = 8
    (out / "study.json").write_text(json.dumps(study))
    write_report(out)
    md = (out / "REPORT.md").read_text()
    assert "the machine's 8 cores may run other jobs" in md and "has 8 cores" in md
    assert "2 cores" not in md and "2-core" not in md


def test_a_cut_short_record_and_one_p_report_without_a_gap(tmp_path, capsys):
    """A study interrupted while it wrote a record (its last line cut short) still reports,
    leaving that line out with a note; with one P only, the conclusions hold no empty
    sentence about P=2 against P=1 (a user's trial)."""
    from heuristics.report import write_report

    out = _committed_a9a(tmp_path)
    (out / "records" / "a9a.P2.jsonl").unlink()  # (the study stopped before P=2)
    p1 = out / "records" / "a9a.P1.jsonl"
    whole = len([ln for ln in p1.read_text().splitlines() if ln.strip()])
    p1.write_text(p1.read_text().rstrip("\n") + '\n{"dataset": "a9a", "ran')  # cut short
    _, records = load_records(out)
    assert len([r for r in records if r.get("ranks") == 1]) == whole
    assert "its last line is cut short: left out" in capsys.readouterr().err
    write_report(out)
    assert "against P=1 (`none`): ." not in (out / "REPORT.md").read_text()


def test_an_interrupted_study_has_its_report(tmp_path, monkeypatch, capsys):
    """Ctrl-C in the second data set is one line that says how to report the runs so far:
    study.json, written as each data set starts, lets --build-only report what ran and say
    that the study did not finish (it was written at the end only: "no study"); a study
    stopped before its first psvm run is one line."""
    from heuristics import bench

    monkeypatch.setenv("PSVM_CACHE_DIR", str(tmp_path / "cache"))
    train = Path(__file__).resolve().parents[1] / "data" / BUNDLED[0]
    other = tmp_path / "other.txt"
    other.write_text(train.read_text())
    real, calls = bench.run_worker, []

    def worker(P, plan, work):
        calls.append(P)
        if len(calls) > 1:
            raise KeyboardInterrupt  # as a Ctrl-C in the second data set's runs
        return real(P, plan, work)

    monkeypatch.setattr(bench, "run_worker", worker)
    out = tmp_path / "study"
    argv = ["heuristics", "--data", f"{train},{other}", "--rows", "200", "--test-rows", "100",
            "--ranks", "1", "--repeats", "1", "--heuristics", "none,earliest",
            "--reconstructions", "single", "--selections", "second", "--out", str(out)]  # fmt: skip
    assert psvm_report(argv) == 130
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("psvm-report: interrupted; its report so far: psvm-report heuristics")
    assert err.endswith(f" --build-only --out {out}")
    study = json.loads((out / "study.json").read_text())
    assert "finished" not in study and "elapsed_seconds" not in study
    assert [d["name"] for d in study["datasets"]] == ["breast_cancer", "other"]
    assert sorted(p.name for p in out.iterdir()) == ["records", "study.json"]  # no temporary
    assert psvm_report(["heuristics", "--build-only", "--out", str(out)]) == 0
    md = (out / "REPORT.md").read_text()
    assert "**Not finished: the study was interrupted, or is still running.**" in md
    assert "no runs of other P=1" in md
    assert ", not finished: interrupted, or still running (the records hold the runs done)." in md
    assert "### breast_cancer" in md and "### other" not in md
    assert all((out / png).is_file() for png in re.findall(r"\]\(([^)]+\.png)\)", md))
    fits = len((out / "records" / "breast_cancer.svc.jsonl").read_text().splitlines())
    assert f"and {fits} scikit-learn SVC" in md  # (not other's, which the report leaves out)

    calls.append(0)  # a Ctrl-C in the first data set's runs: nothing to report yet
    assert psvm_report([*argv[:-1], str(tmp_path / "early")]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "psvm-report: interrupted; before its first psvm run"
    )

    (out / "records" / "breast_cancer.P1.jsonl").unlink()
    with pytest.raises(SystemExit, match="^psvm-report: the study in .* before its first psvm run"):
        psvm_report(["heuristics", "--build-only", "--out", str(out)])


def test_the_report_folder_is_never_left_half_written_or_stale(tmp_path, monkeypatch, capsys):
    """A user's trial: Ctrl-C while the report was written gave a traceback and left PNGs
    half new; a new study's runs sat beside the old study's REPORT.md; --build-only on a study
    without records wrote a report of 0 runs; a study.json that is no JSON, or an --out that
    is a file, gave tracebacks. Now each is one line, and each file is whole."""
    import heuristics.report as report
    import heuristics.report.plots as plots
    import heuristics.study as study_module

    out = _committed_a9a(tmp_path)
    report.write_report(out)
    before = {p.name: p.read_bytes() for p in out.glob("*.*")}

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(plots, "make_plots", interrupt)
    assert psvm_report(["heuristics", "--build-only", "--out", str(out)]) == 130
    assert capsys.readouterr().err.strip() == (
        "psvm-report: interrupted while writing the report; rebuild it: "
        f"psvm-report heuristics --build-only --out {out}"
    )
    assert {p.name: p.read_bytes() for p in out.glob("*.*")} == before  # no temporary file

    monkeypatch.setattr(study_module, "run_study", interrupt)  # a new study in the same folder
    train = Path(__file__).resolve().parents[1] / "data" / BUNDLED[0]
    assert psvm_report(["heuristics", "--data", str(train), "--out", str(out)]) == 130
    assert sorted(p.name for p in out.iterdir()) == ["records", "study.json"]

    (out / "records").mkdir(exist_ok=True)
    for p in (out / "records").glob("*"):
        p.unlink()
    finished = {**json.loads((out / "study.json").read_text()), "finished": "today"}
    (out / "study.json").write_text(json.dumps(finished))
    with pytest.raises(SystemExit, match="^psvm-report: the study in .* records no psvm run: no"):
        psvm_report(["heuristics", "--build-only", "--out", str(out)])
    (out / "study.json").write_text('{"command": ')
    with pytest.raises(
        SystemExit, match=f"^psvm-report: {re.escape(str(out))}/study.json: not JSON"
    ):
        psvm_report(["heuristics", "--build-only", "--out", str(out)])
    with pytest.raises(SystemExit, match="^psvm-report: --out .*study.json: not a folder$"):
        psvm_report(["heuristics", "--data", str(train), "--out", str(out / "study.json")])


def test_a_report_leaves_no_png_of_an_earlier_one(tmp_path):
    """An --out reused by a study with P=1 only kept imbalance.png of one with P=2 (unlinked,
    stale). Other PNGs in the folder stay, and --no-plots removes none."""
    from heuristics.report import write_report
    from heuristics.report.plots import PLOTS
    from heuristics.report.text import PLOT_TITLES

    assert PLOTS.keys() == PLOT_TITLES.keys()  # the names the report may remove
    out = _committed_a9a(tmp_path)
    write_report(out)
    assert (out / "imbalance.png").is_file()
    (out / "records" / "a9a.P2.jsonl").unlink()
    study = json.loads((out / "study.json").read_text())
    (out / "study.json").write_text(json.dumps({**study, "ranks": [1]}))
    (out / "mine.png").write_bytes(b"a user's")
    (out / "msf").mkdir()
    (out / "msf" / "imbalance.png").write_bytes(b"msf_sweep.py's")
    write_report(out)
    md = (out / "REPORT.md").read_text()
    linked = re.findall(r"\]\(([^)]+\.png)\)", md)
    assert "summary.png" in linked and all((out / png).is_file() for png in linked)
    assert "](imbalance.png)" not in md
    drawn = {f"{name}.png" for name in PLOT_TITLES} - {"imbalance.png"}
    assert {p.name for p in out.glob("*.png")} == drawn | {"mine.png"}
    write_report(out, plots=False)
    assert {p.name for p in out.glob("*.png")} == drawn | {"mine.png"}
    assert (out / "msf" / "imbalance.png").is_file()
    plain = (out / "REPORT.md").read_text()
    assert re.findall(r"\]\(([^)]+\.png)\)", plain) == ["msf/imbalance.png"]
    assert "the figure" in md.lower() and "figure" not in plain  # no text names a missing one


def test_medians_sampling_and_msf_cells_in_the_text():
    """A user's trial: the median share of reconstruction took the upper middle value (with
    two data sets, the largest); the sampling sentence named a test file that no data set
    had; the MSF table printed 17 digits."""
    from heuristics.report.tables import _sampling, _short
    from heuristics.report.text import _med_share

    rows = [{"reconstruct_s": s, "train_s": 2.0} for s in (0.264, 1.074)]
    assert _med_share(rows) == pytest.approx((0.132 + 0.537) / 2)
    none = {"seed": 0, "rows": 100, "test_rows": 50, "datasets": [{"test_file": None}]}
    assert _sampling(none).endswith("on the training rows (no data set has a test file).")
    some = {**none, "datasets": [{"test_file": None}, {"test_file": "t"}]}
    assert _sampling(some).endswith(
        "the test file (on the training rows where a data set has none)."
    )
    assert [_short(c) for c in ("0.12345678901234567", "64", "auto", "inf")] == [
        "0.1235", "64", "auto", "inf"
    ]  # fmt: skip


def test_versions_count_code_changes_not_the_measurements_own_files(tmp_path, monkeypatch):
    """A study removes and rewrites its report, figures and records in the checkout: its
    versions line said "+ 9 modified files" of a tree whose code was clean."""
    import subprocess

    from heuristics import bench

    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    files = ["heuristics/REPORT.md", "heuristics/records/a b.jsonl", "psvm/solver.py"]
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("0\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    monkeypatch.setattr(bench, "CHECKOUT", tmp_path)
    head = bench.git_state()
    assert head is not None and "modified" not in head
    for f in files[:2]:
        (tmp_path / f).write_text("1\n")
    assert bench.git_state() == head
    (tmp_path / files[2]).write_text("1\n")
    assert bench.git_state() == f"{head} + 1 modified files"
    git("checkout", "-q", "--", files[2])  # code moved among the outputs is still a change
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    git("mv", files[2], "benchmarks/results/solver.py")
    assert bench.git_state() == f"{head} + 1 modified files"
