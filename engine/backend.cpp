#include "engine/backend.h"

#include <stdexcept>

namespace specchat {

const char* backend_name(BackendKind k) { return k == BackendKind::cuda ? "cuda" : "cpu"; }

BackendKind parse_backend(const std::string& s) {
  if (s == "cpu") return BackendKind::cpu;
  if (s == "cuda") return BackendKind::cuda;
  throw std::invalid_argument("unknown backend '" + s + "' (expected cpu or cuda)");
}

#if defined(SPECCHAT_HAVE_CUDA) && SPECCHAT_HAVE_CUDA
bool cuda_backend_compiled() { return true; }
#else
bool cuda_backend_compiled() { return false; }

// This build has no CUDA backend: the factories refuse with the reason (engine/cuda_backend.cpp
// defines them in a SPECCHAT_CUDA=ON build).
namespace {
[[noreturn]] void no_cuda() {
  throw ModelError("no CUDA device: this build has no CUDA support (configure with -DSPECCHAT_CUDA=ON)");
}
}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const GgufFile&, const ModelConfig&, const BackendShape&) { no_cuda(); }
std::unique_ptr<Backend> make_cuda_backend_random(const ModelConfig&, const BackendShape&, uint64_t, const RandomMatrixType&) {
  no_cuda();
}
#endif

}  // namespace specchat
