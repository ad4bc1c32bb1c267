// specchat-cli's PIPO commands (docs/design/pipo.md): `generate --pipo` and `compare --pipo`.
// PIPO is APPROXIMATE (the second token of a step is not verified by the target): every output
// says so, on the terminal and in --json ("approximate": true).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "app/cli/options.h"
#include "engine/pipo/pipo_release.h"

namespace specchat::cli {

// The release folder --pipo names ("bundled" = <bundled models>/pipo).
std::string pipo_release_path(const std::string& given);

// One PIPO reply for o's prompt (or chat), streamed as text or printed as one JSON object.
// Throws PipoError (release refused), ModelError, GenerationError, std::length_error.
int cmd_generate_pipo(const CommonOptions& o);

// Baseline (the plain target, lossless) then PIPO on the same prompt: both replies, the
// divergence (first differing token, token agreement), TTFT / TPOT speedups.
int cmd_compare_pipo(const CommonOptions& o);

// Interactive multi-turn chat in PIPO mode: each turn continues the pair sequence the last reply
// left (latent-format history), never the raw ids re-paired.
int cmd_chat_pipo(const CommonOptions& o);

// The --json "pipo" object of a reply: mode label, release, loaded parts, settings, counters.
// `f`: the fidelity gauge when it ran (null or f->plain null: no "fidelity" object).
nlohmann::json pipo_json(const PipoUnit& u, const PipoSettings& st, const PipoReply& r, int prompt_tokens,
                         const PipoFidelity* f = nullptr);

}  // namespace specchat::cli
