"""The sitecustomize.py that `provision train` puts first on the run's PYTHONPATH (the file is
copied into the run dir; this package only carries it in the agent)."""
