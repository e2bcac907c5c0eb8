// RUN: fa-opt %s --fa-tile="block-r=32 block-c=64" --fa-lower-fa2 --fa-conditional-rescale --cse | FileCheck %s
// RUN: fa-opt %s --fa-tile="block-r=32 block-c=64" --fa-lower-fa1 --fa-conditional-rescale="threshold=0" --cse | FileCheck %s --check-prefix=FA1
// RUN: fa-opt %s --fa-tile="block-r=32 block-c=64" --fa-lower-fa2 --fa-conditional-rescale="instrument=true" --cse | FileCheck %s --check-prefix=COUNT
// RUN: not fa-opt %s --fa-conditional-rescale="threshold=-1" 2>&1 | FileCheck %s --check-prefix=BAD

// FA4 conditional rescaling on the FA2 loop nest: the running-max buffer
// becomes the scaling base m-bar, updated by a step that moves it only past
// the threshold, and the rescale of O runs only when some row moved.
// CHECK-LABEL: func @attention
// CHECK: fa.init_state %[[BASE:.*]], %[[L:.*]], %[[ACC:.*]] :
// CHECK: scf.for
// CHECK:   fa.score_tile %{{.*}}, %{{.*}} -> %[[S:.*]] at
// CHECK:   %[[MOVED:.*]] = fa.conditional_softmax_update %[[S]], %[[BASE]], %[[L]] -> %[[ALPHA:.*]] {threshold = 8.000000e+00 : f32}
// CHECK-NOT: fa.softmax_update
// CHECK:   scf.if %[[MOVED]] {
// CHECK-NEXT: fa.rescale %[[ACC]], %[[ALPHA]]
// CHECK-NEXT: }
// CHECK:   fa.pv_accumulate %[[S]], %{{.*}} -> %[[ACC]]
// CHECK: fa.normalize %[[ACC]], %[[L]]
// LSE against the base: exact, O and l share it.
// CHECK: fa.logsumexp %[[BASE]], %[[L]] ->

// In the FA1 loop order the base round-trips through memory like m did;
// the rescale that undoes the previous normalisation (by l) stays.
// FA1: fa.rescale %[[ACC:.*]], %[[L:.*]] :
// FA1: %[[MOVED:.*]] = fa.conditional_softmax_update %{{.*}}, %{{.*}}, %[[L]] -> %[[ALPHA:.*]] {threshold = 0.000000e+00 : f32}
// FA1: scf.if %[[MOVED]] {
// FA1-NEXT: fa.rescale %[[ACC]], %[[ALPHA]]
// FA1: fa.normalize %[[ACC]], %[[L]]

// COUNT: memref.global @fa_rescale_counters : memref<3xf64> = dense<0.000000e+00>
// COUNT: %[[C:.*]] = memref.get_global @fa_rescale_counters : memref<3xf64>
// COUNT: fa.conditional_softmax_update %{{.*}}, %{{.*}}, %{{.*}} -> %{{.*}} counters(%[[C]] : memref<3xf64>)

// BAD: fa-conditional-rescale: expected rescale threshold in [0, 64], got -1
func.func @attention(%q: memref<1x2x100x64xf32>, %k: memref<1x2x300x64xf32>,
                     %v: memref<1x2x300x64xf32>, %o: memref<1x2x100x64xf32>,
                     %lse: memref<1x2x100xf32>) {
  fa.attention %q, %k, %v outs(%o, %lse : memref<1x2x100x64xf32>, memref<1x2x100xf32>)
      : memref<1x2x100x64xf32>, memref<1x2x300x64xf32>, memref<1x2x300x64xf32>
  return
}
