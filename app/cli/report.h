// JSON and text reports of generations for specchat-cli.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/generator.h"

namespace specchat::cli {

// The --json object of one generation (field names: ARCHITECTURE.md §6 and issue 2).
nlohmann::json result_json(const GenerationResult& r, const std::vector<int32_t>& prompt,
                           const GenerateRequest& req, const std::string& mode);
// One human-readable stats line.
std::string stats_line(const GenerationStats& s, int draft_k);

}  // namespace specchat::cli
