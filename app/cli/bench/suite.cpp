#include "app/cli/bench/suite.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <set>

namespace specchat::bench {

using nlohmann::json;

namespace {

std::string where(const std::string& origin, size_t i, const std::string& id) {
  return origin + ": prompt " + std::to_string(i) + (id.empty() ? "" : " (" + id + ")");
}

std::string need_string(const json& p, const char* key, const std::string& at, bool required) {
  if (!p.contains(key)) {
    if (required) throw SuiteError(at + ": missing field '" + key + "'");
    return {};
  }
  if (!p[key].is_string() || p[key].get<std::string>().empty()) {
    throw SuiteError(at + ": field '" + key + "' must be a non-empty string");
  }
  return p[key].get<std::string>();
}

}  // namespace

BenchSuite parse_suite(const json& j, const std::string& origin) {
  if (!j.is_object()) throw SuiteError(origin + ": a suite is a JSON object");
  if (!j.contains("format") || j["format"] != "specchat-bench-suite") {
    throw SuiteError(origin + ": 'format' must be \"specchat-bench-suite\"");
  }
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != 1) {
    throw SuiteError(origin + ": unsupported 'version' (this build reads version 1)");
  }
  BenchSuite s;
  s.name = j.contains("name") && j["name"].is_string() ? j["name"].get<std::string>() : origin;
  if (j.contains("description") && j["description"].is_string()) s.description = j["description"];
  if (j.contains("prompt_format")) {
    if (!j["prompt_format"].is_string() || (j["prompt_format"] != "chat" && j["prompt_format"] != "raw")) {
      throw SuiteError(origin + ": 'prompt_format' must be \"chat\" or \"raw\"");
    }
    s.prompt_format = j["prompt_format"];
  }
  if (j.contains("tokenizer") && j["tokenizer"].is_string()) s.tokenizer = j["tokenizer"];
  if (!j.contains("prompts") || !j["prompts"].is_array() || j["prompts"].empty()) {
    throw SuiteError(origin + ": 'prompts' must be a non-empty array");
  }
  std::set<std::string> ids;
  const auto& tiers = entropy_tiers();
  for (size_t i = 0; i < j["prompts"].size(); ++i) {
    const json& p = j["prompts"][i];
    if (!p.is_object()) throw SuiteError(where(origin, i, "") + ": not an object");
    BenchPrompt bp;
    bp.id = need_string(p, "id", where(origin, i, ""), true);
    const std::string at = where(origin, i, bp.id);
    if (!ids.insert(bp.id).second) throw SuiteError(at + ": duplicate id");
    bp.category = need_string(p, "category", at, true);
    bp.source = need_string(p, "source", at, true);
    if (!p.contains("turns") || !p["turns"].is_array() || p["turns"].empty()) {
      throw SuiteError(at + ": 'turns' must be a non-empty array of strings");
    }
    for (const json& t : p["turns"]) {
      if (!t.is_string() || t.get<std::string>().empty()) throw SuiteError(at + ": every turn must be a non-empty string");
      bp.turns.push_back(t.get<std::string>());
    }
    if (bp.turns.size() > 1) {
      throw SuiteError(at + ": multi-turn prompts are not supported by this runner (one turn per prompt)");
    }
    bp.tier = need_string(p, "tier", at, false);
    if (!bp.tier.empty() && std::find(tiers.begin(), tiers.end(), bp.tier) == tiers.end()) {
      throw SuiteError(at + ": 'tier' must be low, mixed or high");
    }
    if (p.contains("bucket")) {
      if (!p["bucket"].is_number_integer() || p["bucket"].get<long>() <= 0 || p["bucket"].get<long>() > (1L << 24)) {
        throw SuiteError(at + ": 'bucket' must be a positive integer (tokens)");
      }
      bp.bucket = p["bucket"].get<int>();
    }
    if (p.contains("input_ids")) {
      if (!p["input_ids"].is_array()) throw SuiteError(at + ": 'input_ids' must be an array of token ids");
      for (const json& t : p["input_ids"]) {
        if (!t.is_number_integer() || t.get<long>() < 0 || t.get<long>() > INT32_MAX) {
          throw SuiteError(at + ": 'input_ids' must hold non-negative integers");
        }
        bp.input_ids.push_back(t.get<int32_t>());
      }
    }
    s.prompts.push_back(std::move(bp));
  }
  return s;
}

BenchSuite load_suite(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw SuiteError("cannot open suite file " + path);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw SuiteError(path + ": not valid JSON (" + e.what() + ")");
  }
  return parse_suite(j, path);
}

json suite_to_json(const BenchSuite& s) {
  json ps = json::array();
  for (const BenchPrompt& p : s.prompts) {
    json o = {{"id", p.id}, {"category", p.category}, {"turns", p.turns}, {"source", p.source}};
    if (!p.tier.empty()) o["tier"] = p.tier;
    if (p.bucket > 0) o["bucket"] = p.bucket;
    if (!p.input_ids.empty()) o["input_ids"] = p.input_ids;
    ps.push_back(std::move(o));
  }
  json j = {{"format", "specchat-bench-suite"}, {"version", 1}, {"name", s.name}, {"description", s.description},
            {"prompt_format", s.prompt_format}};
  if (!s.tokenizer.empty()) j["tokenizer"] = s.tokenizer;
  j["prompts"] = std::move(ps);
  return j;
}

std::string prompt_group(const BenchPrompt& p) {
  if (!p.tier.empty()) return p.tier + "/" + std::to_string(p.bucket);
  return p.category;
}

BenchSuite first_per_group(const BenchSuite& s, int n) {
  BenchSuite out = s;
  out.prompts.clear();
  std::map<std::string, int> taken;
  for (const BenchPrompt& p : s.prompts) {
    if (taken[prompt_group(p)]++ < n) out.prompts.push_back(p);
  }
  return out;
}

}  // namespace specchat::bench
