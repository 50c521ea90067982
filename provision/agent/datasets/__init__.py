"""Dataset staging on the host: sources and layouts -> manifest -> LMDB (see docs/datasets.md).

ingest.py holds the agent commands; reader.py is the stdlib + lmdb reader that is also written
beside every dataset as provision_lmdb.py.
"""

# Here, not in ingest.py: the controller's `stage` command reads it without importing the ingest.
DEFAULT_STALL = 120.0  # seconds without any sign of life before a stage is taken as stalled
