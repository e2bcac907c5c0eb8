// RUN: fa-opt %s --fa-io-report -o /dev/null | FileCheck %s

// The model's constants for one case worked by hand: B=1, Hq=1, Nq=Nk=256,
// D=Dv=64, B_r=64, B_c=128 (T_r=4, T_c=2), f32, no LSE.
//   standard = 256*64 + 256*128 + 4*256*256 + 256*64           = 327680
//   FA1      = 256*128 + 256*64 + 2*256 + 2*(256*64 + 2*256*64 + 4*256)
//            = 32768 + 16384 + 512 + 2*50176                    = 150016
//   (reads: K, V + T_c*(Q_i, O_i, m_i, l_i) = 32768 + 2*33280 = 99328;
//    writes: O, l, m init + T_c*(O_i, m_i, l_i) = 16896 + 2*16896 = 50688)
//   FA2      = 256*64 + 4*256*128 + 256*64                       = 163840
// CHECK: standard predicted: 327680
// CHECK: fa1 predicted: 150016
// CHECK: fa2 predicted: 163840
// CHECK: fa1 counted: 150016  (reads 99328, writes 50688)
// CHECK: fa2 counted: 163840  (reads 147456, writes 16384)
func.func @hand(%q: memref<1x1x256x64xf32>, %k: memref<1x1x256x64xf32>, %v: memref<1x1x256x64xf32>,
                %o: memref<1x1x256x64xf32>) {
  fa.attention %q, %k, %v outs(%o : memref<1x1x256x64xf32>) {block_r = 64 : i64, block_c = 128 : i64}
      : memref<1x1x256x64xf32>, memref<1x1x256x64xf32>, memref<1x1x256x64xf32>
  return
}
