"""``psvm-train --solver sgd``: the parallel SGD linear SVM from the command line.

    mpiexec -n 2 psvm-train --solver sgd --lambda 3e-5 --sync-every auto a9a a9a.model

The model is written in LIBLINEAR's text format (see :mod:`psvm.sgd.model`);
``psvm-predict`` recognises it by its first line. Only the names are parsed
at import: this module is imported by ``psvm-train`` for its usage text.
"""

from __future__ import annotations

import time

from psvm.cli._common import (
    SWITCH,
    WEIGHTS,
    UsageError,
    apply_cli_threads,
    flag_named,
    last_output,
    libsvm_class_order,
    number,
    parse_train_args,
    usage,
    warn_unknown_weights,
    write_json,
)

# flag -> (parameter name, kind, help). One table drives parsing and usage (see _common).
# fmt: off
FLAGS = {
    "--solver": ("solver", str, "smo (default) or sgd; the flags below are for sgd"),
    "--lambda": ("alpha", float, "regularisation lambda; LIBLINEAR's C = 1/(n lambda) "
                 "(default 1/n, i.e. C = 1)"),
    "--epochs": ("max_iter", int, "maximum number of epochs (default 1000)"),
    "--sync-every": ("sync_every", str, "local samples between model averages, or auto "
                     "(default auto)"),
    "--msf-target": ("msf_target", float, "auto: target share of time in averages (0.1)"),
    "--schedule": ("learning_rate", str, "optimal (default), pegasos, constant or epoch"),
    "--eta0": ("eta0", float, "step size of the constant schedule (default 0.01)"),
    "--average": ("average", int, "1: weighted average of the iterates (default), 0: last"),
    "--tol": ("tol", float, "stop when the objective improves < tol for 5 epochs (1e-3); "
              "0 never stops early"),
    "--seed": ("random_state", int, "seed of the shuffles (default 0)"),
    "--validation": ("validation", str, "LIBSVM file scored after every epoch"),
    "--n-features": ("n_features", int, "number of features (default: largest index)"),
    "--stats": ("stats", str, "write run statistics as JSON to this file"),
    "-o": ("n_threads", int, "threads per rank (default 0: the node's cores / its ranks)"),
    "-wi": ("class_weight", WEIGHTS, "weight of class i in the hinge loss (default 1)"),
    "-q": ("quiet", SWITCH, "quiet mode (no outputs)"),
}
# fmt: on
USAGE = usage("psvm-train --solver sgd [options] training_set_file [model_file]", FLAGS)


def parse_args(argv: list[str]) -> dict:
    """Strict parsing by FLAGS, then the sgd-only rules."""
    advice = {
        "-v": "cross-validation runs on the kernel solver (--solver smo)",
        "-c": "the SGD solver's regularisation is --lambda (LIBLINEAR's C = 1/(n lambda))",
    }
    opts = parse_train_args(argv, FLAGS, context=" for --solver sgd", advice=advice)
    if opts.get("solver") != "sgd":  # (the first --solver chose this path, a later one not)
        raise UsageError(f"--solver sgd, then --solver {opts.get('solver')}: give it once")
    se = opts.get("sync_every", "auto")
    try:
        opts["sync_every"] = se if se == "auto" else number("--sync-every", se, int)
    except UsageError:
        raise UsageError(f"option --sync-every expects an integer or auto, got {se!r}") from None
    if opts.get("average", 1) not in (0, 1):
        raise UsageError(f"--average {opts['average']}: must be 0 or 1")
    if opts.get("random_state", 0) < 0:
        raise UsageError(f"--seed {opts['random_state']}: must be >= 0")
    return opts


def body(argv: list[str]) -> int:
    """Train on every rank's shard; rank 0 writes the model (and the statistics)."""
    from psvm._params import validate_sgd_params
    from psvm.comm import world
    from psvm.io.atomic import agree_writable
    from psvm.io.shard import load_shard
    from psvm.sgd.model import LinearModel
    from psvm.sgd.msf import make_policy
    from psvm.sgd.problem import SGDState
    from psvm.sgd.trainer import SGDTrainer
    from psvm.stats import Stats, progress_log

    opts = parse_args(argv)
    comm = world()
    cfg_args = _config_args(opts)  # parameter errors before any file is read
    agree_writable(
        comm,
        {"the model file": opts["model"], "the --stats file": opts.get("stats")},
        {"the training file": opts["train"], "the --validation file": opts.get("validation")},
    )
    n_threads = apply_cli_threads(comm, opts, "psvm-train")
    log = progress_log(comm.rank == 0 and not opts["quiet"])
    t0 = time.perf_counter()
    width = opts.get("n_features")
    shard = load_shard(
        comm, opts["train"], n_features=width, width_name="--n-features", model_labels=True
    )
    classes = libsvm_class_order(shard.classes)
    lam = opts.get("alpha", 1.0 / shard.n_samples)
    with flag_named(FLAGS):
        cfg = validate_sgd_params(alpha=lam, **cfg_args)
    stats = Stats()
    stats.values["n_threads"] = n_threads
    prob = _problem(comm, opts, shard, classes, stats, t0)
    state = SGDState.zeros(prob.n_models, shard.n_features, opts.get("random_state", 0), comm.rank)
    policy = make_policy(cfg.sync_every, cfg.msf_target)
    with stats.timer("train"):
        trainer = SGDTrainer(comm, prob, cfg, state, policy, stats, log)
        trainer.run(cfg.max_iter)
        W, w0 = trainer.weights()
    model = LinearModel(W.copy(), w0.copy(), classes)
    report = _report(comm, stats, shard, opts, lam, trainer, policy)
    if comm.rank == 0:
        _write(opts, model, report, trainer, log, t0, comm.size)
    return 0


