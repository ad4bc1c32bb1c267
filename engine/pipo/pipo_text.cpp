#include "engine/pipo/pipo_text.h"

#include <algorithm>

#include "engine/pipo/pipo_history.h"
#include "engine/runtime/emitter.h"

namespace specchat {

FinishReason pipo_finish_of(const std::string& stop_reason) {
  if (stop_reason == "stop") return FinishReason::eos;
  if (stop_reason == "context") return FinishReason::context_full;
  if (stop_reason == "cancelled") return FinishReason::cancelled;
  return FinishReason::length;
}

const char* pipo_stop_reason_of(FinishReason f) {
  switch (f) {
    case FinishReason::eos:
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::context_full:
      return "context";
    case FinishReason::cancelled:
      return "cancelled";
  }
  return "length";
}

PipoReply pipo_generate_text(PipoSession& s, std::span<const int32_t> prompt_pairs, PipoGenerateOptions g,
                             const GenerateRequest& req, const TokenCallback& on_event, GenerationResult& res,
                             const std::function<bool()>& keep_going) {
  Emitter em(s.unit().backbone->vocab(), req, on_event, res);
  g.max_tokens = req.max_tokens;
  bool ended = false, stopped = false;
  int step = 0;
  g.on_tokens = [&](std::span<const int32_t> ids) {
    for (size_t i = 0; i < ids.size() && !ended; ++i) ended = !em.push(ids[i], i == 1, step);
    ++step;
    if (!ended && keep_going && !keep_going()) stopped = true;
    return !ended && !stopped;
  };
  PipoReply rep = pipo_generate(s, prompt_pairs, g);
  em.finish();
  // The Emitter ends a reply (end of turn, a stop string, max_tokens) by refusing more tokens,
  // which pipo_generate records as "cancelled": its own finish is the real one.
  if (!ended) res.finish = stopped ? FinishReason::cancelled : pipo_finish_of(rep.stop_reason);
  rep.stop_reason = pipo_stop_reason_of(res.finish);
  // A stop string cut the reply: its pairs and raw ids end where its tokens do, so the next turn
  // continues these latents (the conversation does not hold the cut tokens).
  if (res.finish == FinishReason::stop) {
    rep.new_pairs = kept_reply_pairs(rep.new_pairs, res.tokens.size());
    rep.raw.resize(std::min(rep.raw.size(), res.tokens.size()));
  }
  return rep;
}

}  // namespace specchat
