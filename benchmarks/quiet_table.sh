#!/usr/bin/env bash
# Issue 23's table in one sitting, on a quiet machine: every row alternates provision and its
# anchor in pairs (medians of >= 5 pairs, min-max, CPU on both ends where the script measures it).
# Run it with NOTHING else on the machine (no test run, no other benchmark): load flatters ratios.
#
#   sudo bash benchmarks/quiet_table.sh [OUT_DIR]        # ~30 min; each script's output in OUT_DIR
#   QUIET_ONLY="stage install" sudo bash benchmarks/quiet_table.sh   # some rows only
#
# Rows: facts (8, 32 hosts, warm and first contact), 5 steps on 32 hosts, the same 5 steps
# through a delay proxy at RTT 0/50/100 ms (per run, kept connections, --executor; round trips), facts and 5 steps on
# 128 and 256 hosts with each tool's default parallelism, staging at 200 Mbit/s, the first install
# from an index without uv, `up` again with nothing changed, the 30-task play vs ansible-playbook.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${1:-/tmp/provision-quiet-$(date -u +%Y%m%dT%H%M%S)}"
mkdir -p "$OUT"
ONLY="${QUIET_ONLY:-facts run latency scale scale_run stage install up play30}"
PY="${PYTHON:-python3}"

row() {  # name, command...: runs it unless left out, its output (stdout + stderr) in OUT/name.txt
  local name="$1"; shift
  case " $ONLY " in *" $name "*) ;; *) return 0 ;; esac
  printf '[quiet] %s: %s (load %s)\n' "$name" "$*" "$(cut -d' ' -f1-3 /proc/loadavg)" >&2
  local t0=$SECONDS
  "$@" >"$OUT/$name.txt" 2>&1 || printf '[quiet] %s exited %s\n' "$name" "$?" >&2
  printf '[quiet] %s took %ss\n' "$name" "$((SECONDS - t0))" >&2
}

up_unchanged() {  # `provision up localhost --no-bench` again, nothing changed: 1 warm-up + 5 runs
  local home; home="$(mktemp -d)"
  (cd "$home" && HOME="$home" "$PY" -m provision up localhost --no-bench >/dev/null 2>&1) || true
  for i in 1 2 3 4 5; do
    (cd "$home" && HOME="$home" "$PY" -c 'import subprocess, sys, time
t = time.perf_counter()
code = subprocess.run([sys.executable, "-m", "provision", "up", "localhost", "--no-bench"], capture_output=True).returncode
print(f"run: {time.perf_counter() - t:.2f} s (exit {code})")')
  done
  rm -rf "$home"
}

row facts "$PY" benchmarks/facts_bench.py --sizes 8 32 --repeats 5 --no-ansible
row run "$PY" benchmarks/run_bench.py --sizes 32 --tools provision,pyinfra --repeat 5 --no-30
row latency "$PY" benchmarks/latency_bench.py --hosts 32 --rtt 0 50 100 --repeat 5
row stage "$PY" benchmarks/stage_bench.py --methods cli,tar --shaped-only --zstd-host --repeats 7 --no-read --no-sftp
row install "$PY" benchmarks/install_bench.py --pairs 5
row up up_unchanged
row play30 "$PY" benchmarks/run_bench.py --only-30 --repeat 5
row scale "$PY" benchmarks/facts_bench.py --sizes 128 256 --repeats 5 --no-ansible --default-forks
row scale_run "$PY" benchmarks/run_bench.py --sizes 128,256 --tools provision,pyinfra --repeat 5 --no-30 --default-forks
echo "[quiet] outputs in $OUT" >&2
