// `specchat-cli serve`: the OpenAI-compatible server (app/serve/, issue 14).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "app/serve/config.h"

namespace specchat::cli {

struct ServeOptions {
  std::string config_path;      // --config FILE (JSON), overridden by the flags given
  serve::ServeConfig flags;     // the flags' values; only those given override the file
  CLI::App* cmd = nullptr;      // to ask which flags were given
};

void add_serve_options(CLI::App& cmd, ServeOptions& o);

// Start-up in the design's order (check the model files against the optional manifest; load the
// tokenizer, draft and target; with --pipo, the PIPO release unit bound to that target; build
// the engine; warm up; listen), one summary line, then serves
// until SIGINT/SIGTERM. Returns 0 after a clean stop, 2 for a bad configuration (including a
// non-loopback bind without an API key), 1 when the models cannot be loaded (a PIPO release
// refused included: PipoError, its message printed) or the address cannot be bound.
int cmd_serve(ServeOptions& o);

}  // namespace specchat::cli
