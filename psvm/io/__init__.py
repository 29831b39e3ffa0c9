"""Data layer: LIBSVM files to per-rank CSR shards (docs/design.md, "Data flow")."""

from psvm.io.libsvm_format import (
    LibsvmFormatError,
    ParsedBlock,
    parse_block,
    read_byte_range,
    read_libsvm,
    split_byte_ranges,
    uncompressed_path,
)
from psvm.io.shard import Shard, labels_in_order, load_shard, nnz_balanced_offsets

__all__ = [
    "LibsvmFormatError",
    "ParsedBlock",
    "Shard",
    "labels_in_order",
    "load_shard",
    "nnz_balanced_offsets",
    "parse_block",
    "read_byte_range",
    "read_libsvm",
    "split_byte_ranges",
    "uncompressed_path",
]
