// A training step's attention backward (fa-compile-backward.test compiles it
// through the C API: fa-compile-module).
!t = memref<?x?x?x128xbf16>
func.func @train_step(%q: !t, %k: !t, %v: !t, %o: !t, %lse: memref<?x?x?xf32>, %do: !t,
                      %dq: !t, %dk: !t, %dv: !t) {
  fa.attention_backward %q, %k, %v, %o, %lse, %do outs(%dq, %dk, %dv : !t, !t, !t)
      {causal} : !t, !t, !t, !t, memref<?x?x?xf32>, !t
  return
}
