#!/usr/bin/env bash
# Builds every kernel set of bench/build_*_kernels.sh with the fa-compile of
# the checkout at $1 into $2/<set>/ (PTX, cubins, ptxas.txt), then, given a
# second folder $3 built the same way from another checkout, compares them:
# which PTX files are byte-identical, which differ, and the ptxas registers
# and spills of the kernels that differ.
#   bash bench/ptx_sets.sh /work/base /tmp/ptx-base
#   bash bench/ptx_sets.sh . /tmp/ptx-new /tmp/ptx-base
set -euo pipefail
root=$(cd "$1" && pwd); out=$(mkdir -p "$2" && cd "$2" && pwd)
cd "$root"
for s in build_kernels build_mask_kernels build_split_kernels \
    build_paged_kernels build_varlen_kernels build_head_dim_kernels \
    build_fp8_kernels; do
  bash "bench/$s.sh" "$out/$s" > "$out/$s.log" 2>&1 || {
    echo "$s failed: $out/$s.log"; exit 1; }
done
[ $# -ge 3 ] || exit 0
python3 - "$3" "$out" <<'PY'
import filecmp, os, re, sys
base, new = sys.argv[1], sys.argv[2]
def ptxas(path):
    out, cur = {}, None
    for line in open(path):
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            cur = m.group(1)
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and cur:
            out.setdefault(cur, {})["spills"] = m.group(1) + "/" + m.group(2)
        m = re.search(r"Used (\d+) registers", line)
        if m and cur:
            out.setdefault(cur, {})["regs"] = m.group(1)
    return out
same, differ = 0, []
for s in sorted(os.listdir(base)):
    if not os.path.isdir(os.path.join(base, s)):
        continue
    for f in sorted(os.listdir(os.path.join(base, s))):
        if f.endswith(".ptx"):
            a, b = os.path.join(base, s, f), os.path.join(new, s, f)
            if os.path.exists(b) and filecmp.cmp(a, b, shallow=False):
                same += 1
            else:
                differ.append(f"{s}/{f}")
print(f"PTX byte-identical: {same}; different: {len(differ)}")
for d in differ:
    print("  differs:", d)
for s in sorted(os.listdir(new)):
    p = os.path.join(new, s, "ptxas.txt")
    if os.path.exists(p) and os.path.exists(os.path.join(base, s, "ptxas.txt")):
        a, b = ptxas(os.path.join(base, s, "ptxas.txt")), ptxas(p)
        for k in b:
            if k in a and a[k] != b[k]:
                print(f"  ptxas {k}: {a[k]} -> {b[k]}")
PY
