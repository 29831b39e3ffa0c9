"""The sample-elimination heuristics study of psvm: its runner, its report and ``psvm-report``.

Installed beside :mod:`psvm` (which never imports it) so that ``psvm-report``
runs from a wheel, not only from a checkout. The records, ``REPORT.md`` and
PNGs next to these modules are the study's output: they stay in the
repository and are not packaged.

- :mod:`heuristics.bench`: what the study and ``benchmarks/`` share (data
  sets, launching :mod:`heuristics.worker` under ``mpiexec``, machine info);
- :mod:`heuristics.worker`: many psvm-train runs inside one ``mpiexec`` job;
- :mod:`heuristics.study`: the grid and the runner, writing ``records/``;
- :mod:`heuristics.report`: records → ``REPORT.md`` and PNGs;
- :mod:`heuristics.cli`: the ``psvm-report`` command.
"""
