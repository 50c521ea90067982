#!/usr/bin/env bash
# GPU check: run facts, the torch check, the compatibility check and the benchmark directly on
# a GPU machine (no SSH, no controller needed) and save every JSON document.
#
#   bash scripts/gpu-check.sh                 # from the repository root
#   OUT=/some/dir bash scripts/gpu-check.sh   # results under $OUT/gpu-check (else ./gpu-check-out)
#
# Bounded to about 5 minutes (GPU_CHECK_BUDGET seconds, default 300): every step has a timeout
# and is skipped when the budget left is too small for it. Uses the torch already importable in
# $PYTHON (default python3); only when there is none does it try `pip install "$TORCH_SPEC"`
# (default torch==2.13.0), which needs a reachable package index.
# Order: quick bench first (every GPU code path, small sizes), then the full bench with what is
# left, so a short budget still yields a complete report.
set -u

PYTHON=${PYTHON:-python3}
BUDGET=${GPU_CHECK_BUDGET:-300}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST=${OUT:+$OUT/gpu-check}
DEST=${DEST:-$ROOT/gpu-check-out}
mkdir -p "$DEST"
cd "$ROOT" || exit 2
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
LOG="$DEST/log.txt"
: >"$LOG"
START=$SECONDS

say() { printf '[%3ds] %s\n' "$((SECONDS - START))" "$*" | tee -a "$LOG" >&2; }
left() { echo $((BUDGET - (SECONDS - START))); }

# agent CMD NAME TIMEOUT [REQUEST_JSON]: the agent protocol by hand; raw JSON lines to NAME.jsonl,
# the result (or error) document to NAME.json.
agent() {
  local cmd=$1 name=$2 limit=$3 request=${4:-"{}"}
  local budget_left
  budget_left=$(left)
  if [ "$budget_left" -lt 15 ]; then
    say "$name: skipped, ${budget_left}s of the budget left"
    echo '{"status": "skipped", "reason": "gpu-check budget spent"}' >"$DEST/$name.json"
    return 1
  fi
  [ "$limit" -gt "$budget_left" ] && limit=$budget_left
  say "$name: python -m provision.agent $cmd (timeout ${limit}s)"
  printf '%s\n' "$request" | timeout -k 10 "$limit" "$PYTHON" -m provision.agent "$cmd" \
    >"$DEST/$name.jsonl" 2>"$DEST/$name.stderr"
  local rc=$?
  "$PYTHON" - "$DEST/$name.jsonl" "$DEST/$name.json" "$rc" <<'EOF'
import json, sys
src, dst, rc = sys.argv[1], sys.argv[2], int(sys.argv[3])
doc = {"status": "error", "reason": "no result event (exit code %d%s)" % (rc, ", timed out" if rc == 124 else "")}
for line in open(src, encoding="utf-8", errors="replace"):
    try:
        event = json.loads(line)
    except ValueError:
        continue
    if event.get("event") == "result":
        doc = event["data"]
    elif event.get("event") == "error":
        doc = {"status": "error", "reason": "%s: %s" % (event.get("kind"), event.get("message"))}
json.dump(doc, open(dst, "w"), indent=1, default=str)
EOF
  say "$name: exit $rc -> $DEST/$name.json"
  return "$rc"
}

say "gpu-check in $ROOT, results in $DEST, budget ${BUDGET}s"
{ command -v nvidia-smi >/dev/null && timeout 20 nvidia-smi -L; } >"$DEST/nvidia-smi.txt" 2>&1
say "$(head -3 "$DEST/nvidia-smi.txt" | tr '\n' ' ')"

if ! "$PYTHON" -c "import torch" >/dev/null 2>&1; then
  say "no torch in $PYTHON: pip install $TORCH_SPEC (timeout 180s)"
  timeout 180 "$PYTHON" -m pip install --quiet "$TORCH_SPEC" >>"$LOG" 2>&1 || say "torch install failed (see log)"
fi
"$PYTHON" -c "import pynvml" >/dev/null 2>&1 ||
  timeout 60 "$PYTHON" -m pip install --quiet nvidia-ml-py >>"$LOG" 2>&1 ||
  say "pynvml unavailable: the under-load GPU sampling will be skipped"
"$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())" 2>&1 | tee -a "$LOG" >&2

agent facts facts 60
agent verify_torch verify_torch 90 '{"matmul_size": 1024}'

# The compatibility check is controller code (needs pyyaml, rich, fabric): run it when present.
if [ "$(left)" -gt 60 ] && "$PYTHON" -c "import yaml, rich, fabric" >/dev/null 2>&1; then
  say "check: python -m provision check localhost --json"
  timeout 60 "$PYTHON" -m provision check localhost --json >"$DEST/check.json" 2>"$DEST/check.stderr"
  say "check: exit $?"
