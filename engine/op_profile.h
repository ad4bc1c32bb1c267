// Time split of forwards by operation (issue 10 §5: `specchat-cli bench --profile`).
//
// The CPU backend adds the wall time of each operation of a forward to the OpProfile it was given
// (LlamaModel::set_profile); with none given it does not read the clock at all. The CUDA backend
// records a CUDA event after each operation and adds the device time between consecutive events
// (so gaps where the GPU waits for the host count toward the next operation); with none given
// it records no events. Each matmul kind
// is one entry, named with its shape (n_in → n_out) by the backend, so the table says which
// weight matrices cost what; attention, norms, RoPE, K/V writes and element-wise ops are entries
// of their own. Times are wall milliseconds of the calling thread (a pooled op counts once, for
// its whole parallel region).
#pragma once

#include <array>
#include <chrono>
#include <string>

#include "engine/model_config.h"

namespace specchat {

struct OpProfile {
  enum Op {
    embed,         // token embedding rows (dequantized)
    norm,          // RMSNorms (attention, FFN, final; Q/K norms of qwen3)
    matmul_qkv,    // Q, K, V projections (one pool region)
    bias,          // Q/K/V biases (qwen2)
    rope,          // rotary position embedding of Q and K
    kv_write,      // K/V rows into the sequences' caches
    attention,     // tree/causal attention over each sequence's slots
    matmul_o,      // attention output projection
    residual,      // residual additions
    matmul_gate_up,  // FFN gate and up (one pool region)
    swiglu,        // SiLU(gate) · up
    matmul_down,   // FFN down projection
    hidden_copy,   // hidden states handed out (feature drafters)
    matmul_head,   // LM head over the output rows
    copy_out,      // device backends: logits/hidden states to the host and the final sync
    kCount
  };
  struct Entry {
    std::string name;  // e.g. "matmul Q/K/V 320 → 320+80+80"
    double ms = 0;     // total wall ms
    long calls = 0;
  };
  std::array<Entry, kCount> ops{};
  long forwards = 0;   // forwards recorded
  long rows = 0;       // rows (tokens) they processed

  void add(Op op, double ms) {
    ops[op].ms += ms;
    ++ops[op].calls;
  }
  double total_ms() const {
    double t = 0;
    for (const Entry& e : ops) t += e.ms;
    return t;
  }
  void clear() {
    for (Entry& e : ops) e.ms = 0, e.calls = 0;
    forwards = rows = 0;
  }
};

// Names the entries for a model of config c (the matmul entries carry their shapes), as the
// backends do in set_profile.
void name_profile_ops(OpProfile& p, const ModelConfig& c);

// Adds the time from construction to destruction to `op` of `p` (nothing, and no clock read, when
// p is null).
class OpTimer {
 public:
  OpTimer(OpProfile* p, OpProfile::Op op) : p_(p), op_(op) {
    if (p_) t0_ = std::chrono::steady_clock::now();
  }
  ~OpTimer() {
    if (p_) p_->add(op_, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0_).count());
  }
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  OpProfile* p_;
  OpProfile::Op op_;
  std::chrono::steady_clock::time_point t0_{};
};

}  // namespace specchat
