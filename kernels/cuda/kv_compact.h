// KV cache path compaction after tree verification, on the device. CPU twin:
// kernels/cpu/kv_compact.h.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace specchat::cuda {

// For every layer il < n_layer, copies row path[j] to row dst0 + j (j < n_path) of one cache
// buffer (K or V; call once for each): row s of layer il starts at
// cache + il * layer_stride + s * row_stride and holds row_floats f32 (n_head_kv * head_dim).
// path [n_path] int32 on the device. Precondition (check on the host with
// cpu::check_kv_path before uploading): path strictly increasing and path[j] >= dst0 + j.
// Why in-place is safe: every (layer, column) is an independent thread that copies j = 0, 1, ...
// in order. A read of path[j] never sees an earlier write of that thread (earlier writes went to
// dst0 + j' < dst0 + j <= path[j]); a later write may hit a slot an earlier j read, which is fine
// because program order puts the read first. Threads never share a column, so no races.
// Throws CudaError on a launch error.
void kv_compact(float* cache, int n_layer, int64_t layer_stride, int64_t row_stride,
                int row_floats, const int32_t* path, int n_path, int dst0, cudaStream_t stream);

}  // namespace specchat::cuda
