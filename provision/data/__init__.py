"""Read staged datasets: `from provision.data import LMDBDataset, decode`.

The same reader is written beside every staged dataset on the host as `provision_lmdb.py`, so
training scripts there need only py-lmdb, not provision.
"""

from provision.agent.datasets.reader import (
    FORMAT_VERSION,
    LMDBDataset,
    decode,
    decode_tensor,
    open_env,
    read_meta,
)

__all__ = ["FORMAT_VERSION", "LMDBDataset", "decode", "decode_tensor", "open_env", "read_meta"]
