// Attention variants whose regions fold into no built-in (f16, [B, H, N,
// D], H = 4; the last two read captured tensors): the sm_90a kernel
// evaluates them on every score
// (fagpu.modify_scores). bench/flex_module.py checks each launch on a GPU
// against the same arithmetic written in torch; fa-compile-module-regions.test
// checks the kernels they compile to.
func.func @variants(%q: tensor<1x4x256x128xf16>, %k: tensor<1x4x256x128xf16>, %v: tensor<1x4x256x128xf16>, %slopes: tensor<16xf32>, %docs_ids: tensor<16384xi32>) -> (tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>) {
  // ALiBi with the causal mask: slope 2^(-8 (h + 1) / H) times (j - i).
  // The mask folds into `causal`; the bias stays a region.
  %alibi = fa.attention %q, %k, %v {scale = 0.088388346 : f32}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %hi = arith.index_cast %h : index to i32
      %hf = arith.sitofp %hi : i32 to f32
      %one = arith.constant 1.0 : f32
      %h1 = arith.addf %hf, %one : f32
      %minus2 = arith.constant -2.0 : f32
      %e = arith.mulf %h1, %minus2 : f32
      %slope = math.exp2 %e : f32
      %d = arith.subi %j, %i : index
      %di = arith.index_cast %d : index to i32
      %df = arith.sitofp %di : i32 to f32
      %bias = arith.mulf %slope, %df : f32
      %r = arith.addf %s, %bias : f32
      fa.yield %r : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      fa.yield %c : i1
    }
  // Prefix-LM: the first 64 keys bidirectional, the rest causal.
  %prefix = fa.attention %q, %k, %v {scale = 0.088388346 : f32}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %c = arith.cmpi sge, %i, %j : index
      %p = arith.constant 64 : index
      %inprefix = arith.cmpi slt, %j, %p : index
      %vis = arith.ori %c, %inprefix : i1
      fa.yield %vis : i1
    }
  // Documents of 96 rows packed in one sequence, causal within each: the
  // floor division is expanded into arith ops LLVM lowers.
  %docs = fa.attention %q, %k, %v {scale = 0.088388346 : f32}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %n = arith.constant 96 : index
      %di = arith.floordivsi %i, %n : index
      %dj = arith.floordivsi %j, %n : index
      %same = arith.cmpi eq, %di, %dj : index
      %c = arith.cmpi sge, %i, %j : index
      %vis = arith.andi %same, %c : i1
      fa.yield %vis : i1
    }
  // A softcap of 30 (folds into `softcap`, applied before score_mod) and a
  // relative bias that decays with distance: 0.5 log(1 + exp(-|i - j| / 32)).
  %decay = fa.attention %q, %k, %v {scale = 0.088388346 : f32, softcap = 30.0 : f32}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %d = arith.subi %i, %j : index
      %di = arith.index_cast %d : index to i32
      %df = arith.sitofp %di : i32 to f32
      %a = math.absf %df : f32
      %c = arith.constant -0.03125 : f32
      %x = arith.mulf %a, %c : f32
      %ex = math.exp %x : f32
      %one = arith.constant 1.0 : f32
      %y = arith.addf %ex, %one : f32
      %l = math.log %y : f32
      %half = arith.constant 0.5 : f32
      %bias = arith.mulf %l, %half : f32
      %r = arith.addf %s, %bias : f32
      fa.yield %r : f32
    }
  // A per-head temperature with a tanh cap written out (not the softcap
  // form): 20 tanh(s (h + 1) / 80), and the keys of odd batch rows hidden
  // past 200.
  %temp = fa.attention %q, %k, %v {scale = 0.088388346 : f32}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index):
      %hi = arith.index_cast %h : index to i32
      %hf = arith.sitofp %hi : i32 to f32
      %one = arith.constant 1.0 : f32
      %h1 = arith.addf %hf, %one : f32
      %t = arith.mulf %s, %h1 : f32
      %c80 = arith.constant 80.0 : f32
      %u = arith.divf %t, %c80 : f32
      %th = math.tanh %u : f32
      %c20 = arith.constant 20.0 : f32
      %r = arith.mulf %th, %c20 : f32
      fa.yield %r : f32
    } mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index):
      %two = arith.constant 2 : index
      %odd = arith.remui %b, %two : index
      %zero = arith.constant 0 : index
      %even = arith.cmpi eq, %odd, %zero : index
      %limit = arith.constant 200 : index
      %near = arith.cmpi slt, %j, %limit : index
      %vis = arith.ori %even, %near : i1
      fa.yield %vis : i1
    }
  // ALiBi with per-head slopes read from a captured tensor (up to 16
  // heads), and the causal mask.
  %alibi_t = fa.attention %q, %k, %v captures(%slopes : tensor<16xf32>) {scale = 0.088388346 : f32, causal}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
    score_mod {
    ^bb0(%s: f32, %b: index, %h: index, %i: index, %j: index, %m: tensor<16xf32>):
      %slope = tensor.extract %m[%h] : tensor<16xf32>
      %d = arith.subi %j, %i : index
      %di = arith.index_cast %d : index to i64
      %df = arith.sitofp %di : i64 to f32
      %r = math.fma %slope, %df, %s : f32
      fa.yield %r : f32
    }
  // Packed documents: a key is visible to a query of the same document id
  // (a captured tensor of each position's id, up to 16k positions), causal.
  %packed = fa.attention %q, %k, %v captures(%docs_ids : tensor<16384xi32>) {scale = 0.088388346 : f32, causal}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
    mask_mod {
    ^bb0(%b: index, %h: index, %i: index, %j: index, %d: tensor<16384xi32>):
      %di = tensor.extract %d[%i] : tensor<16384xi32>
      %dj = tensor.extract %d[%j] : tensor<16384xi32>
      %same = arith.cmpi eq, %di, %dj : i32
      fa.yield %same : i1
    }
  // The built-in causal kernel, the baseline of the causal variants' speed.
  %causal = fa.attention %q, %k, %v {scale = 0.088388346 : f32, causal}
      : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16> -> tensor<1x4x256x128xf16>
  return %alibi, %prefix, %docs, %decay, %temp, %alibi_t, %packed, %causal : tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>, tensor<1x4x256x128xf16>
}
