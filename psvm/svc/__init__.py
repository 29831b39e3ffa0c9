"""Distributed SMO solver for C-SVC."""
