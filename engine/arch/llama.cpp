// llama (llama.cpp's LLM_ARCH_LLAMA): Llama 2 and 3, Mistral 7B, TinyLlama, SmolLM.
// Adjacent-pair RoPE (the GGUF converter permutes Q/K rows into that order); Llama 3.1 and 3.2
// carry their rope scaling as the rope_freqs tensor; some conversions keep Q/K/V biases.
#include "engine/architecture.h"

namespace specchat {

const Architecture kArchLlama{"llama", RopeMode::norm, TensorUse::optional, TensorUse::absent, TensorUse::optional};

}  // namespace specchat
