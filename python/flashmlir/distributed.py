"""Context-parallel (ring) attention over torch.distributed (issue 19, the
runtime side).

Each rank of a process group holds one shard of the sequence: q, k, v of
shape [B, H, N_local, D] (k and v may have fewer heads than q: grouped-query
attention). The K/V shards travel around the ring, one hop per step, with
torch.distributed point-to-point operations (``batch_isend_irecv`` of
``isend``/``irecv``); the exchange for the next step is posted before the
current step's attention runs, so the two overlap (on CUDA tensors the
exchange is issued from a separate stream). Each step attends the local
queries to the visiting K/V block and yields a partial (O_s, LSE_s); the
partials merge by log-sum-exp in float32:

    LSE = logsumexp_s LSE_s,    O = sum_s exp(LSE_s - LSE) O_s

(rows whose LSE is -inf contribute nothing).

    import flashmlir.distributed as fd
    q_local = fd.zigzag_shard(q, rank, world)          # likewise k, v
    out, lse = fd.ring_attention(q_local, k_local, v_local, causal=True,
                                 layout="zigzag")
    full = fd.gather_sequence(out, layout="zigzag")    # if wanted

Per-step attention (``backend``):

* ``"kernel"``: a flash-mlir GPU kernel, one per (arch, head dim, dtype,
  causal), loaded from ``kernel_dir`` (fa-compile output named as
  bench/build_kernels.sh names it, e.g. ``sm_90a_d128_f16_causal``; default
  ``$FLASHMLIR_KERNEL_DIR``) or compiled in-process with flashmlir.compile,
  launched with flashmlir.runtime.Kernel into out/lse buffers.
* ``"cpu"``: flashmlir.run_cpu (fa-cpu-pipeline, JIT) on float32 numpy.
* ``"torch"``: a plain torch softmax(QK^T)V in float32 (float64 for float64
  inputs), on any device.
* ``"auto"``: ``"kernel"`` for CUDA tensors, ``"cpu"`` otherwise.
* a callable ``fn(q, k, v, causal, scale) -> (O, LSE)``: any attention with
  the same convention (causal is top-left and only asked of equal lengths).

Causal masks: with ``layout="contiguous"`` rank r holds positions
[r n, (r+1) n); the block of rank j < r is fully visible (non-causal
kernel), j == r is the diagonal (causal kernel), j > r fully masked (skipped:
and since no rank after the last one needs a block, the last rank never sends
and rank 0 never receives). That is unbalanced: rank R-1 does R blocks of
work, rank 0 one. ``layout="zigzag"`` cuts the sequence into 2R chunks and
gives rank r chunks r and 2R-1-r (``zigzag_shard``); then every step costs
every rank the same half block (its own block at step 0: causal; a block from
j < r: all its queries against the block's first chunk; from j > r: its
second chunk of queries against the whole block).

Forward only: there is no backward pass.
"""
import copy
import math
import os
import time

import torch
import torch.distributed as dist

__all__ = ["ring_attention", "simulate_ring", "ring_plan", "block_pieces",
           "merge_partial", "torch_attention", "cpu_attention",
           "KernelAttention", "zigzag_shard", "zigzag_unshard",
           "contiguous_shard", "contiguous_unshard", "shard_sequence",
           "unshard_sequence", "gather_sequence", "sequence_positions",
           "LAYOUTS"]

LAYOUTS = ("contiguous", "zigzag")


# -- sharding -----------------------------------------------------------------

def _check_layout(layout):
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")


def _check_divisible(n, parts, what):
    if n % parts != 0:
        raise ValueError(
            f"{what}: the sequence length {n} must be divisible by {parts}; "
            f"ring attention needs equal shards (pad the sequence to a "
            f"multiple of {parts} first)")


def contiguous_shard(x, rank, world, dim=2):
    """Rank `rank`'s contiguous slice [rank n, (rank+1) n) of `x` along
    `dim` (n = N / world; N must be divisible by world)."""
    _check_divisible(x.shape[dim], world, "contiguous_shard")
    return x.chunk(world, dim)[rank].contiguous()


def contiguous_unshard(shards, dim=2):
    """The full sequence from every rank's contiguous shard (in rank
    order)."""
    return torch.cat(list(shards), dim)


