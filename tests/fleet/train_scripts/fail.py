"""Fails after a few lines of output."""
import sys

for i in range(5):
    print("working on batch %d" % i)
print("ValueError: shapes (8, 3) and (4, 2) do not match -- marker-7f3a", file=sys.stderr)
sys.exit(3)
