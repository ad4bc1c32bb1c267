#include "engine/pipo/pipo_session.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/pipo/pipo_error.h"

namespace specchat {

void PipoSettings::validate() const {
  using K = PipoErrorKind;
  if (pair_size != 2) throw PipoError(K::bad_setting, "pair_size is " + std::to_string(pair_size) + "; it is fixed at 2");
  if (extra_draft_tokens != 1) {
    throw PipoError(K::bad_setting, "extra_draft_tokens is " + std::to_string(extra_draft_tokens) + "; it is fixed at 1");
  }
  if (!std::isfinite(acceptance_threshold) || acceptance_threshold < 0.0f || acceptance_threshold > 1.0f) {
    throw PipoError(K::bad_setting, "acceptance_threshold " + std::to_string(acceptance_threshold) + " is outside [0, 1]");
  }
  if (raw_context < 0) throw PipoError(K::bad_setting, "raw_context " + std::to_string(raw_context) + " is negative");
}

int PipoSettings::raw_limit(int backbone_n_ctx) const {
  // At most 2 raw tokens per pair the backbone's cache holds.
  const int most = 2 * backbone_n_ctx;
  return raw_context > 0 ? std::min(raw_context, most) : most;
}

int PipoSettings::latent_context(int backbone_n_ctx) const { return std::min(backbone_n_ctx, raw_limit(backbone_n_ctx)); }

void check_pair_sequence(std::span<const int32_t> pairs, int n_vocab) {
  if (pairs.size() % 2 != 0) {
    throw std::invalid_argument("PIPO: a pair sequence has even length; this one has " + std::to_string(pairs.size()) + " ids");
  }
  for (size_t i = 0; i < pairs.size(); ++i) {
    const int32_t t = pairs[i];
    const bool ok = (t >= 0 && t < n_vocab) || (i % 2 == 1 && t == kPipoPad);
    if (!ok) {
      throw std::invalid_argument("PIPO: id " + std::to_string(t) + " at index " + std::to_string(i) +
                                  (t == kPipoPad ? " is PAD in a pair's first slot" : " is not a vocabulary id"));
    }
  }
}

int raw_length(std::span<const int32_t> pairs) {
  return static_cast<int>(std::count_if(pairs.begin(), pairs.end(), [](int32_t t) { return t != kPipoPad; }));
}

PipoSession::PipoSession(PipoUnit& unit, int seq) : u_(unit), seq_(seq) {
  if (!u_.backbone || !u_.mtp || !u_.io) throw std::invalid_argument("PipoSession: the unit is not loaded");
  if (seq < 0 || seq >= u_.backbone->n_seq()) throw std::out_of_range("PipoSession: sequence out of range");
}

void PipoSession::latent(int32_t a, int32_t b, float* out) {
  if (b != kPipoPad) {
    u_.io->compress(a, b, out, io_scratch_);
    return;
  }
  // (t, PAD) latents depend on t alone: kept per session (every step of a threshold-1 reply).
  const int d = u_.backbone->config().d_model;
  auto it = pad_latents_.find(a);
  if (it == pad_latents_.end()) {
    std::vector<float> v(static_cast<size_t>(d));
    u_.io->compress(a, b, v.data(), io_scratch_);
    it = pad_latents_.emplace(a, std::move(v)).first;
  }
  std::copy(it->second.begin(), it->second.end(), out);
}

void PipoSession::feed(int from_pair) {
  LlamaModel& bb = *u_.backbone;
  const int d = bb.config().d_model;
  const int m = n_pairs();
  KvCache& kv = bb.kv(seq_);
  if (m > kv.n_ctx()) {
    throw std::length_error("PIPO: " + std::to_string(m) + " pairs do not fit the backbone's context of " +
                            std::to_string(kv.n_ctx()) + " pairs");
  }
  kv.truncate(from_pair);
  hidden_.resize(static_cast<size_t>(m) * d);
  const int32_t layer[1] = {bb.config().n_layer - 1};
  int at = from_pair;
  while (at < m) {
    const int len = std::min(m - at, bb.max_batch());
    Batch b;
    b.seq = seq_;
    b.kv_pos0 = at;
    b.embd.resize(static_cast<size_t>(len) * d);
    std::vector<int32_t> firsts(static_cast<size_t>(len));
    for (int i = 0; i < len; ++i) {
      const int j = at + i;
      firsts[static_cast<size_t>(i)] = pairs_[static_cast<size_t>(2 * j)];
      latent(pairs_[static_cast<size_t>(2 * j)], pairs_[static_cast<size_t>(2 * j + 1)],
             b.embd.data() + static_cast<size_t>(i) * d);
      b.tokens.push_back(firsts[static_cast<size_t>(i)]);
      b.pos.push_back(j);
      b.parent.push_back(i - 1);
      b.hidden_rows.push_back(i);  // every pair's hidden state (the MTP head's context)
    }
    b.out_rows.push_back(len - 1);  // logits of the last row only
    const Batch* one[1] = {&b};
    const ForwardOut out = bb.forward(one, layer);
    kv.commit(firsts);
    std::copy(out.hidden.begin(), out.hidden.end(), hidden_.begin() + static_cast<ptrdiff_t>(at) * d);
    logits_.assign(out.logits.begin(), out.logits.end());
    at += len;
  }
  fed_ = m;
}

int PipoSession::sync(std::span<const int32_t> pairs) {
  check_pair_sequence(pairs, u_.backbone->config().n_vocab);
  if (pairs.empty()) throw std::invalid_argument("PIPO: an empty pair sequence");
  const int m_new = static_cast<int>(pairs.size() / 2);
  int keep = 0;
  while (keep < fed_ && keep < m_new && pairs_[static_cast<size_t>(2 * keep)] == pairs[static_cast<size_t>(2 * keep)] &&
         pairs_[static_cast<size_t>(2 * keep + 1)] == pairs[static_cast<size_t>(2 * keep + 1)]) {
    ++keep;
  }
  keep = std::min(keep, m_new - 1);  // the last pair is always fed: its logits start the reply
  // MTP row j reads h_j and the first token of pair j + 1: valid while pairs 0..j+1 are kept.
  mtp_.truncate(std::max(0, keep - 1));
  pairs_.assign(pairs.begin(), pairs.end());
  feed(keep);
  return keep;
}

void PipoSession::mtp_catch_up(int upto_row) {
  const int d = u_.backbone->config().d_model;
  const int from = mtp_.n;
  if (from >= upto_row) return;
  const int n = upto_row - from;
  std::vector<int32_t> next(static_cast<size_t>(n)), pos(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    next[static_cast<size_t>(i)] = pairs_[static_cast<size_t>(2 * (from + i + 1))];
    pos[static_cast<size_t>(i)] = from + i;
  }
  g_.resize(static_cast<size_t>(n) * d);
  u_.mtp->forward(next, hidden_.data() + static_cast<size_t>(from) * d, pos, 0, nullptr, mtp_, g_.data());
}

PipoStep PipoSession::step(const SamplingParams& sp, Rng& rng, float threshold, std::span<const int32_t> stop_ids) {
  if (pairs_.empty()) throw std::logic_error("PIPO: step before sync");
  if (fed_ < n_pairs()) throw std::logic_error("PIPO: step after a stop; sync the next turn first");
  LlamaModel& bb = *u_.backbone;
  const int d = bb.config().d_model;
  const int m = n_pairs();
  if (m >= bb.kv(seq_).n_ctx()) throw std::length_error("PIPO: the backbone's context is full");
  auto is_stop = [&](int32_t t) { return std::find(stop_ids.begin(), stop_ids.end(), t) != stop_ids.end(); };
  auto sample = [&](std::span<const float> logits) {
    if (sp.greedy()) return argmax(logits);
    process_logits(logits, sp, dist_, sampler_scratch_);
    return dist_.sample(rng);
  };
  PipoStep st;
  st.t1 = sample(logits_);
  st.stop = is_stop(st.t1);
  if (!st.stop && threshold < 1.0f) {
    // The head's context rows, then this step's row: h_{m−1} with t1 at position m − 1.
    mtp_catch_up(m - 1);
    const int32_t next[1] = {st.t1};
    const int32_t pos[1] = {m - 1};
    g_.resize(static_cast<size_t>(d));
    u_.mtp->forward(next, hidden_.data() + static_cast<size_t>(m - 1) * d, pos, 0, nullptr, mtp_, g_.data());
    st.head_ran = true;
    // The confidence reads h and g only: the head's LM head (a d × n_vocab product, as costly as
    // the backbone's) runs only for a token 2 that is kept.
    st.confidence = u_.io->confidence(hidden_.data() + static_cast<size_t>(m - 1) * d, g_.data(), io_scratch_);
    if (st.confidence >= threshold) {
      head_logits_.resize(static_cast<size_t>(bb.config().n_vocab));
      u_.mtp->logits(g_.data(), 1, head_logits_.data(), mtp_);
      st.proposed = sample(head_logits_);
      st.t2 = st.proposed;
      st.stop = is_stop(st.t2);
    }
  }
  pairs_.push_back(st.t1);
  pairs_.push_back(st.t2);
  if (!st.stop) feed(m);
  return st;
}

double kl_of_logits(std::span<const float> p_logits, std::span<const float> q_logits) {
  if (p_logits.size() != q_logits.size() || p_logits.empty()) throw std::invalid_argument("kl_of_logits: sizes differ");
  auto log_norm = [](std::span<const float> l) {
    const double mx = *std::max_element(l.begin(), l.end());
    double s = 0;
    for (float v : l) s += std::exp(static_cast<double>(v) - mx);
    return mx + std::log(s);
  };
  const double zp = log_norm(p_logits), zq = log_norm(q_logits);
  double kl = 0;
  for (size_t i = 0; i < p_logits.size(); ++i) {
    const double lp = static_cast<double>(p_logits[i]) - zp, lq = static_cast<double>(q_logits[i]) - zq;
    kl += std::exp(lp) * (lp - lq);
  }
  return std::max(0.0, kl);
}

PipoReply pipo_generate(PipoSession& s, std::span<const int32_t> prompt_pairs, const PipoGenerateOptions& opt) {
  using clock = std::chrono::steady_clock;
  opt.settings.validate();
  const auto t0 = clock::now();
  PipoReply r;
  r.prompt_pairs = static_cast<int>(prompt_pairs.size() / 2);
  const int latent_limit = opt.settings.latent_context(s.n_ctx());
  if (r.prompt_pairs >= latent_limit || raw_length(prompt_pairs) >= opt.settings.raw_limit(s.n_ctx())) {
    throw std::length_error("PIPO: the prompt is " + std::to_string(raw_length(prompt_pairs)) + " raw tokens in " +
                            std::to_string(r.prompt_pairs) + " pairs; the context holds " +
                            std::to_string(opt.settings.raw_limit(s.n_ctx())) + " raw tokens in " +
                            std::to_string(latent_limit) + " pairs, with room for the reply");
  }
  r.reused_pairs = s.sync(prompt_pairs);
  Rng rng(opt.sampling.seed);
  const float thr = opt.settings.acceptance_threshold;
  r.stop_reason = "length";
  while (static_cast<int>(r.raw.size()) < opt.max_tokens) {
    // Limits: a step adds one pair and one or two raw tokens; with room for one token only, the
    // step does not run the head (its pair is (t1, PAD)), so the stored pairs are what was emitted.
    const int raw_room = opt.settings.raw_limit(s.n_ctx()) - raw_length(s.pairs());
    if (s.n_pairs() + 1 > opt.settings.latent_context(s.n_ctx()) || raw_room < 1) {
      r.stop_reason = "context";
      break;
    }
    const int room = std::min(raw_room, opt.max_tokens - static_cast<int>(r.raw.size()));
    // Fidelity gauge: the plain target's distribution of this step's token 1, from the raw prefix.
    if (opt.fidelity && opt.fidelity->plain && opt.fidelity->every > 0 && r.counters.steps % opt.fidelity->every == 0) {
      const auto m0 = clock::now();
      PipoFidelity& f = *opt.fidelity;
      const std::vector<int32_t> raw = [&] {
        std::vector<int32_t> v;
        for (int32_t t : s.pairs()) {
          if (t != kPipoPad) v.push_back(t);
        }
        return v;
      }();
      if (static_cast<int>(raw.size()) <= f.plain->n_ctx()) {
        const std::vector<float> pipo_logits(s.last_logits().begin(), s.last_logits().end());
        const std::span<const float> plain = f.plain->sync_cache(raw, static_cast<int>(raw.size()), true, f.seq);
        const double kl = kl_of_logits(plain, pipo_logits);
        ++f.samples;
        f.kl_sum += kl;
        f.kl_max = std::max(f.kl_max, kl);
      }
      r.monitor_s += std::chrono::duration<double>(clock::now() - m0).count();
    }
    const PipoStep st = s.step(opt.sampling, rng, room >= 2 ? thr : 1.0f, opt.stop_ids);
    if (r.counters.steps == 0) {
      r.ttft_s = std::chrono::duration<double>(clock::now() - t0).count() - r.monitor_s;
      r.first_step_tokens = st.t2 == kPipoPad ? 1 : 2;
    }
    ++r.counters.steps;
    if (st.head_ran) {
      ++r.counters.head_runs;
      if (st.t2 != kPipoPad) ++r.counters.accepted;
    }
    r.new_pairs.push_back(st.t1);
    r.new_pairs.push_back(st.t2);
    int32_t emitted[2];
    int n_emit = 0;
    emitted[n_emit++] = st.t1;
    if (st.t2 != kPipoPad) emitted[n_emit++] = st.t2;
    r.raw.insert(r.raw.end(), emitted, emitted + n_emit);
    r.counters.raw_tokens += n_emit;
    const bool go_on = !opt.on_tokens || opt.on_tokens(std::span<const int32_t>(emitted, static_cast<size_t>(n_emit)));
    if (st.stop) {
      r.stop_reason = "stop";
      break;
    }
    if (!go_on) {
      r.stop_reason = "cancelled";
      break;
    }
  }
  r.total_s = std::chrono::duration<double>(clock::now() - t0).count() - r.monitor_s;
  return r;
}

}  // namespace specchat