def zigzag_shard(x, rank, world, dim=2):
    """Rank `rank`'s zig-zag shard of `x` along `dim`: the sequence cut into
    2 world equal chunks, rank r holding chunks r and 2 world - 1 - r
    (concatenated in that order). N must be divisible by 2 world."""
    _check_divisible(x.shape[dim], 2 * world, "zigzag_shard")
    chunks = x.chunk(2 * world, dim)
    return torch.cat((chunks[rank], chunks[2 * world - 1 - rank]),
                     dim).contiguous()


def zigzag_unshard(shards, dim=2):
    """The full sequence from every rank's zig-zag shard (in rank order)."""
    shards = list(shards)
    halves = []
    for r, s in enumerate(shards):
        if s.shape[dim] % 2 != 0:
            raise ValueError(f"zigzag_unshard: shard {r} has odd length "
                             f"{s.shape[dim]}")
        halves.append(s.chunk(2, dim))
    return torch.cat([h[0] for h in halves] +
                     [h[1] for h in reversed(halves)], dim)


def shard_sequence(x, rank, world, dim=2, layout="contiguous"):
    _check_layout(layout)
    return (zigzag_shard if layout == "zigzag" else contiguous_shard)(
        x, rank, world, dim)


def unshard_sequence(shards, dim=2, layout="contiguous"):
    _check_layout(layout)
    return (zigzag_unshard if layout == "zigzag" else contiguous_unshard)(
        shards, dim)


def sequence_positions(rank, world, n_local, layout="contiguous"):
    """The global positions (a LongTensor of n_local) of rank `rank`'s rows:
    what rotary embeddings and masks of a sharded sequence need."""
    _check_layout(layout)
    if layout == "contiguous":
        return torch.arange(rank * n_local, (rank + 1) * n_local)
    if n_local % 2:
        raise ValueError(f"a zig-zag shard has an even length, got {n_local}")
    c = n_local // 2
    return torch.cat((torch.arange(rank * c, (rank + 1) * c),
                      torch.arange((2 * world - 1 - rank) * c,
                                   (2 * world - rank) * c)))


def gather_sequence(x, dim=2, layout="contiguous", group=None):
    """All-gathers every rank's shard of `x` (equal shapes) and returns the
    full sequence on every rank."""
    world = dist.get_world_size(group)
    x = x.contiguous()
    parts = [torch.empty_like(x) for _ in range(world)]
    # As bytes: gloo has no bfloat16.
    dist.all_gather([p.view(torch.uint8) for p in parts],
                    x.view(torch.uint8), group=group)
    return unshard_sequence(parts, dim, layout)


# -- the schedule -------------------------------------------------------------

def block_pieces(rank, src, world, n_local, causal, layout="contiguous"):
    """What rank `rank`'s queries compute against the K/V block of rank
    `src`: a list of (q_lo, q_hi, k_lo, k_hi, diagonal) local row ranges,
    each a full (diagonal False) or top-left causal (diagonal True, equal
    lengths) attention. An empty list: the block is fully masked."""
    _check_layout(layout)
    full = [(0, n_local, 0, n_local, False)]
    if not causal:
        return full
    if layout == "contiguous":
        if src < rank:
            return full
        if src == rank:
            return [(0, n_local, 0, n_local, True)]
        return []
    c = n_local // 2
    if src == rank:
        # Chunks (r, 2R-1-r) against themselves: the local causal mask is
        # exactly the global one (chunk r's queries see none of chunk
        # 2R-1-r; chunk 2R-1-r's see all of chunk r).
        return [(0, n_local, 0, n_local, True)]
    if src < rank:
        # Key chunk src is before both query chunks; chunk 2R-1-src after.
        return [(0, n_local, 0, c, False)]
    # Query chunk r is before both key chunks; chunk 2R-1-r after both.
    return [(c, n_local, 0, n_local, False)]


def _needed(src, dst, world, causal, layout):
    return bool(block_pieces(dst, src, world, 2, causal, layout))


