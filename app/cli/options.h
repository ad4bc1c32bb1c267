// Command-line options shared by the specchat-cli subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "engine/generator.h"
#include "engine/model_pair.h"

namespace specchat::cli {

struct CommonOptions {
  std::string model;            // target GGUF; empty = bundled
  std::string draft = "bundled";  // draft GGUF, "bundled", or "none"
  int draft_k = 4;
  std::string drafter = "model";  // model | ngram | none
  std::string tree = "chain";     // chain | dynamic | optimal | auto
  int node_budget = 16;
  int depth = 5;
  int branch = 3;
  float temp = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int n = 128;
  int n_ctx = 0;
  int threads = 0;
  std::string backend = "cpu";      // cpu | cuda: where the target runs
  std::string draft_backend;        // cpu | cuda; empty = as --backend
  std::string prompt;
  std::string chat;
  std::string system;
  std::vector<std::string> stop;
  bool json = false;
  bool prompt_given = false, chat_given = false;
};

// Adds the shared flags to a subcommand.
void add_common_options(CLI::App& cmd, CommonOptions& o);

// Copies --backend / --draft-backend into the load options.
void apply_backends(const CommonOptions& o, PairOptions& po);

// The request the options describe (prompt ids filled in by the caller).
GenerateRequest make_request(const CommonOptions& o, std::vector<int32_t> prompt, int draft_k);

}  // namespace specchat::cli
