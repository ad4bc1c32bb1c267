// The scalar reference twin of cpu::attention (kernels/cpu/ops.h): one (query row, head) at a
// time, in the plain loop order that the SIMD kernel must reproduce. Tests hold cpu::attention
// to it; the engine never calls it (cpu::attention falls back to it by itself where the SIMD
// kernel does not apply: no AVX2/FMA, or head_dim not a multiple of 8).
#pragma once

#include "kernels/cpu/ops.h"

namespace specchat::cpu {

// Same contract as cpu::attention, serial: out [n_tokens, n_head, head_dim]. a.scratch is not
// needed (a local buffer holds the scores).
void attention_ref(const AttentionArgs& a);

}  // namespace specchat::cpu
