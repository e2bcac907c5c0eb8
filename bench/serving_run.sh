#!/usr/bin/env bash
# One GPU call's worth of the serving checks (issue 45), most important
# first, each part time-boxed so that a short device lease still returns the
# earlier parts: the serving path's GPU tests (numerics, no host sync, CUDA
# graphs, device asserts), the host cost per call (with cProfile), the
# issue's decode table, the decode steps, then the A/B and split sweeps when
# their kernels are there. Kernels come from .serving/ (bash
# bench/build_serving_kernels.sh) and .ab/{with,without}
# (bench/ab_device_asserts.py). Results go to $OUT (default results-serving).
# Usage: bash bench/serving_run.sh [parts...]   (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-results-serving}
mkdir -p "$OUT"
export FLASHMLIR_KERNEL_DIR=.serving FLASHMLIR_PAGED_KERNEL_DIR=.serving \
  FLASHMLIR_VARLEN_KERNEL_DIR=.serving
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(tests host table spec ab splits steps)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch; print(torch.__version__, torch.backends.cudnn.version())" \
  | tee -a "$OUT/gpu.txt"
for part in "${parts[@]}"; do
  start=$(date +%s)
  case $part in
    tests)
      timeout 240 python3 -m pytest -q -m gpu python/tests/test_device_asserts.py \
        python/tests/test_pack_gqa.py python/tests/test_cuda_graph.py \
        python/tests/test_fp8_kv_cache.py python/tests/test_kv_append.py \
        python/tests/test_kv_cache.py::test_c_runtime_kv_cache_launch \
        python/tests/test_split_kv.py::test_device_dram_bandwidth \
        python/tests/test_torch_ops.py::test_compiled_decode_step \
        -k "not prefill_with_tile and not flash_attn_func_replays and not varlen_replays" \
        > "$OUT/pytest-gpu.log" 2>&1
      tail -3 "$OUT/pytest-gpu.log" ;;
    host)
      timeout 150 python3 bench/serving.py host --profile-dir "$OUT" \
        --out "$OUT/serving-host.json" > "$OUT/host.log" 2>&1
      tail -20 "$OUT/host.log" ;;
    table)
      timeout 240 python3 bench/serving.py table --issue-rows \
        --out "$OUT/serving-table.json" > "$OUT/table.log" 2>&1
      python3 - "$OUT/serving-table.json" <<'PY' || tail -5 "$OUT/table.log"
import json, sys
for r in json.load(open(sys.argv[1]))["table"]:
    print(r["heads"], r["b"], r["nk"], r["page"], r["mode"],
          *(f"{k}={r[k]:.2f}" for k in ("vs_cudnn", "vs_fa2") if isinstance(r.get(k), float)))
PY
      ;;
    ab)
      [ -d .ab/with ] && timeout 120 python3 bench/ab_device_asserts.py .ab/with \
        .ab/without "$OUT/ab-device-asserts.json" 2>&1 | tee "$OUT/ab.log" | tail -6 ;;
    splits)
      timeout 200 python3 bench/decode_splits.py --out "$OUT/decode-splits.json" \
        > "$OUT/splits.log" 2>&1
      cut -c1-400 "$OUT/splits.log" | tail -10 ;;
    splits-rows)
      # The H200 rows where one chunk a tile lost to two (16+ sequences).
      rows=(); for s in 32,8,8,8192 32,8,16,8192 32,8,32,8192 32,8,64,8192 \
        32,8,16,2048 32,8,32,2048 32,8,64,2048 32,8,16,32768 64,8,16,8192 \
        64,8,32,8192 64,8,64,8192 32,32,8,8192 32,32,16,8192 32,32,4,8192; do
        rows+=(--shape "$s"); done
      timeout 300 python3 bench/decode_splits.py "${rows[@]}" --splits 1,2,3,4 \
        --out "$OUT/decode-splits-rows.json" > "$OUT/splits-rows.log" 2>&1
      python3 - "$OUT/decode-splits-rows.json" <<'PY' || tail -5 "$OUT/splits-rows.log"
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(r["heads"], r["b"], r["nk"], "cudnn %.1f" % r["cudnn_us"],
          {k: round(v, 1) for k, v in r["us"].items() if isinstance(v, float)},
          "auto_vs_cudnn=%.2f best_vs_cudnn=%.2f" % (
              r["auto_vs_cudnn"] or 0, r["best_vs_cudnn"]))
