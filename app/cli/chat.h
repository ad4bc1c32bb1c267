// `specchat-cli chat`: an interactive multi-turn chat on the terminal over the same engine.
#pragma once

#include "app/cli/options.h"

namespace specchat::cli {

// Reads user turns from standard input, one line each (end of input or "/exit" ends, "/reset"
// starts over), streams each reply with speculative decoding as configured, then prints the
// stats line. The KV caches keep the shared prefix between turns (multi-turn reuse). When the
// conversation outgrows the context, the oldest exchanges are dropped (a notice says so); a
// single turn that cannot fit is reported and skipped. Returns 0; load errors throw.
int cmd_chat(const CommonOptions& o);

}  // namespace specchat::cli
