"""psvm-train: LIBSVM's svm-train, on one process or under ``mpiexec -n P``.

mpiexec -n 2 psvm-train -c 1 -g 0.05 a9a a9a.model
"""

from __future__ import annotations

import sys
import time

from psvm._params import ALL_KERNELS, CLASSIFIERS, REGRESSORS, SVM_TYPES
from psvm.cli._common import (
    LAPLACE,
    SWITCH,
    WEIGHTS,
    UsageError,
    apply_cli_threads,
    flag_named,
    last_output,
    libsvm_class_order,
    parse_train_args,
    run_main,
    split_options,
    switches,
    usage,
    warn_unknown_weights,
    write_json,
)
from psvm.cli.train_sgd import FLAGS as SGD_FLAGS
from psvm.cli.train_sgd import USAGE as SGD_USAGE

KERNEL_CODES = {code: name for name, code in ALL_KERNELS.items()}  # svm-train's -t
SVM_TYPE_CODES = dict(enumerate(SVM_TYPES))  # svm-train's -s
CV_PARALLEL = {"auto": None, "folds": True, "rows": False}  # -> cross_validate's parallel
MAX_ITER_WARNING = "WARNING: reaching max number of iterations"  # svm.cpp
TOO_FEW_MARKS = (  # svm_one_class_probability's warning
    "WARNING: number of positive or negative decision values <5; too few to do a "
    "probability estimation."
)

# flag -> (parameter name, kind, help). One table drives parsing and usage (see _common).
FLAGS = {
    "-s": (
        "svm_type",
        int,
        "svm_type: 0 C-SVC (default), 1 nu-SVC, 2 one-class SVM, 3 epsilon-SVR, 4 nu-SVR",
    ),
    "-t": (
        "kernel",
        int,
        "kernel_type: 0 linear, 1 polynomial, 2 rbf (default), 3 sigmoid, "
        "4 precomputed (rows 'label 0:serial 1:K(x,x1) ... l:K(x,xl)')",
    ),
    "-d": ("degree", int, "degree in kernel function (default 3)"),
    "-g": ("gamma", float, "gamma in kernel function (default 1/num_features)"),
    "-r": ("coef0", float, "coef0 in kernel function (default 0)"),
    "-c": ("C", float, "cost: the parameter C of C-SVC, epsilon-SVR and nu-SVR (default 1)"),
    "-n": ("nu", float, "nu: the parameter nu of nu-SVC, one-class SVM and nu-SVR (default 0.5)"),
    "-p": ("epsilon", float, "epsilon: the loss's tube in epsilon-SVR (default 0.1)"),
    "-e": ("tol", float, "epsilon: tolerance of termination criterion (default 0.001)"),
    "-m": ("cache_size", float, "cachesize: kernel cache in MB per rank (default 100)"),
    "-h": ("shrinking", int, "shrinking: 0 or 1 (default 1); -h alone or --help: this usage"),
    "-b": ("probability", int, "probability_estimates: train a model for them, 0 or 1 (default 0)"),
    "-v": ("n_folds", int, "n-fold cross validation mode: prints the accuracy, writes no model"),
    "--seed": ("seed", int, "seed of the -v and -b 1 fold shuffles (default 0; not rand())"),
    "--cv-parallel": ("cv_parallel", str, "-v: folds, rows or auto (default; docs/cli.md)"),
    "-o": ("n_threads", int, "threads per rank (default 0: the node's cores / its ranks)"),
    "--heuristic": ("heuristic", str, "elimination heuristic (default frequent; -h 0: none)"),
    "--reconstruction": (
        "reconstruction",
        str,
        "single, multi or approximate (default single; multi for -s 3 and 4)",
    ),
    "--selection": ("selection", str, "working set selection: first or second (default second)"),
    "--max-iter": (
        "max_iter",
        int,
        "iteration limit per binary problem (default: svm-train's max(10^7, 100 l); -1: none)",
    ),
    "--n-features": ("n_features", int, "number of features (default: largest index in the file)"),
    "--stats": ("stats", str, "write run statistics as JSON to this file"),
    "--checkpoint": ("checkpoint", str, "save the solver state here now and then and at SIGTERM"),
    "--checkpoint-seconds": ("checkpoint_seconds", float, "seconds between checkpoints (600)"),
    "--checkpoint-iters": ("checkpoint_iters", int, "also every that many iterations (0: off)"),
    "--resume": ("resume", SWITCH, "continue from the --checkpoint file if it exists"),
    "--solver": ("solver", str, "smo (default: kernel SVM) or sgd (linear SVM, see below)"),
    "-wi": ("class_weight", WEIGHTS, "set the parameter C of class i to weight*C (default 1)"),
    "-q": ("quiet", SWITCH, "quiet mode (no outputs)"),
}
# what to use instead of options of related tools psvm-train lacks (others get a near flag)
ADVICE = {
    "-u": "that is ThunderSVM's GPU id; psvm runs on CPU cores: more ranks with mpiexec -n P, "
    "threads per rank with -o",
    # the linear solver's own flags: the kernel solver (the default) has none of them
    **{flag: "it is an option of --solver sgd" for flag in SGD_FLAGS if flag not in FLAGS},
}
USAGE = (
    usage("Usage: psvm-train [options] training_set_file [model_file]", FLAGS) + "\n\n" + SGD_USAGE
)


