"""fagpu-io-report against the hardware: each (kernel, shape) of
bench/io_predict.py's list is launched once under Nsight Compute, and its
L2 -> SM read bytes (l1tex__m_xbar2l1tex_read_bytes.sum, the metric that
matched FlashAttention-2's model to the byte, shared/GPU.md), SM -> L2
writes, and DRAM read and write bytes (dram__bytes_read/write.sum) are
printed beside the predictions (the DRAM ones from fagpu::dramTraffic).

    python3 bench/io_check.py .cubins .io/expected.json   # on the H200
"""
import csv
import io
import json
import os
import subprocess
import sys

METRICS = ["l1tex__m_xbar2l1tex_read_bytes.sum", "dram__bytes_read.sum",
           "l1tex__m_l1tex2xbar_write_bytes.sum", "dram__bytes_write.sum"]


def launch(folder, rows):
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import Kernel  # noqa: E402
    for r in rows:
        k = Kernel.load(os.path.join(folder, r["kernel"]))
        torch.manual_seed(0)
        q = torch.randn(r["B"], r["Hq"], r["Nq"], r["D"], device="cuda",
                        dtype=torch.float16)
        # K and V in buffers of their own: DRAM counts each once.
        key, value = (torch.randn(r["B"], r["Hkv"], r["Nk"], r["D"],
                                  device="cuda", dtype=torch.float16)
                      for _ in range(2))
        if r.get("kv_splits"):
            k(q, key, value, num_splits=r["kv_splits"])
        else:
            k(q, key, value)
        torch.cuda.synchronize()


def profile(command, launches, name="io_check"):
    """METRICS of each attention kernel `command` (a Python script's argv)
    launches, under Nsight Compute: one dict per launch (metric -> text),
    or None (with ncu's output printed) when they are not `launches`."""
    out = subprocess.run(
        ["ncu", "--clock-control", "none", "--csv", "--page", "raw",
         # The attention kernels (fa2_, fa3_, ...), not an e4m3 launch's
         # V layout kernel (fa_e4m3_v_layout_*).
         "-k", "regex:^fa[0-9]", "--metrics", ",".join(METRICS),
         sys.executable] + command, capture_output=True, text=True)
    lines = [l for l in out.stdout.splitlines() if l.startswith('"')]
    table = list(csv.DictReader(io.StringIO("\n".join(lines))))
    # The first data row is units.
    table = [t for t in table if t.get("ID", "").isdigit()]
    if len(table) != launches:
        print(out.stdout[-3000:], out.stderr[-3000:])
        print(f"{name}: {len(table)} profiled launches for {launches} rows")
        return None
    return table


def main():
    folder, expected = sys.argv[1], sys.argv[2]
    rows = json.load(open(expected))
    if len(sys.argv) > 3 and sys.argv[3] == "--launch":
        return launch(folder, rows)
    table = profile([os.path.abspath(__file__), folder, expected, "--launch"],
                    len(rows))
    if table is None:
        return 1
    worst = worst_dram = 0.0
    print("| kernel | B Hq Hkv Nq Nk | predicted L2->SM | measured | diff | "
          "FA2 model | predicted writes | measured writes | DRAM model | "
          "predicted DRAM read | measured | diff | predicted DRAM write | "
          "measured |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for r, t in zip(rows, table):
        meas = float(t[METRICS[0]].replace(",", ""))
        dram = float(t[METRICS[1]].replace(",", ""))
        wr = float(t[METRICS[2]].replace(",", ""))
        dram_wr = float(t[METRICS[3]].replace(",", ""))
        diff = meas / r["predicted_read"] - 1
        worst = max(worst, abs(diff))
        dram_diff = dram / r["predicted_dram_read"] - 1
        worst_dram = max(worst_dram, abs(dram_diff))
        results.append(dict(r, measured_read=meas, dram_read=dram,
                            measured_write=wr, dram_write=dram_wr))
        print(f"| {r['kernel']} | {r['B']} {r['Hq']} {r['Hkv']} {r['Nq']} "
              f"{r['Nk']}{' S=' + str(r['kv_splits']) if r.get('kv_splits') else ''}"
              f" | {r['predicted_read']} | {meas:.0f} | "
              f"{diff * 100:+.3f}% | {r['fa2_model_read']} | "
              f"{r['predicted_write']} | {wr:.0f} | "
              f"{'spills' if r['dram_spills_l2'] else 'fits'} | "
              f"{r['predicted_dram_read']} | {dram:.0f} | "
              f"{dram_diff * 100:+.1f}% | {r['predicted_dram_write']} | "
              f"{dram_wr:.0f} |")
    json.dump(results, open(os.path.join(os.environ.get("OUT", "."),
                                         "io-check.json"), "w"), indent=1)
    print(f"io_check: {len(rows)} launches, largest L2->SM difference "
          f"{worst * 100:.3f}%, largest DRAM read difference "
          f"{worst_dram * 100:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
