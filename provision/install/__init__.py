"""Matched PyTorch installs into managed environments (docs/install.md).

environment.py  where the env lives on the host; build aside, switch atomically, keep the previous
mirrors.py      mirror presets, index kinds, probing targets, trusted hosts, credential masking
pip.py          pip command lines for the host (values quoted, secrets via stdin), failure lines
planning.py     the host interpreter, the resolver behind one adapter, env fingerprints
installer.py    install() / create_lock(): the flow the CLI and the install_torch module share
lockfile.py     provision.lock: format, validation, the platform check
relay.py        --relay: resolve + download on the controller, one tar stream to the host
project.py      provision.yml
"""