def ring_plan(rank, world, causal, layout="contiguous"):
    """The ring schedule of one rank: for each step s (0 .. world-1) a dict
    with `src` (whose K/V block the rank holds: (rank - s) mod world),
    `holds` (whether that block reached it), `send` / `recv` (whether it
    sends its block to rank+1 / receives the next one from rank-1 during
    this step), and `pieces` (block_pieces, in units of the local length;
    empty when skipped). A block is forwarded only while a rank further
    along the ring needs it: under a contiguous causal layout the link from
    rank world-1 to rank 0 is never used."""
    _check_layout(layout)

    def sends(r, s):
        if s >= world - 1 or not holds(r, s):
            return False
        j = (r - s) % world
        # The block's remaining path: ranks r+1 .. r+(world-1-s).
        return any(_needed(j, (r + t) % world, world, causal, layout)
                   for t in range(1, world - s))

    def holds(r, s):
        return s == 0 or sends((r - 1) % world, s - 1)

    plan = []
    for s in range(world):
        src = (rank - s) % world
        h = holds(rank, s)
        plan.append({"step": s, "src": src, "holds": h,
                     "send": sends(rank, s),
                     "recv": s < world - 1 and sends((rank - 1) % world, s),
                     "pieces": (block_pieces(rank, src, world, 1, causal,
                                             layout) if h else [])})
    return plan


# -- per-step attention -------------------------------------------------------

def torch_attention(q, k, v, causal=False, scale=None):
    """softmax(scale q k^T) v and its LSE in float32 (float64 for float64
    inputs), any device; causal is top-left. GQA: k/v heads divide q's."""
    ct = torch.float64 if q.dtype == torch.float64 else torch.float32
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    group = q.shape[1] // k.shape[1]
    kf = k.to(ct).repeat_interleave(group, 1)
    vf = v.to(ct).repeat_interleave(group, 1)
    s = torch.matmul(q.to(ct), kf.transpose(-1, -2)) * scale
    if causal:
        nq, nk = q.shape[2], k.shape[2]
        s = s.masked_fill(torch.ones(nq, nk, dtype=torch.bool,
                                     device=q.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, -1)
    safe = torch.where(torch.isneginf(lse), torch.zeros_like(lse), lse)
    return torch.matmul(torch.exp(s - safe.unsqueeze(-1)), vf), lse


def cpu_attention(q, k, v, causal=False, scale=None):
    """flashmlir.run_cpu (fa-cpu-pipeline) on float32 copies of the tensors;
    the results come back on q's device as float32."""
    from . import run_cpu

    def host(t):
        return t.detach().to("cpu", torch.float32).contiguous().numpy()

    o, lse = run_cpu(host(q), host(k), host(v), causal=bool(causal),
                     scale=scale)
    return (torch.from_numpy(o).to(q.device),
            torch.from_numpy(lse).to(q.device))


_KERNEL_DTYPES = {torch.float16: "f16", torch.bfloat16: "bf16"}
_KERNELS = {}


def _gpu_arch(device):
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) == (9, 0):
        return "sm_90a"
    if major == 8:
        return "sm_80"
    raise ValueError(f"no verified flash-mlir kernel for compute capability "
                     f"{major}.{minor} (sm_80 and sm_90a are; sm_100a is "
                     f"compile-only)")


