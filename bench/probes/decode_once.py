"""One decode call of ours and one of cuDNN's (torch SDPA) for ncu, after
warm-ups outside the profiled range (cudaProfilerStart/Stop):

    ncu --profile-from-start off --metrics ... \
        python3 bench/probes/decode_once.py KERNEL B H Nk [SPLITS]

KERNEL: a split-KV kernel's prefix (e.g. .cubins/sm_90a_d128_f16_splitkv);
SPLITS: its chunk count (default: the runtime's auto rule). f16, D 128,
Nq 1, Hq = Hkv = H.
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                ".."))
from common import Kernel  # noqa: E402

kernel = Kernel.load(sys.argv[1])
b, h, nk = (int(x) for x in sys.argv[2:5])
splits = int(sys.argv[5]) if len(sys.argv) > 5 else 0
d = 128
q = torch.randn(b, h, 1, d, device="cuda", dtype=torch.float16)
k = torch.randn(b, h, nk, d, device="cuda", dtype=torch.float16)
v = torch.randn_like(k)
o = torch.empty_like(q)
lse = torch.empty(b, h, 1, device="cuda")


def ours():
    kernel(q, k, v, out=o, lse=lse, num_splits=splits or None)


def cudnn():
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v)


for _ in range(3):
    ours()
    ref = cudnn()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
ours()
cudnn()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
print("max |ours - cuDNN|", (o.float() - ref.float()).abs().max().item())
