#!/usr/bin/env bash
# The one command for tests: install what they need, then run pytest (arguments pass through).
#
#   bash scripts/test.sh                               # everything, in parallel workers
#   bash scripts/test.sh --quick                       # the inner loop: unit tests not marked slow (< 3 min)
#   bash scripts/test.sh tests/unit -q                 # a subset (serial unless PROVISION_TEST_WORKERS is set)
#   bash scripts/test.sh -m "not fleet"                # no SSH test fleet
#
# The whole suite runs in PROVISION_TEST_WORKERS pytest-xdist workers (default: twice the cores,
# at least 2; most tests wait on SSH hosts, not on the CPU), one test file per worker at a time
# (--dist loadfile: a file's module fixtures, its fleet included, stay in one process).
# PROVISION_TEST_WORKERS=0 runs serially.
# As root on Debian/Ubuntu it apt-installs the packages below (only when one is missing). Not
# root: the apt step is skipped and tests marked `fleet` skip. Python: $PYTHON, else python3;
# when that is a distro Python that refuses pip (PEP 668), a venv is made for it outside the repo.
# Env: PYTHON, PROVISION_TEST_VENV (venv path), PROVISION_TEST_REINSTALL=1 (force pip install).
set -euo pipefail

# Other test areas add their system packages here.
APT_PACKAGES=(
  openssh-server # the fleet's sshd
  iproute2       # ip netns, bridge, veth, tc
  util-linux     # unshare, nsenter
  openssl        # fleet.set_password hashes passwords
  procps         # ps/pgrep: the "no secret in the process list" checks
  python3        # Debian's python3 is the test hosts' python
  python3-venv
  chromium       # HTML report rendering tests
  debootstrap    # the fleet's Debian-bullseye root filesystem host
  sudo           # non-root fleet users with sudo
  tmux htop git-lfs rsync  # base.yml's tools: fleet hosts share this machine's /usr, offline
  sshfs          # provision train's io_bound test: a real network filesystem between fleet hosts
  nano bash-completion mlocate  # what roles of tests/roles_corpus install (twins share this /, offline)
)
TORCH_PIN="2.13.0"

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO="$(pwd)"
say() { printf '[test.sh] %s\n' "$*" >&2; }

# -- system packages ------------------------------------------------------------------------
install_apt_packages() {
  if [ "$(id -u)" != 0 ]; then
    say "not root: skipping apt packages (${APT_PACKAGES[*]}); fleet tests will skip"
    return
  fi
  if ! command -v apt-get >/dev/null; then
    say "no apt-get: install these yourself if tests need them: ${APT_PACKAGES[*]}"
    return
  fi
  local missing=() pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  if [ "${#missing[@]}" = 0 ]; then
    return
  fi
  say "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q </dev/null
  apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
}

# -- python -----------------------------------------------------------------------------------
pick_python() {
  local py="${PYTHON:-python3}"
  if ! command -v "$py" >/dev/null; then
    say "no $py found; install python3 (>= 3.10) or set PYTHON"
    exit 2
  fi
  # A distro Python outside a venv refuses `pip install` (PEP 668): use a venv of our own.
  if "$py" - <<'EOF'
import os, sys, sysconfig
managed = os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))
sys.exit(0 if managed and sys.prefix == sys.base_prefix else 1)
EOF
  then
    local venv="${PROVISION_TEST_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/provision/test-venv}"
    if [ ! -x "$venv/bin/python" ]; then
      say "creating venv $venv (the system python3 is externally managed)"
      "$py" -m venv "$venv"
    fi
    py="$venv/bin/python"
  fi
  PY="$(command -v "$py")"
}

install_python_packages() {
  local pip=("$PY" -m pip install --quiet --disable-pip-version-check)
  [ "$(id -u)" = 0 ] && pip+=(--root-user-action=ignore)
  # Reinstall only when pyproject.toml changed or the install is gone/elsewhere: pip's resolver
  # costs tens of seconds even when nothing is to do.
  local stamp_dir="${XDG_CACHE_HOME:-$HOME/.cache}/provision"
  local stamp
  stamp="$stamp_dir/test-install-$(printf '%s\n' "$PY" "$REPO" | cat - pyproject.toml | sha256sum | cut -c1-16)"
  local where
  # Asked from / so the answer is the installed one, not this checkout found through the cwd
  # (an editable install of a clone since deleted leaves `provision` importable only from here).
  where="$(cd / && "$PY" -c 'import provision, pytest, pytest_timeout, os; print(os.path.dirname(os.path.dirname(provision.__file__)))' 2>/dev/null || true)"
  if [ "${PROVISION_TEST_REINSTALL:-0}" = 1 ] || [ ! -e "$stamp" ] || [ "$where" != "$REPO" ]; then
    say "pip install -e '.[test]' into $PY"
    "${pip[@]}" -e ".[test]"
    mkdir -p "$stamp_dir" && touch "$stamp"
  fi
  if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$TORCH_PIN' else 1)" 2>/dev/null; then
    # The CPU build, pinned: an unpinned `torch` would pull the multi-GB CUDA one; 2.13.0 is the
    # CPU wheel this kind of machine carries in its local find-links.
    say "pip install torch==$TORCH_PIN (CPU build)"
    "${pip[@]}" "torch==$TORCH_PIN"
  fi
}

# -- the fleet's Debian bullseye root filesystem ------------------------------------------------
# Built once per machine (debootstrap from the Debian mirror apt uses, a few minutes), cached
# under /var/cache/provision-tests keyed by its package list; the fleet session reuses it.
build_bullseye_rootfs() {
  if [ "$(id -u)" != 0 ] || ! command -v debootstrap >/dev/null; then
    return
  fi
  (cd "$REPO/tests/fleet" && "$PY" -c 'import kinds, sys
try:
    print(kinds.bullseye_rootfs())
except Exception as exc:  # no mirror reachable: the bullseye fleet tests skip with this reason
    print("no bullseye root filesystem:", exc, file=sys.stderr)') >&2 || true
}

install_apt_packages
pick_python
install_python_packages
build_bullseye_rootfs

# -- what to run --------------------------------------------------------------------------------
QUICK=0
ARGS=()
for arg in "$@"; do
  if [ "$arg" = "--quick" ]; then QUICK=1; else ARGS+=("$arg"); fi
done
if [ "$QUICK" = 1 ]; then
  ARGS=(tests/unit -m "not slow" -q "${ARGS[@]}")
fi
WORKERS="${PROVISION_TEST_WORKERS:-}"
if [ -z "$WORKERS" ] && { [ "$#" = 0 ] || [ "$QUICK" = 1 ]; }; then
  cores="$(nproc 2>/dev/null || echo 2)"
  WORKERS=$(( cores * 2 > 2 ? cores * 2 : 2 ))
fi
if [ "$#" = 0 ]; then
  ARGS=(--durations=15 "${ARGS[@]}")  # the whole suite: its slowest tests named (the 30-min budget)
fi
if [ -n "$WORKERS" ] && [ "$WORKERS" != 0 ] && [ "$WORKERS" != 1 ]; then
  ARGS=(-n "$WORKERS" --dist loadfile "${ARGS[@]}")
fi

say "$PY -m pytest ${ARGS[*]}"
rc=0
"$PY" -m pytest "${ARGS[@]}" </dev/null || rc=$?
if [ "$rc" = 5 ]; then
  say "pytest collected no tests (exit 5): that is a failure here (wrong path or -k/-m?)"
  exit 1
fi
exit "$rc"