def parse_args(argv: list[str]) -> dict:
    """Strict LIBSVM-style parsing by FLAGS, then the checks of the smo path."""
    opts = parse_train_args(argv, FLAGS, advice=ADVICE)
    if opts.get("solver", "smo") == "sgd":  # (the first --solver chose this path, a later one not)
        raise UsageError("--solver smo, then --solver sgd: give it once")
    if opts.get("solver", "smo") != "smo":
        raise UsageError(f"--solver {opts['solver']}: must be smo or sgd")
    s = opts.get("svm_type", 0)
    if s not in SVM_TYPE_CODES:
        raise UsageError(f"-s {s}: svm_type must be 0, 1, 2, 3 or 4")
    opts["svm_type"] = SVM_TYPE_CODES[s]
    b = opts.get("probability", 0)
    if b not in (0, 1):
        raise UsageError(f"-b {b}: probability_estimates must be 0 or 1")
    if "kernel" in opts:
        if opts["kernel"] not in KERNEL_CODES:
            raise UsageError(f"-t {opts['kernel']}: kernel_type must be 0, 1, 2, 3 or 4")
        opts["kernel"] = KERNEL_CODES[opts["kernel"]]
    if opts.get("kernel") == "precomputed" and "n_features" in opts:
        raise UsageError("--n-features is for feature vectors: -t 4 rows hold every column")
    if opts.get("n_folds", 2) < 2:  # LIBSVM's message
        raise UsageError(f"-v {opts['n_folds']}: n-fold cross validation: n must be >= 2")
    if opts.get("cv_parallel", "auto") not in CV_PARALLEL:
        raise UsageError(f"--cv-parallel {opts['cv_parallel']}: must be auto, folds or rows")
    if opts.get("seed", 0) < 0:  # (numpy's generators take no negative seed)
        raise UsageError(f"--seed {opts['seed']}: must be >= 0")
    if opts["resume"] and "checkpoint" not in opts:
        raise UsageError("--resume needs --checkpoint FILE: the state to resume from")
    for flag in ("checkpoint_seconds", "checkpoint_iters"):
        if flag in opts and "checkpoint" not in opts:
            raise UsageError(f"--{flag.replace('_', '-')} needs --checkpoint FILE")
    if "n_folds" in opts and ("checkpoint" in opts or opts["resume"]):
        raise UsageError("-v trains one model per fold and keeps no checkpoint: drop --checkpoint")
    if opts.get("shrinking", 1) not in (0, 1):
        raise UsageError(f"-h {opts['shrinking']}: shrinking must be 0 or 1")
    if opts.get("shrinking", 1) == 0:
        if opts.get("heuristic", "none") != "none":
            raise UsageError(f"-h 0 contradicts --heuristic {opts['heuristic']}")
        opts["heuristic"] = "none"
    elif "shrinking" in opts and opts.get("heuristic") == "none":
        raise UsageError("-h 1 contradicts --heuristic none")
    return opts


