// A PIPO reply as text: pipo_generate run through the Engine's Emitter
// (engine/runtime/emitter.h), so PIPO applies max_tokens, end of turn and stop strings, and
// releases text, exactly as plain decoding does. Every front end (CLI, server, app) uses it.
#pragma once

#include <functional>
#include <span>

#include "engine/generator.h"
#include "engine/pipo/pipo_session.h"

namespace specchat {

// Decodes one PIPO reply from `prompt_pairs` on `s` (pipo_generate). `req` supplies max_tokens
// and stop_strings (its prompt, sampling and drafting fields are not read: sampling comes from
// `g`); `g.on_tokens` is replaced. Each emitted token goes through an Emitter into `res` (tokens,
// text: every token's own bytes, so a reply keeps its first piece's leading space), token 2 of
// a step marked drafted; `on_event` gets the released text as it completes. `keep_going`
// (optional) is asked after each step: false ends the reply as cancelled.
// Returns the reply with stop_reason set to how it really ended ("stop" for end of turn or a
// stop string, "length", "context", "cancelled"); res.finish says the same as a FinishReason.
// After a stop string, new_pairs and raw end with the kept tokens (kept_reply_pairs: a pair
// whose token 2 was cut is dropped); counters still count every step that ran.
// Throws as pipo_generate (std::length_error, std::invalid_argument, runtime errors).
PipoReply pipo_generate_text(PipoSession& s, std::span<const int32_t> prompt_pairs, PipoGenerateOptions g,
                             const GenerateRequest& req, const TokenCallback& on_event, GenerationResult& res,
                             const std::function<bool()>& keep_going = {});

// The FinishReason of a pipo_generate stop_reason, and back.
FinishReason pipo_finish_of(const std::string& stop_reason);
const char* pipo_stop_reason_of(FinishReason f);

}  // namespace specchat
