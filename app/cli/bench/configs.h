// The configurations a benchmark compares (`bench --configs`): baseline plus any list of
// drafter / tree settings, written as family[:key=value]... and separated by commas:
//   baseline                      plain decoding (the reference every speedup divides by)
//   chain:k=4                     the draft model drafts a chain of k tokens per step
//   dynamic:n=16:d=5:b=3          dynamic tree (EAGLE-2): node budget n, depth d, branch b
//   optimal:n=16:d=6              static Sequoia tree from the pair's calibration
//   ngram:k=4                     n-gram prompt lookup, a chain of k tokens
//   block:k=7                     the DFlash block drafter, a chain of k ≤ B − 1 tokens
//   block-tree:n=16:d=7:b=3       a tree from the block's marginals
//   mtp:k=2 / mtp-tree:n=10:d=4:b=2  the MTP head, a chain / a dynamic tree
//   pipo:t=0.85                   the PIPO dual-end mode at acceptance threshold t (APPROXIMATE:
//                                 not verified by the target; its divergence from baseline is
//                                 recorded, not a failure; needs --pipo or the bundled release)
// (block and MTP run where their files are found beside the target; otherwise plain decoding
// with a warning, as RequestPlanner::plan_tree says.)
// Omitted keys take SpecSettings' defaults (engine/runtime/spec_settings.h).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "engine/runtime/spec_settings.h"

namespace specchat::bench {

class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct BenchConfig {
  std::string name;       // canonical spelling, e.g. "chain:k=4" (also the key in reports)
  std::string family;     // baseline | chain | dynamic | optimal | ngram | block | block-tree | mtp | mtp-tree
  SpecSettings settings;  // drafter none for baseline
  float pipo_threshold = -1.0f;  // pipo: acceptance_threshold in [0, 1]
  bool baseline() const { return family == "baseline"; }
  // Not lossless: PIPO (docs/design/pipo.md). Reports label it; its outputs may differ from baseline.
  bool approximate() const { return family == "pipo"; }
};

// Parses one configuration. Throws ConfigError naming the text and what is wrong (unknown
// family or key, a value out of range: k 1..64, n 1..127, d 1..64, b 1..32).
BenchConfig parse_config(const std::string& text);
// Parses a comma-separated list; "baseline" is put first when absent (every speedup needs it);
// duplicates are refused. Throws ConfigError.
std::vector<BenchConfig> parse_configs(const std::string& list);

}  // namespace specchat::bench