def solver_of(argv: list[str]) -> str:
    """The first ``--solver`` value, read with parse_args's token rules."""
    pairs, _ = split_options(argv, switches(FLAGS) | switches(SGD_FLAGS))
    return next((value for flag, value in pairs if flag == "--solver" and value is not None), "smo")


def svc_params(opts: dict) -> dict:
    """The validated C-SVC parameters of parsed options, LIBSVM's defaults filled in."""
    from psvm._params import DEFAULT_HEURISTIC, validate_svc_params

    # as svm-train: -g 0 is its default, 1/num_features; a value the kernel or the type does
    # not use (gamma of a linear kernel, C of nu-SVC) is not checked
    kernel = opts.get("kernel", "rbf")
    gamma = opts.get("gamma", 0)
    gamma = "auto" if gamma == 0 or kernel not in ("poly", "rbf", "sigmoid") else gamma
    uses_C = opts["svm_type"] not in ("nu_svc", "one_class")
    with flag_named(FLAGS):  # 'option -d: degree must be >= 0, got -1'
        return validate_svc_params(
            svm_type=opts["svm_type"],
            nu=opts.get("nu", 0.5),
            epsilon=opts.get("epsilon", 0.1),
            C=opts.get("C", 1.0) if uses_C else 1.0,
            kernel=kernel,
            degree=opts.get("degree", 3) if kernel == "poly" else 3,
            gamma=gamma,
            coef0=opts.get("coef0", 0.0),
            tol=opts.get("tol", 1e-3),
            cache_size=opts.get("cache_size", 100.0),
            max_iter=opts.get("max_iter"),  # None: svm-train's limit
            selection=opts.get("selection", "second"),
            heuristic=opts.get("heuristic", DEFAULT_HEURISTIC),
            reconstruction=opts.get("reconstruction"),  # None: the type's default
            class_weight=opts["class_weight"],
        )


def _body(argv: list[str]) -> int:
    if solver_of(argv) == "sgd":
        from psvm.cli.train_sgd import body

        return body(argv)

    from psvm.comm import world
    from psvm.io.atomic import agree_writable
    from psvm.stats import Stats, progress_log
    from psvm.svc.checkpoint import make_checkpoint_config

    opts = parse_args(argv)
    comm = world()
    params = svc_params(opts)
    checkpoint = make_checkpoint_config(
        opts.get("checkpoint"),
        opts.get("checkpoint_seconds", 600.0),
        opts.get("checkpoint_iters", 0),
        opts["resume"],
    )
    cv = "n_folds" in opts  # -v: no model is written, as svm-train
    agree_writable(
        comm,
        {
            "the model file": None if cv else opts["model"],
            "the --stats file": opts.get("stats"),
            "the --checkpoint file": opts.get("checkpoint"),
        },
        {"the training file": opts["train"]},
    )
    n_threads = apply_cli_threads(comm, opts, "psvm-train")
    log = progress_log(comm.rank == 0 and not opts["quiet"])
    t0 = time.perf_counter()
    shard, classes = _load(comm, opts, params, log)
    stats = Stats()
    stats.values["n_threads"] = n_threads
    stats.seconds["load"] = time.perf_counter() - t0
    with stats.timer("train"):
        if cv:
            result = _cross_validate(comm, opts, shard, params, classes, stats, log)
        else:
            result = _fit(comm, opts, shard, params, classes, checkpoint, stats, log)
            result.index_base = shard.index_base  # the file's indices, written back as read
    _finish(comm, opts, shard, result, stats, log, t0)
    return 0


