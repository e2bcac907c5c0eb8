import cProfile, pstats, os, sys, torch
sys.path.insert(0, "python")
import flashmlir
q = torch.randn(1, 8, 128, 64, device="cuda", dtype=torch.float16)
k, v = torch.randn_like(q), torch.randn_like(q)
kernel = flashmlir._kernel_for("sm_90a", 64, "f16", True, os.environ.get("FLASHMLIR_KERNEL_DIR"))
out = torch.empty_like(q); lse = torch.empty(1, 8, 128, device="cuda")
for _ in range(100): kernel(q, k, v, out=out, lse=lse)
torch.cuda.synchronize()
pr = cProfile.Profile(); pr.enable()
for _ in range(2000): kernel(q, k, v, out=out, lse=lse)
pr.disable(); torch.cuda.synchronize()
st = pstats.Stats(pr); st.sort_stats("tottime").print_stats(25)