class KernelAttention:
    """The per-step attention on CUDA tensors: a flash-mlir kernel per
    (arch, head dim, dtype, causal), cached for the process, launched with
    flashmlir.runtime.Kernel on the current stream. `kernel_dir` holds
    fa-compile output named {arch}_d{D}_{dtype}[_causal].{cubin,json}
    (bench/build_kernels.sh); a kernel not there is compiled in-process
    (flashmlir.compile, needs the built extension) and saved there."""

    def __init__(self, kernel_dir=None, arch=None, sm_margin=0):
        self.kernel_dir = kernel_dir or os.environ.get("FLASHMLIR_KERNEL_DIR")
        self.arch = arch
        if isinstance(sm_margin, bool) or not isinstance(sm_margin, int) \
                or sm_margin < 0:
            raise ValueError(f"sm_margin must be an integer >= 0, got "
                             f"{sm_margin!r}")
        self.sm_margin = sm_margin

    def kernel(self, arch, head_dim, dtype, causal):
        base = self._kernel(arch, head_dim, dtype, causal)
        if not self.sm_margin or not base.meta.get("persistent"):
            return base
        # A persistent kernel's grid fills every SM (x ctas_per_sm) and
        # its CTAs stay resident to the end, so a communication kernel
        # launched after it gets no SM until it finishes. sm_margin SMs are
        # left free: the kernel strides over its tiles by gridDim (static or
        # dynamic scheduler), so a smaller grid only spreads them thinner.
        key = (arch, head_dim, dtype, bool(causal), self.kernel_dir,
               self.sm_margin)
        if key not in _KERNELS:
            margined = copy.copy(base)  # shares the loaded module
            margin = self.sm_margin

            def grid(b, hq, nq, sm_count=None):
                if sm_count:
                    sm_count = max(1, sm_count - margin)
                return type(base).grid(margined, b, hq, nq, sm_count)

            margined.grid = grid
            _KERNELS[key] = margined
        return _KERNELS[key]

    def _kernel(self, arch, head_dim, dtype, causal):
        key = (arch, head_dim, dtype, bool(causal), self.kernel_dir)
        if key not in _KERNELS:
            from . import _kernel_for
            try:
                _KERNELS[key] = _kernel_for(arch, head_dim, dtype,
                                            bool(causal), self.kernel_dir)
            except ImportError as e:
                name = f"{arch}_d{head_dim}_{dtype}" + \
                    ("_causal" if causal else "")
                raise FileNotFoundError(
                    f"no precompiled kernel {name} in kernel_dir="
                    f"{self.kernel_dir!r} and this machine cannot compile "
                    f"one ({e}); precompile it where flash-mlir is built: "
                    f"build/bin/fa-compile --arch {arch} --head-dim "
                    f"{head_dim} --dtype {dtype}"
                    f"{' --causal' if causal else ''} -o DIR/{name}") from e
        return _KERNELS[key]

    def __call__(self, q, k, v, causal=False, scale=None, out=None,
                 lse=None):
        if not q.is_cuda:
            raise ValueError("the kernel backend needs CUDA tensors (use "
                             "backend='cpu' or 'torch' on the host)")
        dtype = _KERNEL_DTYPES.get(q.dtype)
        if dtype is None:
            raise ValueError(f"the kernel backend needs float16 or bfloat16 "
                             f"tensors, got {q.dtype}")
        arch = self.arch or _gpu_arch(q.device)
        kernel = self.kernel(arch, int(q.shape[-1]), dtype, causal)
        if scale is None:
            scale = 1.0 / math.sqrt(q.shape[-1])
        if out is None:
            out = torch.empty_like(q)
        if lse is None:
            lse = torch.empty(q.shape[:3], dtype=torch.float32,
                              device=q.device)
        o, lse_out = kernel(q, k, v, out=out, lse=lse, scale=scale)
        if lse_out is None:
            raise ValueError(f"kernel {kernel.name} writes no LSE; ring "
                             f"attention needs it to merge")
        return o, lse_out


def _resolve_backend(backend, q, kernel_dir, arch, sm_margin=0):
    if callable(backend):
        return backend
    if backend == "auto":
        backend = "kernel" if q.is_cuda else "cpu"
    if backend == "kernel":
        return KernelAttention(kernel_dir, arch, sm_margin)
    if backend == "cpu":
        return cpu_attention
    if backend == "torch":
        return torch_attention
    raise ValueError(f"backend must be 'auto', 'kernel', 'cpu', 'torch' or a "
                     f"callable, got {backend!r}")


# -- merging ------------------------------------------------------------------

def merge_partial(acc_o, acc_lse, o, lse):
    """Merges a partial (o, lse) into the running (acc_o, acc_lse) in place
    (acc_* are float32 or float64; they may be views):
    LSE = logaddexp(acc_lse, lse), O = exp(acc_lse - LSE) acc_o +
    exp(lse - LSE) o; rows where both are -inf stay O = 0, LSE = -inf."""
    lse = lse.to(acc_lse.dtype)
    new = torch.logaddexp(acc_lse, lse)
    base = torch.where(torch.isneginf(new), torch.zeros_like(new), new)
    w_old = torch.exp(acc_lse - base).unsqueeze(-1)
    w_new = torch.exp(lse - base).unsqueeze(-1)
    acc_o.mul_(w_old).addcmul_(o, w_new)  # o promoted, no temporary
    acc_lse.copy_(new)


