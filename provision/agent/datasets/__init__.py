"""Dataset staging on the host: sources and layouts -> manifest -> LMDB (see docs/datasets.md).

ingest.py holds the agent commands; reader.py is the stdlib + lmdb reader that is also written
beside every dataset as provision_lmdb.py.
"""
