#include "ui/spec_setup.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <exception>
#include <fstream>
#include <vector>

#include "engine/speculative/calibration_file.h"
#include "engine/speculative/sequoia.h"

namespace specchat::ui {

namespace {

using nlohmann::json;

// Whether the calibration's {size, fingerprint} entry describes the file at `path`.
bool same_file(const json& stored, const std::string& path) {
  if (!stored.is_object()) return false;
  return stored.value("size", uint64_t{0}) == file_size_bytes(path) &&
         stored.value("fingerprint", std::string()) == file_fingerprint(path);
}

// The calibration's acceptance-by-rank vector for this pair; empty (with *why set) when there
// is no usable one.
std::vector<double> calibrated_acceptance(const ModelPair& pair, QString* why) {
  const std::string path = calibration_path(pair.draft->path());
  const QString qpath = QString::fromStdString(path);
  std::ifstream in(path);
  if (!in) {
    *why = QStringLiteral("no calibration at %1 (run `specchat-cli calibrate`)").arg(qpath);
    return {};
  }
  const json cal = json::parse(in, nullptr, false);
  try {
    if (cal.is_discarded() || !cal.is_object()) {
      *why = QStringLiteral("calibration %1 is not a JSON object").arg(qpath);
      return {};
    }
    if (!same_file(cal.value("target", json()), pair.target->path()) ||
        !same_file(cal.value("draft", json()), pair.draft->path())) {
      *why = QStringLiteral("calibration %1 was made for other model files").arg(qpath);
      return {};
    }
    auto a = cal.at("acceptance").at("accept_by_rank").get<std::vector<double>>();
    if (a.empty()) *why = QStringLiteral("calibration %1 has an empty acceptance vector").arg(qpath);
    return a;
  } catch (const std::exception& e) {
    *why = QStringLiteral("calibration %1 is unusable: %2").arg(qpath, QString::fromUtf8(e.what()));
    return {};
  }
}

}  // namespace

SpecSetup plan_spec(const GenerationSettings& s, const ModelPair& pair) {
  SpecSetup out;
  out.drafter = QStringLiteral("none");
  out.tree_mode = QStringLiteral("none");
  out.spec.draft_k = 0;
  out.spec.drafter = s.drafter;
  if (s.draft_k <= 0) return out;
  if (s.drafter == DrafterKind::model && !pair.draft) {
    out.warnings << QStringLiteral("no draft model loaded: generating without a drafter");
    return out;
  }
  const int max_nodes = std::max(1, pair.target->max_batch() - 1);
  out.speculative = true;
  out.drafter = s.drafter == DrafterKind::model ? QStringLiteral("draft model") : QStringLiteral("n-gram");
  out.spec.draft_k = std::clamp(s.draft_k, 1, max_nodes);
  TreeBudget& t = out.spec.tree;
  t.mode = s.tree_mode;
  t.node_budget = std::clamp(s.node_budget, 1, max_nodes);
  t.depth = std::clamp(s.tree_depth, 1, t.node_budget);
  t.branch = std::max(1, s.tree_branch);
  if (t.mode == TreeMode::optimal) {
    QString why;
    std::vector<double> a;
    if (s.drafter == DrafterKind::model) {
      a = calibrated_acceptance(pair, &why);
    } else {
      why = QStringLiteral("the n-gram drafter has no calibration");
    }
    if (a.empty()) {
      out.warnings << QStringLiteral("optimal tree unavailable (%1): using a dynamic tree").arg(why);
      t.mode = TreeMode::dynamic;
    } else {
      const TreeShape shape = sequoia_tree(a, t.node_budget, t.depth);
      t.shape_parent = shape.parent;
      t.shape_rank = shape.rank;
    }
  }
  const TreeBudget eff = out.spec.effective_budget();
  out.tree_mode = QString::fromUtf8(tree_mode_name(eff.mode));
  out.node_budget = eff.node_budget;
  out.depth = eff.depth;
  return out;
}

}  // namespace specchat::ui
