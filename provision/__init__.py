"""provision: make a rented GPU server fast.

Kept import-free: the agent zipapp ships this file to hosts whose Python may be 3.8.
"""

__version__ = "0.1.0"