class _Accumulator:
    """One rank's running (O, LSE) and its per-block attention."""

    def __init__(self, q, rank, world, causal, layout, scale, step_fn):
        self.q, self.rank, self.world = q, rank, world
        self.causal, self.layout = causal, layout
        self.scale, self.step_fn = scale, step_fn
        self.n = q.shape[2]
        self.acc_dtype = (torch.float64 if q.dtype == torch.float64
                          else torch.float32)
        self.o = None
        self.lse = None
        self._q_rows = {(0, self.n): q}

    def _q(self, lo, hi):
        # The kernels take contiguous [B, H, N, D]: slice once, keep it.
        if (lo, hi) not in self._q_rows:
            self._q_rows[(lo, hi)] = self.q[:, :, lo:hi].contiguous()
        return self._q_rows[(lo, hi)]

    def attend(self, src, k, v):
        pieces = block_pieces(self.rank, src, self.world, self.n,
                              self.causal, self.layout)
        for q_lo, q_hi, k_lo, k_hi, diagonal in pieces:
            if (k_lo, k_hi) == (0, self.n):
                ks, vs = k, v
            else:
                ks = k[:, :, k_lo:k_hi].contiguous()
                vs = v[:, :, k_lo:k_hi].contiguous()
            o, lse = self.step_fn(self._q(q_lo, q_hi), ks, vs, diagonal,
                                  self.scale)
            if self.o is None and (q_lo, q_hi) == (0, self.n):
                self.o = o.to(self.acc_dtype, copy=True)
                self.lse = lse.to(self.acc_dtype, copy=True)
                continue
            if self.o is None:
                b, h, _, d = self.q.shape
                self.o = torch.zeros((b, h, self.n, d), dtype=self.acc_dtype,
                                     device=self.q.device)
                self.lse = torch.full((b, h, self.n), float("-inf"),
                                      dtype=self.acc_dtype,
                                      device=self.q.device)
            merge_partial(self.o[:, :, q_lo:q_hi], self.lse[:, :, q_lo:q_hi],
                          o, lse)
        return len(pieces)

    def result(self):
        if self.o is None:  # only a rank that attended nothing (impossible)
            b, h, _, d = self.q.shape
            return (torch.zeros_like(self.q),
                    torch.full((b, h, self.n), float("-inf"),
                               device=self.q.device))
        lse = self.lse if self.acc_dtype == torch.float64 else \
            self.lse.to(torch.float32)
        return self.o.to(self.q.dtype), lse


# -- argument checks ----------------------------------------------------------

_DTYPE_CODES = {torch.float16: 1, torch.bfloat16: 2, torch.float32: 3,
                torch.float64: 4}


def _local_problem(q, k, v, causal, layout, world, comm_backend=None):
    """(error message or None, shape vector) of this rank's arguments."""
    shape = [-1] * 7
    try:
        _check_layout(layout)
        for name, t in (("q", q), ("k", k), ("v", v)):
            if not isinstance(t, torch.Tensor):
                return (f"{name} must be a torch.Tensor, got "
                        f"{type(t).__name__}", shape)
            if t.dim() != 4:
                return (f"{name} must have rank 4 [B, H, N_local, D], got "
                        f"shape {tuple(t.shape)}", shape)
        b, hq, n, d = q.shape
        shape = [b, hq, k.shape[1], n, d, _DTYPE_CODES.get(q.dtype, 0),
                 int(q.is_cuda)]
        if tuple(k.shape) != tuple(v.shape):
            return (f"k and v must have one shape, got {tuple(k.shape)} and "
                    f"{tuple(v.shape)}", shape)
        if k.shape[0] != b or k.shape[3] != d:
            return (f"k/v must be [B={b}, H_kv, N_local, D={d}], got "
                    f"{tuple(k.shape)}", shape)
        if k.shape[1] == 0 or hq % k.shape[1] != 0:
            return (f"query heads ({hq}) must be a multiple of key/value "
                    f"heads ({k.shape[1]})", shape)
        if k.shape[2] != n:
            return (f"equal shard lengths are required: this rank's queries "
                    f"have {n} rows, its keys {k.shape[2]}", shape)
        if n == 0:
            return "the local sequence is empty", shape
        if q.dtype != k.dtype or q.dtype != v.dtype:
            return (f"q, k, v must have one dtype, got {q.dtype}, {k.dtype}, "
                    f"{v.dtype}", shape)
        if len({q.device, k.device, v.device}) != 1:
            return "q, k, v must be on one device", shape
        if comm_backend == "nccl" and not q.is_cuda:
            return ("an NCCL process group needs CUDA tensors (use gloo for "
                    "CPU tensors)", shape)
        if causal and layout == "zigzag" and n % 2:
            return (f"a zig-zag shard holds two equal chunks: the local "
                    f"length {n} must be even (the full sequence a multiple "
                    f"of 2 x {world} = {2 * world})", shape)
    except Exception as e:  # anything odd: refuse on every rank
        return f"{type(e).__name__}: {e}", shape
    return None, shape


