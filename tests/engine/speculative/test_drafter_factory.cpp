// make_drafter (engine/speculative/drafter_factory.h): each kind gives its drafter over the
// models offered, nothing for a model not offered, and a clear error for a missing target or a
// sequence outside the draft's pool.
#include <catch2/catch.hpp>

#include "engine/drafters/dflash_model.h"
#include "engine/drafters/mtp_model.h"
#include "engine/model_fixture.h"
#include "engine/speculative/block_drafter.h"
#include "engine/speculative/drafter_factory.h"
#include "engine/speculative/mtp_drafter.h"
#include "engine/speculative/ngram_drafter.h"
#include "test_data_files.h"
#include "test_paths.h"

using namespace specchat;

TEST_CASE("make_drafter: one drafter per kind over the models offered", "[model][drafters]") {
  ModelPair& mp = test::bundled_pair();
  DrafterModels none;
  none.target = mp.target.get();
  CHECK(none.offers(DrafterKind::ngram));
  for (DrafterKind k : {DrafterKind::model, DrafterKind::block, DrafterKind::mtp}) {
    INFO(drafter_kind_name(k));
    CHECK_FALSE(none.offers(k));
    CHECK(make_drafter(k, 0, none) == nullptr);
  }
  CHECK(dynamic_cast<NgramDrafter*>(make_drafter(DrafterKind::ngram, 0, none).get()) != nullptr);

  DrafterModels all = none;
  all.draft = mp.draft.get();
  all.block = DFlashModel::load(test::models_dir() + "/specchat-dflash.gguf", *mp.target);
  all.mtp = MtpModel::load(test::require_test_data("drafters/mtp-ref.gguf"), *mp.target);
  CHECK(dynamic_cast<ModelDrafter*>(make_drafter(DrafterKind::model, 0, all).get()) != nullptr);
  CHECK(dynamic_cast<BlockDrafter*>(make_drafter(DrafterKind::block, 0, all).get()) != nullptr);
  const auto mtp = make_drafter(DrafterKind::mtp, 0, all);
  REQUIRE(dynamic_cast<MtpDrafter*>(mtp.get()) != nullptr);
  CHECK(mtp->target_taps() == std::vector<int32_t>{mp.target->config().n_layer - 1});

  CHECK_THROWS_AS(make_drafter(DrafterKind::model, mp.draft->n_seq(), all), std::invalid_argument);
  CHECK_THROWS_AS(make_drafter(DrafterKind::model, -1, all), std::invalid_argument);
  DrafterModels no_target = all;
  no_target.target = nullptr;
  CHECK_THROWS_AS(make_drafter(DrafterKind::ngram, 0, no_target), std::invalid_argument);
}
