// KV cache of one model: K and V rows per layer and slot.
// Layout: k/v [n_layer][n_ctx][n_head_kv * head_dim], elements of type() (f16 by default in a
// model, f32 optional: LlamaModel::Options::kv_type). Slot i holds the token at
// sequence index i of the committed context; a draft tree's nodes live in slots after the
// committed prefix until verification keeps the accepted path (keep_path) and drops the rest.
// The rows live either in this object (host rows: the CPU backend) or in a KvRowStore owned
// by a device backend (same layout in device memory); the bookkeeping is the same for both.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "kernels/dtype.h"

namespace specchat {

// K/V rows held outside the KvCache (device memory). Layout as KvCache's host rows.
class KvRowStore {
 public:
  virtual ~KvRowStore() = default;
  // Path compaction in every layer, K and V: row src_slots[j] -> row dst0 + j, j ascending.
  // Precondition (KvCache::keep_path guarantees it): src_slots strictly increasing and
  // src_slots[j] >= dst0 + j, so copying in ascending j is safe in place (see
  // kernels/cuda/kv_compact.h). src_slots.size() <= the backend's max_batch.
  // Throws BackendError on a device failure.
  virtual void compact(std::span<const int32_t> src_slots, int dst0) = 0;
  // Bytes of K and V rows held.
  virtual size_t bytes() const = 0;
};

class KvCache {
 public:
  KvCache() = default;
  // Host rows of `type` (DType::f32 or DType::f16; anything else: std::invalid_argument),
  // zero-initialised.
  KvCache(int n_layer, int n_ctx, int kv_dim, DType type = DType::f32);
  // Rows held by `store` (must outlive the cache; its element type is `type`); the host row
  // accessors throw std::logic_error.
  KvCache(int n_layer, int n_ctx, int kv_dim, KvRowStore* store, DType type = DType::f32);

  int n_ctx() const { return n_ctx_; }
  int kv_dim() const { return kv_dim_; }
  int n_layer() const { return n_layer_; }
  // Element type of the K and V rows: f16 (2 bytes, round to nearest even when written) or f32.
  DType type() const { return type_; }
  size_t bytes() const { return store_ ? store_->bytes() : k_.size() + v_.size(); }
  // True when the host row accessors are usable (host rows).
  bool host_rows() const { return store_ == nullptr; }

  // Row [kv_dim] of layer il, slot `slot`, as f32 (host rows of type f32 only; otherwise
  // std::logic_error).
  float* k(int il, int slot) { return static_cast<float*>(row_f32(k_, il, slot)); }
  float* v(int il, int slot) { return static_cast<float*>(row_f32(v_, il, slot)); }
  const float* k(int il, int slot) const { return static_cast<const float*>(row_f32(k_, il, slot)); }
  const float* v(int il, int slot) const { return static_cast<const float*>(row_f32(v_, il, slot)); }
  // Row [kv_dim] of layer il, slot `slot` in the cache's own type() (host rows only).
  void* k_row(int il, int slot) { return k_.data() + offset(il, slot); }
  void* v_row(int il, int slot) { return v_.data() + offset(il, slot); }
  const void* k_row(int il, int slot) const { return k_.data() + offset(il, slot); }
  const void* v_row(int il, int slot) const { return v_.data() + offset(il, slot); }
  // Element d of a row, converted to f32 (exact for both types; host rows only).
  float k_at(int il, int slot, int d) const;
  float v_at(int il, int slot, int d) const;
  // Writes n consecutive slots' rows from f32 rows src[n][kv_dim] (source stride src_stride
  // floats), rounding to type() (host rows only).
  void write(int il, int slot, const float* k_src, const float* v_src, int n, int64_t src_stride);

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
  // Byte offset of (il, slot)'s row.
  size_t offset(int il, int slot) const {
    if (store_) throw std::logic_error("KvCache: rows live on the device (no host rows)");
    return (static_cast<size_t>(il) * n_ctx_ + slot) * kv_dim_ * elem_bytes_;
  }
  const void* row_f32(const std::vector<unsigned char>& rows, int il, int slot) const {
    if (type_ != DType::f32) throw std::logic_error("KvCache: the rows are f16 (use k_row/k_at)");
    return rows.data() + offset(il, slot);
  }
  void* row_f32(std::vector<unsigned char>& rows, int il, int slot) {
    if (type_ != DType::f32) throw std::logic_error("KvCache: the rows are f16 (use k_row/k_at)");
    return rows.data() + offset(il, slot);
  }
  int n_layer_ = 0, n_ctx_ = 0, kv_dim_ = 0;
  DType type_ = DType::f32;
  size_t elem_bytes_ = 4;
  KvRowStore* store_ = nullptr;
  // Host rows as bytes; allocated with operator new (16-byte aligned at least), so an f32 or
  // f16 row at any offset is aligned to its element.
  std::vector<unsigned char> k_, v_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> slot_parent_;
};

}  // namespace specchat
