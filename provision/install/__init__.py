"""Matched PyTorch installs into managed environments (docs/install.md).

(the env itself -- where it lives on the host, its generations and state -- is
 provision/remote/environment.py's: the commands that only look for it need no install module)
mirrors.py      mirror presets, index kinds, probing targets, trusted hosts, credential masking
pip.py          pip command lines for the host (values quoted, secrets via stdin), failure lines
planning.py     the host interpreter, the resolver behind one adapter, env fingerprints
installer.py    install(): the flow the CLI and the install_torch module share, by seam:
  outcome.py        options, result, errors
  install_plan.py   planning: pins, fingerprint, the index that serves the plan, a lock's plan
  build.py          building aside: the new generation's venv, pip or uv run detached and polled
  verification.py   does an env work (verify_torch), a kept base interpreter, the new generation
  switching.py      the env's lock, the one-rename switch, the manifest, pruning
locking.py      create_lock() / create_lock_offline(): provision.lock from the host or offline
lockfile.py     provision.lock: format, validation, the platform check
relay.py        --relay: resolve + download on the controller, one tar stream to the host
project.py      provision.yml
"""
