"""Modules: one file per domain, each module a small class (see base.py). Every file here is
imported by the registry on first use, so adding a module is adding a file."""
