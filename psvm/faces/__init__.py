"""What the two scikit-learn faces, :class:`psvm.SVC` and :class:`psvm.SGDSVC`, share.

One input path serves both: :mod:`~psvm.faces.checks` checks one rank's
arguments, :mod:`~psvm.faces.agreement` makes the ranks agree on errors and on
the facts of the whole training set, and :mod:`~psvm.faces.fit_input` keeps
this rank's rows. :mod:`~psvm.faces.params` holds the parameters the solvers
never see, :mod:`~psvm.faces.results` turns a fitted model into the faces'
outputs.
"""