else
  echo '{"status": "skipped", "reason": "controller dependencies (pyyaml, rich, fabric) not importable"}' >"$DEST/check.json"
  say "check: skipped (controller dependencies not importable)"
fi

# Peaks for "% of peak" from the compat GPU table (controller code too: needs pyyaml).
PEAKS=$("$PYTHON" - "$DEST/facts.json" 2>>"$LOG" <<'EOF' || echo '{}'
import json, sys
try:
    from provision.remote.bench import gpu_peaks
    print(json.dumps(gpu_peaks(json.load(open(sys.argv[1])))))
except Exception as exc:
    sys.stderr.write("gpu peaks unavailable: %s\n" % exc)
    print("{}")
EOF
)
say "gpu_peaks: $PEAKS"
DATA_DIR=${DATA_DIR:-$DEST}

agent bench bench-quick 150 "{\"quick\": true, \"data_dir\": \"$DATA_DIR\", \"gpu_peaks\": $PEAKS}"

# gloo all-reduce between two local agent processes: the multi-host path on this machine.
if [ "$(left)" -gt 60 ]; then
  PORT=$((29500 + RANDOM % 400))
  for RANK in 0 1; do
    agent bench "allreduce-rank$RANK" 60 \
      "{\"sections\": [\"distributed\"], \"allreduce\": {\"master_addr\": \"127.0.0.1\", \"master_port\": $PORT, \"world_size\": 2, \"rank\": $RANK, \"backend\": \"gloo\", \"timeout_s\": 30}}" &
  done
  wait
fi

FULL_LIMIT=$(($(left) - 10))
if [ "$FULL_LIMIT" -gt 60 ]; then
  agent bench bench-full "$FULL_LIMIT" \
    "{\"data_dir\": \"$DATA_DIR\", \"gpu_peaks\": $PEAKS, \"max_seconds\": $((FULL_LIMIT - 45))}"
else
  say "bench-full: skipped, budget spent"
fi

"$PYTHON" - "$DEST" <<'EOF' | tee "$DEST/summary.txt" >&2
import json, os, sys
dest = sys.argv[1]
for name in ("facts", "verify_torch", "check", "bench-quick", "allreduce-rank0", "bench-full"):
    path = os.path.join(dest, name + ".json")
    if not os.path.exists(path):
        continue
    try:
        doc = json.load(open(path))
    except ValueError as exc:
        print("%-16s unreadable: %s" % (name, exc))
        continue
    if not name.startswith(("bench", "allreduce")):
        print("%-16s %s" % (name, doc.get("status") or ("ok" if doc.get("ok", True) else "problems: %s" % doc.get("problems"))))
        continue
    if doc.get("status") == "error" and "schema" not in doc:
        print("%-16s error: %s" % (name, doc.get("reason")))
        continue
    print("%-16s wall %ss" % (name, doc.get("wall_s")))
    for section in doc.get("sections", []) + ["under_load"]:
        part = doc.get(section) or {}
        print("  %-12s %-8s %s" % (section, part.get("status"), part.get("reason") or ""))
    for gpu in (doc.get("compute") or {}).get("per_gpu") or []:
        print("  compute %s: TFLOPS %s, %% of peak %s" % (gpu.get("name"), gpu.get("tflops"), gpu.get("pct_of_peak")))
    amp = doc.get("amp") or {}
    if amp.get("status") == "ok":
        print("  amp speedup %s (%s), train %s samples/s" % (amp.get("speedup"), amp.get("best_dtype"), amp.get("train_samples_per_s")))
    dl = doc.get("dataloader") or {}
    if dl.get("status") == "ok":
        print("  dataloader best num_workers %s, %s samples/s, verdict %s" % (dl.get("best_num_workers"), dl.get("best_samples_per_s"), (dl.get("verdict") or {}).get("verdict")))
    for gpu in (doc.get("transfer") or {}).get("per_gpu") or []:
        print("  transfer gpu%s: h2d %s d2h %s GB/s, link %s, %s%% of theoretical" % (gpu.get("index"), gpu.get("h2d_gbs"), gpu.get("d2h_gbs"), gpu.get("link"), gpu.get("pct_of_theoretical")))
    dist = doc.get("distributed") or {}
    for part in ("local", "multi_host"):
        if (dist.get(part) or {}).get("status") == "ok":
            print("  all-reduce %s (%s): busbw %s GB/s" % (part, dist[part].get("backend"), dist[part].get("busbw_gbs")))
    gpu = ((doc.get("under_load") or {}).get("gpu") or {})
    for g in gpu.get("per_gpu") or []:
        print("  under load gpu%s: util max %s%%, %s C max, %s W max, throttled %s" % (g.get("index"), g.get("util_pct_max"), g.get("temperature_c_max"), g.get("power_w_max"), g.get("throttled")))
EOF
say "done in $((SECONDS - START))s; results in $DEST"
