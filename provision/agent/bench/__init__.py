"""Host-side benchmark: one `bench` agent command, one file per thing measured.

run.py orchestrates the sections (compute, amp, memory, transfer, dataloader, storage, network,
distributed, under_load); each section module exposes `measure(...) -> dict` and must work on
a CPU-only host so the same code runs in tests. The request/response schema is in docs/bench.md.
"""
