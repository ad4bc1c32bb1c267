#include "engine/speculative/drafter_factory.h"

#include <stdexcept>
#include <string>

#include "engine/drafters/dflash_model.h"
#include "engine/drafters/mtp_model.h"
#include "engine/model.h"
#include "engine/speculative/block_drafter.h"
#include "engine/speculative/mtp_drafter.h"
#include "engine/speculative/ngram_drafter.h"

namespace specchat {

bool DrafterModels::offers(DrafterKind kind) const {
  switch (kind) {
    case DrafterKind::model: return draft != nullptr;
    case DrafterKind::ngram: return true;
    case DrafterKind::block: return block != nullptr;
    case DrafterKind::mtp: return mtp != nullptr;
  }
  return false;
}

std::unique_ptr<Drafter> make_drafter(DrafterKind kind, int seq, const DrafterModels& m) {
  if (!m.target) throw std::invalid_argument("make_drafter: no target model");
  if (!m.offers(kind)) return nullptr;
  switch (kind) {
    case DrafterKind::model:
      if (seq < 0 || seq >= m.draft->n_seq()) {
        throw std::invalid_argument("make_drafter: sequence " + std::to_string(seq) + " is outside the draft's pool of " +
                                    std::to_string(m.draft->n_seq()));
      }
      return std::make_unique<ModelDrafter>(*m.draft, seq, m.target->config().n_vocab);
    case DrafterKind::ngram: return std::make_unique<NgramDrafter>(3, 1);
    case DrafterKind::block: return std::make_unique<BlockDrafter>(m.block);
    case DrafterKind::mtp: return std::make_unique<MtpDrafter>(m.mtp, *m.target, seq);
  }
  return nullptr;
}

}  // namespace specchat
