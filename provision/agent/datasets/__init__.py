"""Dataset staging on the host: sources and layouts -> manifest -> LMDB (see docs/datasets.md).

ingest.py holds the agent commands and dispatches by source kind; builder.py the core every kind
builds on (one LMDB built, resumed or skipped; a path on the host staged), download.py the
http(s) kind; reader.py is the stdlib + lmdb reader that is also written beside every dataset as
provision_lmdb.py.
"""

# Here, not in ingest.py: the controller's `stage` command reads it without importing the ingest.
DEFAULT_STALL = 120.0  # seconds without any sign of life before a stage is taken as stalled
