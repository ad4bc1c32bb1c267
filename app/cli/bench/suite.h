// Benchmark prompt suites (resources/bench/README.md): the qualitative split (semantic
// categories) and the throughput split (input-length buckets × entropy tiers), in the shape of
// SPEED-Bench (arXiv 2604.09557): every prompt has an id, a category, its turns and a source.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace specchat::bench {

// A suite file that cannot be read or breaks the schema; the message names the file and, where
// it applies, the prompt (by index and id) and the field.
class SuiteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The entropy tiers of the throughput split: low (code, sorted lists), mixed (needle in a
// haystack, exam questions), high (creative writing, dialogue).
inline const std::vector<std::string>& entropy_tiers() {
  static const std::vector<std::string> t = {"low", "mixed", "high"};
  return t;
}

struct BenchPrompt {
  std::string id;                  // unique within the suite
  std::string category;            // qualitative: coding, math, ...; throughput: "throughput"
  std::vector<std::string> turns;  // [n_turns ≥ 1] user messages (this version runs one turn)
  std::string source;              // who wrote it / where it was copied from, with its licence
  std::string tier;                // throughput only: low | mixed | high; empty otherwise
  int bucket = 0;                  // throughput only: the target input length in tokens; 0 otherwise
  std::vector<int32_t> input_ids;  // throughput only: [n_prompt] ids from the generating tokenizer
};

struct BenchSuite {
  std::string name;
  std::string description;
  std::string prompt_format = "chat";  // chat: turns wrapped in the chat template; raw: text as is
  std::string tokenizer;               // throughput: the model whose tokenizer made input_ids
  std::vector<BenchPrompt> prompts;
};

// Parses and validates a suite document (format "specchat-bench-suite", version 1): prompts is a
// non-empty array; every prompt has a non-empty unique id, a non-empty category, turns as an
// array of exactly one non-empty string (multi-turn prompts are refused: this runner measures
// single requests), a non-empty source; tier, when present, one of entropy_tiers(); bucket a
// positive integer; input_ids an array of non-negative integers. `origin` names the document
// in errors. Throws SuiteError.
BenchSuite parse_suite(const nlohmann::json& j, const std::string& origin);
// Reads and parses a suite file. Throws SuiteError (unreadable file, invalid JSON, schema).
BenchSuite load_suite(const std::string& path);
// The document parse_suite reads back (round trip).
nlohmann::json suite_to_json(const BenchSuite& s);

// The first `n` prompts of every group (category, or tier × bucket for throughput prompts), in
// suite order: the tiny suites of CI checks. n ≥ 1.
BenchSuite first_per_group(const BenchSuite& s, int n);
// A prompt's group label: "tier/bucket" for throughput prompts ("low/64"), else its category.
std::string prompt_group(const BenchPrompt& p);

}  // namespace specchat::bench
