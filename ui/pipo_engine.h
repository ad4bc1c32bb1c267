// The engine thread's PIPO state (EngineWorker::pipo_, engine_worker_pipo.cpp): one loaded
// release unit, bound to the loaded target, and the chat's PipoSession over it, kept across turns
// so the next turn reuses the KV cache of the pairs it already holds.
#pragma once

#include <memory>
#include <string>

#include "engine/pipo/pipo_release.h"
#include "engine/pipo/pipo_session.h"
#include "engine/tokenizer.h"
#include "ui/pipo_types.h"

namespace specchat::ui {

struct PipoEngine {
  PipoUnit unit;                          // backbone, MTP head, io ends (one release)
  std::unique_ptr<Tokenizer> tokenizer;   // over unit.backbone's vocabulary
  std::unique_ptr<PipoSession> session;   // the chat's (sequence 0); null until the first reply
  std::string folder;                     // the release folder as asked
  std::string plain_target;               // the target file it was checked against
  int raw_limit = 0;                      // raw tokens (the setting, or the target's context)
  PipoSettings settings;                  // raw_context = raw_limit; the threshold per request
  PipoStatus status;                      // what pipoStatusChanged said of it
  // The fidelity gauge (PipoChoice::fidelity_every > 0): a copy of the plain target of its own
  // (the chat's belongs to the pair, whose sequences the app server also uses).
  std::unique_ptr<LlamaModel> plain;
  int fidelity_every = 0;
};

}  // namespace specchat::ui
