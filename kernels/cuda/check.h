// One checking macro for every CUDA runtime and cuBLAS call (STYLE.md §6): a failure becomes a
// specchat::cuda::CudaError naming the call text, file, line and the library's error string.
// Nothing here aborts. Compiles with g++ (no nvcc needed): only the CUDA C headers are included.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace specchat::cuda {

// A failed CUDA runtime or cuBLAS call (or a kernel launch). what(): "<call> failed at
// <file>:<line>: <error name>: <error string>". Engine code catches it like any engine error.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_error(cudaError_t err, const char* call, const char* file, int line);
[[noreturn]] void throw_error(cublasStatus_t err, const char* call, const char* file, int line);

inline void check(cudaError_t err, const char* call, const char* file, int line) {
  if (err != cudaSuccess) throw_error(err, call, file, line);
}
inline void check(cublasStatus_t err, const char* call, const char* file, int line) {
  if (err != CUBLAS_STATUS_SUCCESS) throw_error(err, call, file, line);
}

}  // namespace specchat::cuda

// Checks a cudaError_t or a cublasStatus_t (overloaded on the result type); throws CudaError.
#define SPECCHAT_CUDA_CHECK(call) ::specchat::cuda::check((call), #call, __FILE__, __LINE__)
// Same macro; the second name only reads better next to cuBLAS calls.
#define SPECCHAT_CUBLAS_CHECK(call) ::specchat::cuda::check((call), #call, __FILE__, __LINE__)
// After a kernel launch: turns a bad launch configuration into a CudaError (asynchronous faults
// inside the kernel surface at the next synchronising call, which is checked too).
#define SPECCHAT_CUDA_CHECK_LAUNCH() \
  ::specchat::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

namespace specchat::cuda {

// True when the CUDA driver is present and at least one device is visible. Never throws: with
// no driver, an old driver or no device it returns false and, when why != nullptr, sets *why to
// the runtime's explanation (e.g. "cudaGetDeviceCount: CUDA driver version is insufficient...").
bool device_available(std::string* why = nullptr);

// What the live panel, --json and the GPU check print about a device.
struct DeviceInfo {
  int device = 0;
  std::string name;            // cudaDeviceProp::name, e.g. "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t total_bytes = 0;      // cudaMemGetInfo, bytes
  size_t free_bytes = 0;       // cudaMemGetInfo at the time of the call, bytes
  double bandwidth_gbs = 0;    // theoretical DRAM bandwidth, GB/s (1e9 bytes/s); 0 if unknown
  bool bandwidth_from_table = false;  // true when taken from the name table (no attribute)
};

// Queries device `device` (makes it current). Bandwidth = 2 (DDR) * memory clock (kHz) * bus
// width (bits) / 8, from cudaDevAttrMemoryClockRate / cudaDevAttrGlobalMemoryBusWidth; when the
// driver reports 0 for either (some CUDA 13 drivers do), a table by name (H200 4800 GB/s, H100
// SXM 3350, A100 80GB 2039, ...). Throws CudaError when the device cannot be queried.
DeviceInfo device_info(int device = 0);

// Refreshes free/total bytes only (cheap; for the live VRAM panel). Throws CudaError.
void mem_info(size_t* free_bytes, size_t* total_bytes);

}  // namespace specchat::cuda
