// JSON and text reports of generations for specchat-cli.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/generator.h"
#include "engine/model.h"

namespace specchat::cli {

// The --json object of one generation (field names: ARCHITECTURE.md §6 and issue 2).
nlohmann::json result_json(const GenerationResult& r, const std::vector<int32_t>& prompt,
                           const GenerateRequest& req, const std::string& mode);
// Memory of the loaded models for --json: {"backend", "device", "weights_bytes", "kv_bytes",
// "activation_bytes", "device_used_bytes", "device_total_bytes"} for the target, and the same
// under "draft" when there is one (device fields 0 on the CPU).
nlohmann::json memory_json(const LlamaModel& target, const LlamaModel* draft);
// One human-readable stats line, ending with what drafted: "(plain decoding, 12 steps)", "(model
// drafter, chain k = 4, 3 steps)" or "(ngram drafter, dynamic tree of 16 nodes, depth 5,
// branch 3, 5 steps)" (the shape the request asked for; a plan may use less).
std::string stats_line(const GenerationStats& s, const SpecConfig& spec);

// Writes `j` (indented by 1) and a newline to `path`, replacing it. Throws std::runtime_error
// naming the path when it cannot be opened or the bytes do not reach it (a full disk, /dev/full).
void write_report_json(const std::string& path, const nlohmann::json& j);

}  // namespace specchat::cli
