#include "app/cli/bench/configs.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

namespace specchat::bench {

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

int parse_int(const std::string& text, const std::string& key, const std::string& v, int lo, int hi) {
  int x = 0;
  const auto r = std::from_chars(v.data(), v.data() + v.size(), x);
  if (r.ec != std::errc() || r.ptr != v.data() + v.size() || x < lo || x > hi) {
    throw ConfigError("configuration '" + text + "': " + key + " must be an integer in " + std::to_string(lo) +
                      ".." + std::to_string(hi));
  }
  return x;
}

}  // namespace

BenchConfig parse_config(const std::string& text) {
  const std::vector<std::string> parts = split(text, ':');
  if (parts.empty() || parts[0].empty()) throw ConfigError("empty configuration in --configs");
  BenchConfig c;
  c.family = parts[0];
  SpecSettings& s = c.settings;
  if (c.family == "baseline" || c.family == "pipo") {
    s.drafter = DrafterChoice::none;
    s.draft_k = 0;
    if (c.family == "pipo") {
      if (parts.size() != 2 || parts[1].rfind("t=", 0) != 0) {
        throw ConfigError("configuration '" + text + "': pipo takes one key, t = the acceptance threshold (pipo:t=0.85)");
      }
      const std::string v = parts[1].substr(2);
      char* end = nullptr;
      const float t = std::strtof(v.c_str(), &end);
      if (v.empty() || end != v.c_str() + v.size() || !(t >= 0.0f && t <= 1.0f)) {
        throw ConfigError("configuration '" + text + "': t must be a number in [0, 1]");
      }
      c.pipo_threshold = t;
      char name[32];
      std::snprintf(name, sizeof name, "pipo:t=%.2f", static_cast<double>(t));
      c.name = name;
      return c;
    }
  } else if (c.family == "chain" || c.family == "ngram" || c.family == "block" || c.family == "mtp") {
    s.drafter = c.family == "chain"   ? DrafterChoice::model
                : c.family == "ngram" ? DrafterChoice::ngram
                : c.family == "block" ? DrafterChoice::block
                                      : DrafterChoice::mtp;
    s.tree = TreeMode::chain;
  } else if (c.family == "dynamic" || c.family == "optimal" || c.family == "block-tree" || c.family == "mtp-tree") {
    s.drafter = c.family == "block-tree" ? DrafterChoice::block
                : c.family == "mtp-tree" ? DrafterChoice::mtp
                                         : DrafterChoice::model;
    s.tree = c.family == "optimal" ? TreeMode::optimal : TreeMode::dynamic;
  } else {
    throw ConfigError("configuration '" + text + "': unknown family '" + c.family +
                      "' (baseline, chain, dynamic, optimal, ngram, block, block-tree, mtp, mtp-tree, pipo)");
  }
  std::set<std::string> seen;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    if (eq == std::string::npos) throw ConfigError("configuration '" + text + "': expected key=value, got '" + parts[i] + "'");
    const std::string key = parts[i].substr(0, eq), v = parts[i].substr(eq + 1);
    if (!seen.insert(key).second) throw ConfigError("configuration '" + text + "': key " + key + " given twice");
    const bool chainish = !c.baseline() && s.tree == TreeMode::chain;
    if (key == "k" && chainish) {
      s.draft_k = parse_int(text, key, v, 1, 64);
    } else if (key == "n" && !chainish && !c.baseline()) {
      s.node_budget = parse_int(text, key, v, 1, 127);
    } else if (key == "d" && !chainish && !c.baseline()) {
      s.depth = parse_int(text, key, v, 1, 64);
    } else if (key == "b" && !c.baseline() && s.tree == TreeMode::dynamic) {
      s.branch = parse_int(text, key, v, 1, 32);
    } else {
      throw ConfigError("configuration '" + text + "': key '" + key + "' does not apply to " + c.family +
                        " (chain/ngram/block/mtp: k; dynamic/block-tree/mtp-tree: n, d, b; optimal: n, d)");
    }
  }
  // Canonical name: every key the family uses, in a fixed order.
  if (c.baseline()) c.name = "baseline";
  else if (s.tree == TreeMode::chain) c.name = c.family + ":k=" + std::to_string(s.draft_k);
  else if (s.tree == TreeMode::dynamic)
    c.name = c.family + ":n=" + std::to_string(s.node_budget) + ":d=" + std::to_string(s.depth) + ":b=" +
             std::to_string(s.branch);
  else c.name = "optimal:n=" + std::to_string(s.node_budget) + ":d=" + std::to_string(s.depth);
  return c;
}

std::vector<BenchConfig> parse_configs(const std::string& list) {
  std::vector<BenchConfig> out;
  std::set<std::string> names;
  for (const std::string& t : split(list, ',')) {
    BenchConfig c = parse_config(t);
    if (!names.insert(c.name).second) throw ConfigError("configuration '" + c.name + "' is listed twice");
    out.push_back(std::move(c));
  }
  if (out.empty()) throw ConfigError("--configs is empty");
  auto it = std::find_if(out.begin(), out.end(), [](const BenchConfig& c) { return c.baseline(); });
  if (it == out.end()) out.insert(out.begin(), parse_config("baseline"));
  else std::rotate(out.begin(), it, it + 1);
  return out;
}

}  // namespace specchat::bench
