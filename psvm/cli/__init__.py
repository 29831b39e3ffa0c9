"""LIBSVM-style command lines: psvm-train and psvm-predict."""
