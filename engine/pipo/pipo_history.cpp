#include "engine/pipo/pipo_history.h"

#include <algorithm>

#include "engine/pipo/pipo_io.h"

namespace specchat {

std::vector<int32_t> pairs_to_raw(std::span<const int32_t> pairs) {
  std::vector<int32_t> out;
  out.reserve(pairs.size());
  for (int32_t t : pairs) {
    if (t != kPipoPad) out.push_back(t);
  }
  return out;
}

std::vector<int32_t> pair_align_ids(std::span<const int32_t> ids) {
  std::vector<int32_t> out(ids.begin(), ids.end());
  if (out.size() % 2) out.push_back(kPipoPad);
  return out;
}

std::vector<int32_t> kept_reply_pairs(std::span<const int32_t> pairs, size_t n_raw) {
  size_t raw = 0, end = 0;
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    raw += 1 + (pairs[i + 1] != kPipoPad ? 1 : 0);
    if (raw > n_raw) break;
    end = i + 2;
  }
  return std::vector<int32_t>(pairs.begin(), pairs.begin() + static_cast<std::ptrdiff_t>(end));
}

std::optional<std::vector<int32_t>> continue_pairs(std::span<const int32_t> history, std::span<const int32_t> full_raw) {
  const std::vector<int32_t> raw = pairs_to_raw(history);
  if (raw.size() > full_raw.size() || !std::equal(raw.begin(), raw.end(), full_raw.begin())) return std::nullopt;
  std::vector<int32_t> out(history.begin(), history.end());
  const std::vector<int32_t> rest = pair_align_ids(full_raw.subspan(raw.size()));
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

PipoContinuation plan_pipo_turn(const std::vector<int32_t>* history, const std::string& history_release,
                                bool later_lossless, const std::string& release, std::span<const int32_t> full_raw) {
  PipoContinuation c;
  if (history && !later_lossless && history_release == release) {
    if (auto p = continue_pairs(*history, full_raw)) {
      c.pairs = std::move(*p);
      c.from_latents = true;
      return c;
    }
    c.note = "PIPO: the conversation changed before the last PIPO reply; its context is re-prefilled from the text";
  } else if (history && history_release != release) {
    c.note = "PIPO: the earlier replies came from release '" + history_release + "'; the context is re-prefilled for '" +
             release + "'";
  } else if (history || later_lossless) {
    c.note = "PIPO: switching from a lossless mode; the context is re-prefilled in pairs";
  }
  c.pairs = pair_align_ids(full_raw);
  return c;
}

}  // namespace specchat
