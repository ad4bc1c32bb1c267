// DFlashModel's forwards (docs/design/target-feature-drafters.md, "DFlash block drafter"):
// context rows (fuse, then per-layer K/V) and the block. Loading is dflash_load.cpp.
#include "engine/drafters/dflash_model.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/cpu/embedding.h"
#include "kernels/cpu/linear.h"

namespace specchat {

namespace {
// Context rows are fused and projected this many at a time: bounds the working memory of a long
// prompt's prefill (feat_ holds chunk × m × d_model floats).
constexpr int kChunk = 32;

}  // namespace

void DFlashState::truncate(int n) {
  if (n < 0) throw std::invalid_argument("DFlashState::truncate: negative row count");
  n_rows_ = std::min(n_rows_, n);
}

DFlashState DFlashModel::new_state() const {
  const DFlashConfig& c = cfg_;
  const size_t B = static_cast<size_t>(c.block_size), d = static_cast<size_t>(c.d_model);
  const size_t nq = static_cast<size_t>(c.n_head * c.head_dim), nkv = static_cast<size_t>(c.n_head_kv * c.head_dim);
  const size_t rows = std::max<size_t>(B, kChunk);
  DFlashState s;
  s.k_.resize(static_cast<size_t>(c.n_layer));
  s.v_.resize(static_cast<size_t>(c.n_layer));
  s.feat_.resize(static_cast<size_t>(kChunk) * c.taps.size() * d);
  s.x_.resize(rows * d);
  s.xb_.resize(rows * d);
  s.q_.resize(B * nq);
  s.kb_.resize(B * nkv);
  s.vb_.resize(B * nkv);
  s.att_.resize(B * nq);
  s.gate_.resize(B * static_cast<size_t>(c.d_ff));
  s.up_.resize(B * static_cast<size_t>(c.d_ff));
  s.pos_.resize(rows);
  s.ids_.resize(B);
  reserve_rows(s, 256);
  return s;
}

void DFlashModel::reserve_rows(DFlashState& s, int rows) const {
  if (rows <= s.capacity_) return;
  const int cap = std::max(rows, 2 * s.capacity_);
  const size_t nkv = static_cast<size_t>(cfg_.n_head_kv * cfg_.head_dim);
  for (size_t il = 0; il < s.k_.size(); ++il) {
    s.k_[il].resize(static_cast<size_t>(cap) * nkv);  // keeps rows [0, capacity_)
    s.v_[il].resize(static_cast<size_t>(cap) * nkv);
  }
  s.scores_.resize(static_cast<size_t>(cap));
  s.capacity_ = cap;
}

void DFlashModel::norm_rope(float* x, const float* w, const int32_t* pos, int n, int heads) const {
  cpu::rmsnorm(x, w, x, n * heads, cfg_.head_dim, cfg_.norm_eps);
  cpu::rope_with_table(x, pos, n, heads, cfg_.head_dim, rope_, rope_cos_.data(), rope_sin_.data());
}

void DFlashModel::append_context(DFlashState& s, int pos0, const HiddenRows& h) const {
  const DFlashConfig& c = cfg_;
  if (pos0 != s.n_rows_) {
    throw std::invalid_argument("DFlashModel::append_context: rows start at " + std::to_string(pos0) +
                                " but the state holds " + std::to_string(s.n_rows_));
  }
  if (h.n_rows < 0 || (h.n_rows > 0 && h.d_model != c.d_model)) {
    throw std::invalid_argument("DFlashModel::append_context: hidden rows of width " + std::to_string(h.d_model) +
                                ", the drafter reads " + std::to_string(c.d_model));
  }
  if (h.n_rows == 0) return;
  if (pos0 + h.n_rows > n_pos_) {
    throw std::invalid_argument("DFlashModel::append_context: position " + std::to_string(pos0 + h.n_rows - 1) +
                                " past the drafter's " + std::to_string(n_pos_) + " positions");
  }
  std::vector<int> tap_index(c.taps.size());
  for (size_t t = 0; t < c.taps.size(); ++t) {
    tap_index[t] = h.index_of(c.taps[t]);
    if (tap_index[t] < 0) {
      throw std::invalid_argument("DFlashModel::append_context: hidden layer " + std::to_string(c.taps[t]) +
                                  " (a tap of the drafter) is missing");
    }
  }
  reserve_rows(s, pos0 + h.n_rows + c.block_size);
  const size_t d = static_cast<size_t>(c.d_model), m = c.taps.size();
  const size_t nkv = static_cast<size_t>(c.n_head_kv * c.head_dim);
  std::vector<cpu::LinearJob> jobs;  // 2 · n_layer, small
  jobs.reserve(2 * layers_.size());
  for (int r0 = 0; r0 < h.n_rows; r0 += kChunk) {
    const int n = std::min(kChunk, h.n_rows - r0);
    const int p0 = pos0 + r0;
    // 1. Fuse: feat = [h^(l_1); …; h^(l_m)] per row, c = RMSNorm_enc(W_fc feat).
    for (int r = 0; r < n; ++r) {
      for (size_t t = 0; t < m; ++t) {
        std::copy_n(h.row(tap_index[t], r0 + r), d, s.feat_.data() + (static_cast<size_t>(r) * m + t) * d);
      }
      s.pos_[static_cast<size_t>(r)] = p0 + r;
    }
    linear_view(s.feat_.data(), fc_, s.x_.data(), n, pool_.get(), act_);
    cpu::rmsnorm(s.x_.data(), enc_norm_, s.x_.data(), n, c.d_model, c.norm_eps);
    // 2. Every layer's K and V of these rows in one pool region, written in place.
    jobs.clear();
    for (size_t il = 0; il < layers_.size(); ++il) {
      jobs.push_back(linear_job(s.x_.data(), layers_[il].wk, s.k_[il].data() + static_cast<size_t>(p0) * nkv, n, act_));
      jobs.push_back(linear_job(s.x_.data(), layers_[il].wv, s.v_[il].data() + static_cast<size_t>(p0) * nkv, n, act_));
    }
    cpu::linear_multi(jobs, pool_.get());
    for (size_t il = 0; il < layers_.size(); ++il) {
      norm_rope(s.k_[il].data() + static_cast<size_t>(p0) * nkv, layers_[il].k_norm, s.pos_.data(), n, c.n_head_kv);
    }
  }
  s.n_rows_ = pos0 + h.n_rows;
}

void DFlashModel::draft_block(DFlashState& s, int32_t anchor_token, int anchor_pos, std::span<float> logits,
                              int n_out, int width) const {
  const DFlashConfig& c = cfg_;
  if (width != 0 && (width < 2 || width > c.block_size)) {
    throw std::invalid_argument("DFlashModel::draft_block: block width " + std::to_string(width) + " not in [2, " +
                                std::to_string(c.block_size) + "]");
  }
  const int B = width > 0 ? width : c.block_size, d = c.d_model, hd = c.head_dim;
  const int nkv = c.n_head_kv * hd;
  if (anchor_token < 0 || anchor_token >= c.n_vocab) {
    throw std::invalid_argument("DFlashModel::draft_block: anchor token " + std::to_string(anchor_token) + " out of range");
  }
  if (anchor_pos < s.n_rows_ || anchor_pos + B > n_pos_) {
    throw std::invalid_argument("DFlashModel::draft_block: anchor position " + std::to_string(anchor_pos) +
                                " not in [" + std::to_string(s.n_rows_) + ", " + std::to_string(n_pos_ - B) + "]");
  }
  if (n_out <= 0) n_out = B - 1;
  if (n_out > B - 1) throw std::invalid_argument("DFlashModel::draft_block: more than B - 1 rows of logits asked for");
  if (logits.size() < static_cast<size_t>(n_out) * static_cast<size_t>(c.n_vocab)) {
    throw std::invalid_argument("DFlashModel::draft_block: logits buffer smaller than [n_out, n_vocab]");
  }
  const int n_ctx_rows = s.n_rows_;
  reserve_rows(s, n_ctx_rows + B);
  // 3. Block input: the target's embedding of [anchor, MASK × (B − 1)].
  s.ids_[0] = anchor_token;
  for (int j = 0; j < B; ++j) {
    if (j > 0) s.ids_[static_cast<size_t>(j)] = c.mask_token;
    s.pos_[static_cast<size_t>(j)] = anchor_pos + j;
  }
  cpu::embedding_gather(tok_embd_.data, tok_embd_.type, s.ids_.data(), s.x_.data(), B, d);
  float* x = s.x_.data();
  float* xb = s.xb_.data();
  for (size_t il = 0; il < layers_.size(); ++il) {
    const Layer& l = layers_[il];
    // 4. Pre-norm attention: the block's K/V go after the context rows (slots n_ctx_rows …),
    // where they are visible to every block row and are dropped afterwards (n_rows unchanged).
    cpu::rmsnorm(x, l.attn_norm, xb, B, d, c.norm_eps);
    float* kslot = s.k_[il].data() + static_cast<size_t>(n_ctx_rows) * static_cast<size_t>(nkv);
    float* vslot = s.v_[il].data() + static_cast<size_t>(n_ctx_rows) * static_cast<size_t>(nkv);
    {
      const cpu::LinearJob qkv[3] = {linear_job(xb, l.wq, s.q_.data(), B, act_), linear_job(xb, l.wk, kslot, B, act_), linear_job(xb, l.wv, vslot, B, act_)};
      cpu::linear_multi(qkv, pool_.get());
    }
    norm_rope(s.q_.data(), l.q_norm, s.pos_.data(), B, c.n_head);
    norm_rope(kslot, l.k_norm, s.pos_.data(), B, c.n_head_kv);
    cpu::AttentionArgs a{};
    a.q = s.q_.data();
    a.k_cache = s.k_[il].data();
    a.v_cache = s.v_[il].data();
    a.kv_stride = nkv;
    a.kv_pos0 = n_ctx_rows;
    a.n_prefix = n_ctx_rows + B;  // everything visible: full over the context, bidirectional in the block
    a.n_tokens = B;
    a.n_head = c.n_head;
    a.n_head_kv = c.n_head_kv;
    a.head_dim = hd;
    a.visible = nullptr;  // n_masked = 0
    a.out = s.att_.data();
    a.scratch = s.scores_.data();
    cpu::attention(a, pool_.get());
    linear_view(s.att_.data(), l.wo, xb, B, pool_.get(), act_);
    cpu::add_inplace(x, xb, static_cast<int64_t>(B) * d);
    // SwiGLU feed-forward.
    cpu::rmsnorm(x, l.ffn_norm, xb, B, d, c.norm_eps);
    {
      const cpu::LinearJob gu[2] = {linear_job(xb, l.w_gate, s.gate_.data(), B, act_), linear_job(xb, l.w_up, s.up_.data(), B, act_)};
      cpu::linear_multi(gu, pool_.get());
    }
    cpu::swiglu(s.gate_.data(), s.up_.data(), s.gate_.data(), static_cast<int64_t>(B) * c.d_ff);
    linear_view(s.gate_.data(), l.w_down, xb, B, pool_.get(), act_);
    cpu::add_inplace(x, xb, static_cast<int64_t>(B) * d);
  }
  // 5. The drafter's output_norm (not the target's final norm), then the target's LM head, for
  // block rows 1 … n_out.
  cpu::rmsnorm(x + d, output_norm_, xb, n_out, d, c.norm_eps);
  linear_view(xb, output_, logits.data(), n_out, pool_.get(), act_);
}

}  // namespace specchat
