"""Host-side code, shipped once per content hash (unpacked on the host) and run with the HOST's Python (3.8+).

Rules: stdlib at the core; torch / pynvml / lmdb only where importable on the host; never import
controller code (fabric, rich, jinja2, provision.* outside provision.agent).
"""
