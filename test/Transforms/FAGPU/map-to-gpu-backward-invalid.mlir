// RUN: fa-opt %s --split-input-file --fa-lower-fa2-backward="block-r=64 block-c=64" --fa-map-to-gpu=target=sm_80 --verify-diagnostics

// What the backward kernel does not take is refused at the nest, each with
// the way out (the CPU pipeline runs every one of them).

!t = memref<?x?x?x64xf16>
func.func @softcap(%q: !t, %k: !t, %v: !t, %o: !t, %lse: memref<?x?x?xf32>,
                   %do: !t, %dq: !t, %dk: !t, %dv: !t) {
  // expected-error @+1 {{fa-map-to-gpu: softcaps have no GPU backward yet (the CPU pipeline runs it: fa-cpu-pipeline)}}
  fa.attention_backward %q, %k, %v, %o, %lse, %do outs(%dq, %dk, %dv : !t, !t, !t)
      {softcap = 30.0 : f32} : !t, !t, !t, !t, memref<?x?x?xf32>, !t
  return
}

// -----

!t = memref<?x?x?x96xf16>
func.func @head_dim(%q: !t, %k: !t, %v: !t, %o: !t, %lse: memref<?x?x?xf32>,
                    %do: !t, %dq: !t, %dk: !t, %dv: !t) {
  // expected-error @+1 {{fa-map-to-gpu: the backward kernel takes D = Dv of 64 or 128, got D = 96, Dv = 96 (the CPU pipeline runs it: fa-cpu-pipeline)}}
  fa.attention_backward %q, %k, %v, %o, %lse, %do outs(%dq, %dk, %dv : !t, !t, !t)
      : !t, !t, !t, !t, memref<?x?x?xf32>, !t
  return
}

// -----

!t = memref<?x?x?x64xf32>
func.func @f32_inputs(%q: !t, %k: !t, %v: !t, %o: !t, %lse: memref<?x?x?xf32>,
                      %do: !t, %dq: !t, %dk: !t, %dv: !t) {
  // expected-error @+1 {{fa-map-to-gpu: the backward kernel takes f16 or bf16 inputs, got f32 (the CPU pipeline runs it: fa-cpu-pipeline)}}
  fa.attention_backward %q, %k, %v, %o, %lse, %do outs(%dq, %dk, %dv : !t, !t, !t)
      : !t, !t, !t, !t, memref<?x?x?xf32>, !t
  return
}

// -----

!t = memref<?x?x?x64xf16>
!s = memref<?xi32>
func.func @varlen(%q: !t, %k: !t, %v: !t, %o: !t, %lse: memref<?x?x?xf32>,
                  %do: !t, %dq: !t, %dk: !t, %dv: !t, %cq: !s, %ck: !s) {
  // expected-error @+1 {{fa-map-to-gpu: varlen batches have no GPU backward yet (the CPU pipeline runs it: fa-cpu-pipeline)}}
  fa.attention_backward %q, %k, %v, %o, %lse, %do varlen(%cq, %ck : !s, !s)
      outs(%dq, %dk, %dv : !t, !t, !t) {causal}
      : !t, !t, !t, !t, memref<?x?x?xf32>, !t
  return
}