def _load(comm, opts: dict, params: dict, log):
    """This rank's shard of the training file and, for the classifiers, the classes in
    LIBSVM's order (collective)."""
    from psvm.io.shard import load_shard
    from psvm.svc.training import scale_hint

    gram = "train" if params["kernel"] == "precomputed" else None  # LIBSVM's 0:serial rows
    classify, classes = opts["svm_type"] in CLASSIFIERS, None
    # one-class files often hold one label, regression files any values: only the
    # classifiers need two classes
    shard = load_shard(
        comm,
        opts["train"],
        n_features=opts.get("n_features"),
        width_name="--n-features",
        gram=gram,
        min_classes=2 if classify else 1,
        allow_zero=True,  # feature index 0, as svm-train reads it
        model_labels=classify,  # (checked before training, not when the model is written)
    )
    if shard.index_base == 0 and params["gamma"] == "auto":  # svm-train's 1 / max_index
        max_index = shard.n_features - 1
        params["gamma"] = 1.0 / max_index if max_index > 0 else 0.0
    if classify:
        classes = libsvm_class_order(shard.classes)
        warn_unknown_weights(comm, opts["class_weight"], classes)
    hint = scale_hint(comm, shard.X, params)
    if hint is not None and log is not None:
        print(f"psvm-train: note: {hint}", file=sys.stderr, flush=True)
    return shard, classes


def _fit(comm, opts: dict, shard, params: dict, classes, checkpoint, stats, log):
    """The model, with -b 1's probability information (collective)."""
    from psvm.svc.checkpoint import folds_after, saved_before_folds
    from psvm.svc.multiclass import fit_ovo
    from psvm.svc.single import fit_single

    probability, seed = opts.get("probability"), opts.get("seed", 0)
    if classes is not None:
        if probability:  # the pairs saved before the folds, which keep no checkpoint
            checkpoint = saved_before_folds(checkpoint)
        model, _ = fit_ovo(
            comm, shard, params, classes, stats=stats, log=log, checkpoint=checkpoint
        )
        if probability:  # LIBSVM's pairwise sigmoids, 5-fold internal CV
            with folds_after(checkpoint):
                from psvm.svc.platt import add_probability

                add_probability(
                    comm, shard, params, classes, model, seed=seed, stats=stats, log=log
                )
        return model
    sigma = None
    if probability and opts["svm_type"] in REGRESSORS:  # svm_svr_probability: a Laplace sigma
        from psvm.cross_validation import fold_count
        from psvm.svc.platt import N_FOLDS, fit_svr_sigma  # by 5-fold CV, before the model
        from psvm.svc.training import solver_config

        n_folds = fold_count(comm, N_FOLDS, shard.n_samples)  # (svm_cross_validation's)
        gamma = solver_config(comm, shard, params).gamma  # the whole set's
        sigma = fit_svr_sigma(comm, shard, params, gamma, n_folds, seed=seed, stats=stats, log=log)
        if log is not None:
            log(f"{LAPLACE}= {sigma:g}")  # svm-train's spacing
    model, _ = fit_single(comm, shard, params, stats=stats, log=log, checkpoint=checkpoint)
    if probability and opts["svm_type"] == "one_class":
        _density_marks(comm, shard, model)
    elif sigma is not None:
        model.meta["probA"] = [sigma]
    return model


def _finish(comm, opts: dict, shard, result, stats, log, t0: float) -> None:
    """Rank 0 writes the model (or prints -v's lines) and the statistics (collective)."""
    from psvm.io.model_file import write_model
    from psvm.stats import hit_rate, reduce_stats

    cv = "n_folds" in opts
    # svm-train's Solver prints this to stderr whatever -q says; psvm once a run, at the end
    # (a solve of another rank's folds counts too: the max over ranks)
    capped = comm.max_(int(stats.counts.get("n_max_iter", 0)))
    report = reduce_stats(comm, stats)
    if "n_iter_own" in report["counts"]:  # fold-parallel -v: every rank's folds, summed
        report["counts"]["n_iter"] = report["counts"].pop("n_iter_own")
    report["values"].update(
        n_samples=shard.n_samples,
        n_features=shard.n_features,
        cache_hit_rate=hit_rate(report["counts"]),
    )
    if not cv:
        n_sv = int(result.support_vectors.shape[0])
        report["values"].update(n_support=n_sv, objective=result.meta["objective"])
        body = _sv_lines(comm, result)
    if comm.rank != 0:
        return
    if capped:
        print(MAX_ITER_WARNING, file=sys.stderr, flush=True)
    if cv:
        print("\n".join(result), flush=True)  # also under -q, as svm-train
        report["values"]["cross_validation"] = result
    else:
        with last_output(opts["model"]):
            write_model(opts["model"], result, body)
    if "stats" in opts:
        with last_output(opts["stats"]):
            write_json(opts["stats"], report)
    if log is not None and not cv:
        if result.svm_type in CLASSIFIERS:
            log(f"Total nSV = {n_sv}")  # svm-train: no total for the other types
        log(f"Wrote {opts['model']} in {time.perf_counter() - t0:.2f}s on {comm.size} rank(s)")