def _agree(q, k, v, causal, layout, group, world):
    """Every rank checks its arguments and the ranks compare shapes in one
    all-reduce, so a bad shard raises the same ValueError on every rank
    instead of a hang in the ring."""
    comm_backend = dist.get_backend(group)
    error, shape = _local_problem(q, k, v, causal, layout, world,
                                  comm_backend)
    vec = [1 if error else 0] + shape
    device = "cpu"
    if comm_backend == "nccl":
        device = q.device if isinstance(q, torch.Tensor) and q.is_cuda \
            else torch.device("cuda", torch.cuda.current_device())
    t = torch.tensor(vec + [-x for x in vec], dtype=torch.int64,
                     device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    got = t.tolist()
    high, low = got[:len(vec)], [-x for x in got[len(vec):]]
    if error:
        raise ValueError(f"ring_attention: {error}")
    if high[0]:
        raise ValueError("ring_attention: another rank's arguments were "
                         "refused (see its ValueError)")
    if high != low:
        names = ["B", "Hq", "Hkv", "N_local", "D", "dtype", "is_cuda"]
        diff = ", ".join(f"{nm} in [{lo}, {hi}]" for nm, lo, hi in
                         zip(names, low[1:], high[1:]) if lo != hi)
        raise ValueError(f"ring_attention: the ranks' shards differ ({diff});"
                         f" equal shard shapes are required (pad the "
                         f"sequence to a multiple of the shard count)")


def _global_rank(group, rank):
    if group is None or group is dist.GroupMember.WORLD:
        return rank
    if hasattr(dist, "get_global_rank"):
        return dist.get_global_rank(group, rank)
    return dist.distributed_c10d._get_global_rank(group, rank)


_COMM_STREAMS = {}


def _comm_stream(device):
    index = device.index if device.index is not None else \
        torch.cuda.current_device()
    if index not in _COMM_STREAMS:
        _COMM_STREAMS[index] = torch.cuda.Stream(device=index)
    return _COMM_STREAMS[index]


# -- the ring -----------------------------------------------------------------

def ring_attention(q, k, v, causal=False, scale=None, group=None,
                   backend="auto", layout="contiguous", kernel_dir=None,
                   arch=None, sm_margin=0, check=True, stats=None):
    """Context-parallel attention of this rank's query shard against the
    whole (sharded) sequence; see the module's docstring.

    q: [B, Hq, N_local, D]; k, v: [B, Hkv, N_local, D] (Hkv divides Hq), the
    same shapes on every rank (checked with one all-reduce unless
    check=False). layout: how the sequence was sharded ("contiguous" or
    "zigzag", see zigzag_shard); it matters only when causal. scale defaults
    to 1/sqrt(D). backend: "auto", "kernel", "cpu", "torch" or a callable
    fn(q, k, v, causal, scale) -> (O, LSE). kernel_dir / arch / sm_margin:
    for the kernel backend (see KernelAttention). stats: a list that
    receives one dict per step: step, src, send, recv, pieces and times in
    ms; on CUDA from events after the call (comm_ms: the exchange on its
    stream, compute_ms: the attention and merge, step_ms: both, from the
    earlier start to the later end), on the host from the clock (post_ms,
    compute_ms, wait_ms: how long the exchange outlasted the compute).

    Returns (O in q's dtype, LSE in float32; float64 for float64 inputs),
    O [B, Hq, N_local, D] and LSE [B, Hq, N_local] for this rank's rows."""
    world = dist.get_world_size(group)
    rank = dist.get_rank(group)
    if check:
        _agree(q, k, v, causal, layout, group, world)
    else:
        error, _ = _local_problem(q, k, v, causal, layout, world,
                                  dist.get_backend(group))
        if error:
            raise ValueError(f"ring_attention: {error}")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    step_fn = _resolve_backend(backend, q, kernel_dir, arch, sm_margin)
    plan = ring_plan(rank, world, causal, layout)
    acc = _Accumulator(q, rank, world, causal, layout, scale, step_fn)
    cuda = q.is_cuda
    nxt = _global_rank(group, (rank + 1) % world)
    prv = _global_rank(group, (rank - 1) % world)

    # K and V travel as one message: [2, B, Hkv, N_local, D], double
    # buffered (the block being attended, the block arriving).
    bufs = [torch.stack((k, v))]
    if world > 1 and any(p["recv"] for p in plan):
        bufs.append(torch.empty_like(bufs[0]))
    if cuda:
        compute = torch.cuda.current_stream(q.device)
        comm = _comm_stream(q.device)
        timing = stats is not None
        events = []

    for step in plan:
        s = step["step"]
        cur = bufs[s % 2] if step["holds"] else None
        ops = []
        # As bytes: gloo has no bfloat16 (NCCL moves the same bytes).
        if step["send"]:
            ops.append(dist.P2POp(dist.isend, cur.view(torch.uint8), nxt,
                                  group))
        if step["recv"]:
            ops.append(dist.P2POp(dist.irecv,
                                  bufs[(s + 1) % 2].view(torch.uint8), prv,
                                  group))
        record = {"step": s, "src": step["src"], "send": step["send"],
                  "recv": step["recv"], "pieces": len(step["pieces"])}
        if cuda:
            if timing:
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
            # The exchange may start once the previous step's compute is
            # done with the buffer it receives into.
            comm.wait_stream(compute)
            reqs = []
            with torch.cuda.stream(comm):
                if timing:
                    ev[0].record(comm)
                if ops:
                    reqs = dist.batch_isend_irecv(ops)
            if timing:
                ev[2].record(compute)
            if step["pieces"]:
                acc.attend(step["src"], cur[0], cur[1])
            if timing:
                ev[3].record(compute)
            with torch.cuda.stream(comm):
                for r in reqs:
                    r.wait()  # makes the comm stream wait for the transfer
                if timing:
                    ev[1].record(comm)
            compute.wait_stream(comm)
            if timing:
                events.append((record, ev))
        else:
            t0 = time.perf_counter()
            reqs = dist.batch_isend_irecv(ops) if ops else []
            t1 = time.perf_counter()
            if step["pieces"]:
                acc.attend(step["src"], cur[0], cur[1])
            t2 = time.perf_counter()
            for r in reqs:
                r.wait()
            t3 = time.perf_counter()
            record.update(post_ms=1e3 * (t1 - t0), compute_ms=1e3 * (t2 - t1),
                          wait_ms=1e3 * (t3 - t2))
            if stats is not None:
                stats.append(record)

    out = acc.result()
    if cuda and timing:
        torch.cuda.synchronize(q.device)
        for record, ev in events:
            # Times from the exchange's start (ev[0]); the step spans both
            # streams: from the earlier start to the later end.
            comm_ms = ev[0].elapsed_time(ev[1])
            compute_ms = ev[2].elapsed_time(ev[3])
            start = min(0.0, ev[0].elapsed_time(ev[2]))
            step_ms = max(comm_ms, ev[0].elapsed_time(ev[3])) - start
            record.update(comm_ms=comm_ms, compute_ms=compute_ms,
                          step_ms=step_ms)
            stats.append(record)
    return out


def simulate_ring(q, k, v, world, causal=False, scale=None, backend="auto",
                  layout="contiguous", kernel_dir=None, arch=None):
    """The ring's arithmetic without a process group: shards the full
    q, k, v [B, H, N, D] over `world` virtual ranks, runs every rank's
    schedule (the same plan, pieces and merges as ring_attention, the
    blocks handed over directly) and returns the full (O, LSE). For
    checking the schedule on one device."""
    _check_layout(layout)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    step_fn = _resolve_backend(backend, q, kernel_dir, arch)
    qs = [shard_sequence(q, r, world, 2, layout) for r in range(world)]
    ks = [shard_sequence(k, r, world, 2, layout) for r in range(world)]
    vs = [shard_sequence(v, r, world, 2, layout) for r in range(world)]
    outs, lses = [], []
    for r in range(world):
        error, _ = _local_problem(qs[r], ks[r], vs[r], causal, layout, world)
        if error:
            raise ValueError(f"simulate_ring: {error}")
        acc = _Accumulator(qs[r], r, world, causal, layout, scale, step_fn)
        for step in ring_plan(r, world, causal, layout):
            if step["pieces"]:
                acc.attend(step["src"], ks[step["src"]], vs[step["src"]])
        o, lse = acc.result()
        outs.append(o)
        lses.append(lse)
    return unshard_sequence(outs, 2, layout), unshard_sequence(lses, 2,
                                                               layout)
