#include "engine/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace specchat {

KvCache::KvCache(int n_layer, int n_ctx, int kv_dim)
    : n_layer_(n_layer), n_ctx_(n_ctx), kv_dim_(kv_dim),
      k_(static_cast<size_t>(n_layer) * n_ctx * kv_dim),
      v_(static_cast<size_t>(n_layer) * n_ctx * kv_dim),
      slot_parent_(static_cast<size_t>(n_ctx), -1) {
  tokens_.reserve(static_cast<size_t>(n_ctx));
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
  const int base = size();
  int prev = -1;
  for (size_t j = 0; j < path.size(); ++j) {
    const int src = path[j];
    if (src <= prev || base + src >= n_ctx_) throw std::invalid_argument("keep_path: bad path");
    prev = src;
    const int dst_slot = base + static_cast<int>(j);
    const int src_slot = base + src;
    if (src_slot != dst_slot) {  // a chain's accepted prefix is already in place
      for (int il = 0; il < n_layer_; ++il) {
        std::memcpy(k(il, dst_slot), k(il, src_slot), sizeof(float) * kv_dim_);
        std::memcpy(v(il, dst_slot), v(il, src_slot), sizeof(float) * kv_dim_);
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
