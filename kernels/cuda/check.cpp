#include "kernels/cuda/check.h"

#include <cstring>

namespace specchat::cuda {

void throw_error(cudaError_t err, const char* call, const char* file, int line) {
  throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                  cudaGetErrorName(err) + ": " + cudaGetErrorString(err));
}

void throw_error(cublasStatus_t err, const char* call, const char* file, int line) {
  throw CudaError(std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                  cublasGetStatusName(err) + ": " + cublasGetStatusString(err));
}

bool device_available(std::string* why) {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    if (why != nullptr) {
      *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(err) + ": " +
             cudaGetErrorString(err);
    }
    (void)cudaGetLastError();  // clear the (non-sticky) error so later calls start clean
    return false;
  }
  if (n <= 0) {
    if (why != nullptr) *why = "no CUDA device visible";
    return false;
  }
  if (why != nullptr) why->clear();
  return true;
}

namespace {

// Theoretical DRAM bandwidth by product name, GB/s (vendor data sheets), for drivers that report
// no memory clock. Longest matching key wins ("H100 PCIe" before "H100").
double bandwidth_by_name(const std::string& name) {
  struct Entry {
    const char* key;
    double gbs;
  };
  static const Entry kTable[] = {
      {"H200", 4800},         {"H100 PCIe", 2000}, {"H100 NVL", 3900}, {"H100", 3350},
      {"GH200", 4000},        {"A100-SXM4-80GB", 2039}, {"A100 80GB", 1935}, {"A100", 1555},
      {"L40S", 864},          {"L40", 864},        {"L4", 300},        {"A10", 600},
      {"RTX 4090", 1008},     {"RTX 3090", 936},   {"RTX 6000 Ada", 960}, {"B200", 8000},
  };
  const Entry* best = nullptr;
  for (const Entry& e : kTable) {
    if (name.find(e.key) != std::string::npos &&
        (best == nullptr || std::strlen(e.key) > std::strlen(best->key))) {
      best = &e;
    }
  }
  return best != nullptr ? best->gbs : 0.0;
}

}  // namespace

DeviceInfo device_info(int device) {
  DeviceInfo info;
  info.device = device;
  SPECCHAT_CUDA_CHECK(cudaSetDevice(device));
  cudaDeviceProp prop{};
  SPECCHAT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  SPECCHAT_CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  int clock_khz = 0, bus_bits = 0;
  // cudaDeviceProp::memoryClockRate is gone in CUDA 13; the attribute remains. A failed query
  // is not fatal: the name table answers instead.
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess) {
    clock_khz = 0;
    (void)cudaGetLastError();
  }
  if (cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
    bus_bits = 0;
    (void)cudaGetLastError();
  }
  if (clock_khz > 0 && bus_bits > 0) {
    // Double data rate: two transfers per clock; kHz * bits / 8 = kB/s; / 1e6 -> GB/s.
    info.bandwidth_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
  } else {
    info.bandwidth_gbs = bandwidth_by_name(info.name);
    info.bandwidth_from_table = true;
  }
  return info;
}

void mem_info(size_t* free_bytes, size_t* total_bytes) {
  SPECCHAT_CUDA_CHECK(cudaMemGetInfo(free_bytes, total_bytes));
}

}  // namespace specchat::cuda
