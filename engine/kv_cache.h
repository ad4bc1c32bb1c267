// KV cache of one model: K and V rows per layer and slot.
// Layout: k/v [n_layer][n_ctx][n_head_kv * head_dim] (f32). Slot i holds the token at
// sequence index i of the committed context; a draft tree's nodes live in slots after the
// committed prefix until verification keeps the accepted path (keep_path) and drops the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace specchat {

class KvCache {
 public:
  KvCache() = default;
  KvCache(int n_layer, int n_ctx, int kv_dim);

  int n_ctx() const { return n_ctx_; }
  int kv_dim() const { return kv_dim_; }
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(float); }

  float* k(int il, int slot) { return k_.data() + (static_cast<size_t>(il) * n_ctx_ + slot) * kv_dim_; }
  float* v(int il, int slot) { return v_.data() + (static_cast<size_t>(il) * n_ctx_ + slot) * kv_dim_; }
  const float* k(int il, int slot) const { return k_.data() + (static_cast<size_t>(il) * n_ctx_ + slot) * kv_dim_; }
  const float* v(int il, int slot) const { return v_.data() + (static_cast<size_t>(il) * n_ctx_ + slot) * kv_dim_; }

  // Token ids whose K/V are valid in slots [0, size()): the committed context.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int size() const { return static_cast<int>(tokens_.size()); }

  // Marks slots [size(), size() + ids.size()) as committed with these ids (their K/V must
  // already have been written by a forward at kv_pos0 = size()).
  void commit(std::span<const int32_t> ids);
  // Drops every slot from n on (rollback of rejected positions). n <= size().
  void truncate(int n);
  // After a forward that wrote nodes at slots size() + j, keeps the nodes `path` (indices
  // relative to size(), increasing) as the next committed slots, moving their rows into place,
  // and commits `ids` for them. path.size() == ids.size().
  void keep_path(std::span<const int32_t> path, std::span<const int32_t> ids);
  // Length of the longest common prefix of tokens() and `ids`.
  int common_prefix(std::span<const int32_t> ids) const;

  // Tree links of uncommitted slots: the slot holding a node's parent (−1 = the shared prefix).
  // Written by the forward for every slot it fills; read to build tree-attention masks.
  int32_t slot_parent(int slot) const { return slot_parent_[static_cast<size_t>(slot)]; }
  void set_slot_parent(int slot, int32_t parent) { slot_parent_[static_cast<size_t>(slot)] = parent; }

 private:
  int n_layer_ = 0, n_ctx_ = 0, kv_dim_ = 0;
  std::vector<float> k_, v_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> slot_parent_;
};

}  // namespace specchat