def _sv_lines(comm, model) -> str | None:
    """The model file's SV lines on rank 0, None elsewhere (collective): each rank formats
    its share of the support vectors (every rank holds the model), rank 0 gathers them."""
    import numpy as np

    from psvm.io.model_file import sv_lines

    n = model.support_vectors.shape[0]
    lo, hi = n * comm.rank // comm.size, n * (comm.rank + 1) // comm.size
    text = np.frombuffer(sv_lines(model, lo, hi).encode("ascii"), dtype=np.uint8)
    whole = comm.gatherv(text)
    return None if whole is None else whole.tobytes().decode("ascii")


def _density_marks(comm, shard, model) -> None:
    """-b 1 -s 2: LIBSVM 3.3x's density marks into ``model`` (collective), or its warning
    (even under -q, as svm-train) and no marks when too few rows fall on either side."""
    from psvm.svc.platt import fit_density_marks

    marks = fit_density_marks(comm, shard, model)
    if marks is not None:
        model.meta["prob_density_marks"] = marks.tolist()
    elif comm.rank == 0:
        print(TOO_FEW_MARKS, file=sys.stderr, flush=True)


def _cross_validate(comm, opts, shard, params, classes, stats, log) -> list[str]:
    """-v n: LIBSVM's folds (stratified for the classifiers), one model per fold; its result
    lines (collective)."""
    from functools import partial

    from psvm.cross_validation import (
        cross_validate,
        fold_count,
        fold_parallel,
        result_lines,
        single_fit_predict,
        svc_fit_predict,
    )

    n_folds = fold_count(comm, opts["n_folds"], shard.n_samples)
    parallel = CV_PARALLEL[opts.get("cv_parallel", "auto")]
    if parallel is None:
        parallel = fold_parallel(comm, shard, n_folds)
    stats.values["fold_parallel"] = parallel
    svm_type = params["svm_type"]
    seed = opts.get("seed", 0)
    if svm_type in CLASSIFIERS:  # -b 1: each fold's model predicts its most probable class
        from psvm.svc.platt import add_probability

        sigmoids = partial(add_probability, seed=seed) if opts.get("probability") else None
        make = partial(
            svc_fit_predict, params=params, classes=classes, stats=stats, probability=sigmoids
        )
    else:  # LIBSVM: folds at random (not stratified); -b 1 leaves their predictions alone
        make, classes = partial(single_fit_predict, params=params, stats=stats), None
    target = cross_validate(comm, shard, n_folds, seed, make, classes, log=log, parallel=parallel)
    if parallel:  # each rank ran its own folds: no lockstep traces, own iteration counts
        stats.traces.clear()
        stats.counts["n_iter_own"] = stats.counts.pop("n_iter", 0)
    return result_lines(comm, shard.y, target, regression=svm_type in REGRESSORS)


def main(argv: list[str] | None = None) -> int:
    no_value = frozenset(switches(FLAGS) | switches(SGD_FLAGS))
    return run_main("psvm-train", USAGE, _body, argv, (frozenset({"-o"}), no_value))


if __name__ == "__main__":
    sys.exit(main())
