"""Controller side of multi-host work: which network the hosts meet on (fabric.py) and the
bounded TCP probes that check it (probe.py). Used by `provision bench --allreduce` and
`provision train --distributed`."""