def _config_args(opts: dict) -> dict:
    """The SGD settings given on the command line (the others: SGDConfig's defaults),
    checked, each error naming its flag; the regularisation waits for the number of rows."""
    from psvm._params import check_class_weights, validate_sgd_params
    from psvm.sgd.problem import SPARSE_INTERCEPT_DECAY

    given = ("learning_rate", "eta0", "sync_every", "msf_target", "max_iter", "tol", "average")
    cfg_args = {k: opts[k] for k in given if k in opts}
    if cfg_args.get("tol") == 0:  # 0: no early stop; < 0 or NaN: refused
        cfg_args["tol"] = None
    cfg_args["intercept_decay"] = SPARSE_INTERCEPT_DECAY
    with flag_named(FLAGS):
        validate_sgd_params(**cfg_args)
        check_class_weights(opts["class_weight"], zero_ok=True)
    return cfg_args


def _problem(comm, opts: dict, shard, classes, stats, t0: float):
    """The SGD problem of the shard (and of the --validation file), its memory checked; the
    load's seconds since ``t0`` in ``stats``."""
    import numpy as np

    from psvm.io.shard import load_shard
    from psvm.sgd.model import to_width
    from psvm.sgd.problem import check_model_memory, make_problem

    # codes so that, with two classes, the first label is the positive one (LIBLINEAR)
    order = classes[::-1] if classes.size == 2 else classes
    codes = _codes(shard.y, order)
    warn_unknown_weights(comm, opts["class_weight"], order)
    cw = np.array([opts["class_weight"].get(float(c), 1.0) for c in order])
    validation = None
    if "validation" in opts:
        vs = load_shard(comm, opts["validation"], min_classes=0)  # scored as LIBLINEAR predicts:
        validation = (to_width(vs.X, shard.n_features), _codes(vs.y, order), None)  # any width
    stats.seconds["load"] = time.perf_counter() - t0
    prob = make_problem(comm, shard.X, codes, classes.size, class_weight=cw, validation=validation)
    width = opts.get("n_features")
    source = (
        f"--n-features {width}"
        if width
        else f"{opts['train']!r} has feature indices up to {shard.n_features}"
    )
    check_model_memory(comm, prob.n_models, shard.n_features, source)
    return prob


def _report(comm, stats, shard, opts: dict, lam: float, trainer, policy) -> dict:
    """The run's statistics over the ranks (collective), with the settings that shaped it."""
    from psvm.stats import reduce_stats

    report = reduce_stats(comm, stats)
    report["values"].update(
        solver="sgd",
        n_samples=shard.n_samples,
        n_features=shard.n_features,
        alpha=lam,
        C=1.0 / (shard.n_samples * lam),
        sync_every=opts["sync_every"],
        period=int(trainer.period),
        converged=bool(trainer.converged),
        msf=policy.state(),
    )
    return report


def _write(opts: dict, model, report: dict, trainer, log, t0: float, ranks: int) -> None:
    """Rank 0's files (the model, the --stats JSON) and closing lines."""
    from psvm.io.linear_model_file import write_linear_model

    with last_output(opts["model"]):
        write_linear_model(opts["model"], model)
    if "stats" in opts:
        with last_output(opts["stats"]):
            write_json(opts["stats"], report)
    if log is not None:
        c = report["counts"]
        log(
            f"{c['n_iter']} epochs, {c.get('n_sync', 0)} model averages, objective "
            f"{trainer.state.objectives[-1]:.6g}"
        )
        log(f"Wrote {opts['model']} in {time.perf_counter() - t0:.2f}s on {ranks} rank(s)")


def _codes(labels, order):
    """The position of each label in ``order`` (int64 array); -1 for a label not in it."""
    import numpy as np

    sort = np.argsort(order)
    k = np.minimum(np.searchsorted(order[sort], labels), order.size - 1)
    return np.where(order[sort][k] == labels, sort[k], -1).astype(np.int64)