PY
      ;;
    flex)
      # Issue 49: FlexAttention-style regions folded into the built-in
      # kernels (fa-compile-module --arch sm_90a -o .flex
      # test/Inputs/flex_regions_f16.mlir), launched from the artefacts.
      [ -d .flex ] && timeout 200 python3 bench/flex_module.py .flex \
        $([ -d .flex-inlined ] && echo .flex-inlined) $([ -d .flex-sinks ] && echo .flex-sinks) \
        > "$OUT/flex.log" 2>&1
      grep -E "FAIL|TFLOP|flex_module" "$OUT/flex.log" | tail -16 ;;
    flex-peers)
      # Issue 49: the inlined module's variants beside torch's FlexAttention
      # (torch.compile) and, for the causal rows, cuDNN and FA2 via SDPA.
      [ -d .flex-inlined ] && timeout 300 python3 bench/flex_peers.py .flex-inlined \
        "$OUT/flex-peers.json" > "$OUT/flex-peers.log" 2>&1
      tail -8 "$OUT/flex-peers.log" | cut -c1-600 ;;
    sanitize)
      # compute-sanitizer on the KV-cache kernels (f16 and e4m3 caches).
      for tool in memcheck synccheck racecheck; do
        small=(); [ $tool = racecheck ] && small=(--small)
        timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 \
          python3 bench/sanitize_kvcache.py "${small[@]}" \
          > "$OUT/sanitize-kvcache-$tool.log" 2>&1
        echo "$tool exit $?"
        grep -E "ERROR SUMMARY|RACECHECK SUMMARY|sanitize_kvcache:" \
          "$OUT/sanitize-kvcache-$tool.log"
      done ;;
    splits-fp8)
      timeout 200 python3 bench/decode_splits.py --kv-dtype e4m3 \
        --out "$OUT/decode-splits-fp8.json" > "$OUT/splits-fp8.log" 2>&1
      python3 - "$OUT/decode-splits-fp8.json" <<'PY' || tail -5 "$OUT/splits-fp8.log"
import json, sys
for r in json.load(open(sys.argv[1]))["rows"]:
    print(r["heads"], r["b"], r["nk"], "f16 auto %.1f us" % r["f16_auto_us"],
          "auto_vs_f16=%.2f best_vs_f16=%.2f best=%s" % (
              r["auto_vs_f16"] or 0, r["best_vs_f16"], r["best"]),
          {k: round(v, 1) for k, v in r["us"].items() if isinstance(v, float)})
PY
      ;;
    fp8)
      timeout 240 python3 bench/serving.py fp8 \
        --out "$OUT/serving-fp8.json" > "$OUT/fp8.log" 2>&1
      python3 - "$OUT/serving-fp8.json" <<'PY' || tail -5 "$OUT/fp8.log"
import json, sys
for r in json.load(open(sys.argv[1]))["fp8"]:
    print(r["heads"], r["b"], r["nk"], r["page"], r["mode"],
          *(f"{k}={r[k]:.2f}" for k in ("e4m3_vs_f16", "e4m3_gb_per_s", "f16_gb_per_s", "cudnn_gb_per_s") if isinstance(r.get(k), float)),
          *(f"{k}: {r[k][:80]}" for k in ("f16", "e4m3", "cudnn") if k in r))
PY
      ;;
    fp8-spec)
      # Speculative decoding's 4 queries on an e4m3 cache against the f16
      # cache (both through the query-group kernels where the cache is large).
      timeout 240 python3 bench/serving.py fp8 --fp8-queries 4 \
        --out "$OUT/serving-fp8-spec.json" > "$OUT/fp8-spec.log" 2>&1
      python3 - "$OUT/serving-fp8-spec.json" <<'PY' || tail -5 "$OUT/fp8-spec.log"
import json, sys
for r in json.load(open(sys.argv[1]))["fp8"]:
    print(r["heads"], r["b"], r["nq"], r["nk"], r["page"], r["mode"],
          *(f"{k}={r[k]:.2f}" for k in ("e4m3_vs_f16", "e4m3_gb_per_s", "f16_gb_per_s") if isinstance(r.get(k), float)),
          *(f"{k}: {r[k][:80]}" for k in ("f16", "e4m3") if k in r))
PY
      ;;
    ncu-fp8)
      # Where the e4m3 cache's decode kernel spends its time, beside the f16
      # cache's (B 1, 32/8, Nk 32k): the attention kernels of the fourth and
      # fifth f16 calls and of the five e4m3 calls (bench/profile_decode.py).
      timeout 240 ncu --clock-control none -k regex:fa3_sm90 --launch-skip 3 \
        --launch-count 7 --set full -o "$OUT/decode-fp8" -f \
        python3 bench/profile_decode.py --nk 32768 > "$OUT/ncu-fp8.log" 2>&1
      tail -3 "$OUT/ncu-fp8.log"
      ncu --import "$OUT/decode-fp8.ncu-rep" --page details --csv \
        > "$OUT/decode-fp8-details.csv" 2>/dev/null
      ncu --import "$OUT/decode-fp8.ncu-rep" --page details \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
        2>/dev/null | grep -E "fa3_sm90|Duration|Throughput|Issued|Eligible|Stall|Warp Cycles" \
        | cut -c1-150 | head -80 ;;
    spec)
      timeout 240 python3 bench/serving.py spec \
        --out "$OUT/serving-spec.json" > "$OUT/spec.log" 2>&1
      python3 - "$OUT/serving-spec.json" <<'PY' || tail -5 "$OUT/spec.log"
import json, sys
for r in json.load(open(sys.argv[1]))["spec"]:
    print(r["heads"], r["b"], r["nq"], r["nk"], r["page"], r["mode"],
          *(f"{k}={r[k]:.2f}" for k in ("vs_cudnn", "vs_fa2", "vs_unpacked")
            if isinstance(r.get(k), float)))
PY
      ;;
    steps)
      timeout 200 python3 bench/serving.py steps --quick \
        --out "$OUT/serving-steps.json" > "$OUT/steps.log" 2>&1
      tail -4 "$OUT/steps.log" | cut -c1-400 ;;
  esac
  echo "== $part: $(( $(date +%s) - start )) s"
done
