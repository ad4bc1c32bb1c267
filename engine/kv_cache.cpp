#include "engine/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/cpu/convert.h"

namespace specchat {

namespace {

size_t kv_elem_bytes(DType type) {
  if (type != DType::f32 && type != DType::f16) {
    throw std::invalid_argument(std::string("KvCache: element type must be f32 or f16, not ") + dtype_name(type));
  }
  return dtype_size(type);
}

}  // namespace

KvCache::KvCache(int n_layer, int n_ctx, int kv_dim, DType type)
    : n_layer_(n_layer), n_ctx_(n_ctx), kv_dim_(kv_dim), type_(type), elem_bytes_(kv_elem_bytes(type)),
      k_(static_cast<size_t>(n_layer) * n_ctx * kv_dim * elem_bytes_),
      v_(static_cast<size_t>(n_layer) * n_ctx * kv_dim * elem_bytes_),
      slot_parent_(static_cast<size_t>(n_ctx), -1) {
  tokens_.reserve(static_cast<size_t>(n_ctx));
}

KvCache::KvCache(int n_layer, int n_ctx, int kv_dim, KvRowStore* store, DType type)
    : n_layer_(n_layer), n_ctx_(n_ctx), kv_dim_(kv_dim), type_(type), elem_bytes_(kv_elem_bytes(type)),
      store_(store), slot_parent_(static_cast<size_t>(n_ctx), -1) {
  if (!store) throw std::invalid_argument("KvCache: null row store");
  tokens_.reserve(static_cast<size_t>(n_ctx));
}

float KvCache::k_at(int il, int slot, int d) const {
  const void* r = k_row(il, slot);
  return type_ == DType::f32 ? static_cast<const float*>(r)[d] : cpu::f16_to_f32(static_cast<const uint16_t*>(r)[d]);
}

float KvCache::v_at(int il, int slot, int d) const {
  const void* r = v_row(il, slot);
  return type_ == DType::f32 ? static_cast<const float*>(r)[d] : cpu::f16_to_f32(static_cast<const uint16_t*>(r)[d]);
}

void KvCache::write(int il, int slot, const float* k_src, const float* v_src, int n, int64_t src_stride) {
  if (slot < 0 || n < 0 || slot + n > n_ctx_) throw std::invalid_argument("KvCache::write past n_ctx");
  for (int i = 0; i < n; ++i) {
    cpu::convert_from_f32(k_src + i * src_stride, k_row(il, slot + i), type_, kv_dim_);
    cpu::convert_from_f32(v_src + i * src_stride, v_row(il, slot + i), type_, kv_dim_);
  }
}

void KvCache::commit(std::span<const int32_t> ids) {
  if (tokens_.size() + ids.size() > static_cast<size_t>(n_ctx_)) {
    throw std::invalid_argument("KvCache::commit past n_ctx");
  }
  tokens_.insert(tokens_.end(), ids.begin(), ids.end());
}

void KvCache::truncate(int n) {
  if (n < 0 || n > size()) throw std::invalid_argument("KvCache::truncate out of range");
  tokens_.resize(static_cast<size_t>(n));
}

void KvCache::keep_path(std::span<const int32_t> path, std::span<const int32_t> ids) {
  if (path.size() != ids.size()) throw std::invalid_argument("keep_path: path/ids size differ");
  if (tokens_.size() + ids.size() > static_cast<size_t>(n_ctx_)) {
    throw std::invalid_argument("keep_path: past n_ctx");
  }
  const int base = size();
  int prev = -1;
  for (const int32_t src : path) {
    if (src <= prev || base + src >= n_ctx_) throw std::invalid_argument("keep_path: bad path");
    prev = src;
  }
  // Rows move in path order: dst_j = base + j <= base + path[j], and a later source is
  // never an earlier destination (path increasing), so in-place copying is safe. A chain's
  // accepted prefix (path[j] == j) is already in place.
  size_t first = 0;
  while (first < path.size() && path[first] == static_cast<int32_t>(first)) ++first;
  if (first == path.size()) {
    commit(ids);
    return;
  }
  if (store_) {
    int32_t buf[256];
    std::vector<int32_t> big;
    const size_t n_move = path.size() - first;
    int32_t* src = buf;
    if (n_move > 256) {
      big.resize(n_move);
      src = big.data();
    }
    for (size_t j = first; j < path.size(); ++j) src[j - first] = base + path[j];
    store_->compact(std::span<const int32_t>(src, n_move), base + static_cast<int>(first));
  } else {
    for (size_t j = first; j < path.size(); ++j) {
      const int dst_slot = base + static_cast<int>(j), src_slot = base + path[j];
      for (int il = 0; il < n_layer_; ++il) {
        std::memcpy(k_row(il, dst_slot), k_row(il, src_slot), elem_bytes_ * kv_dim_);
        std::memcpy(v_row(il, dst_slot), v_row(il, src_slot), elem_bytes_ * kv_dim_);
      }
    }
  }
  commit(ids);
}

int KvCache::common_prefix(std::span<const int32_t> ids) const {
  const size_t n = std::min(ids.size(), tokens_.size());
  size_t i = 0;
  while (i < n && ids[i] == tokens_[i]) ++i;
  return static_cast<int>(i);
}

}  // namespace specchat
