"""The bridge to Ansible's own modules: a module provision does not implement runs as Ansible's
module on the host. provision never imports ansible (GPL-3.0): `payload.py` runs the separate
program `gpl/build_payload.py` inside Ansible's Python and reads its JSON."""
