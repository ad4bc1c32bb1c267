#include "engine/speculative/draft_tree.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace specchat {

int DraftTree::depth() const {
  int d = 0;
  for (const DraftNode& n : nodes) d = std::max(d, n.depth);
  return d;
}

std::vector<int32_t> DraftTree::children(int slot) const {
  std::vector<int32_t> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].parent + 1 == slot) out.push_back(static_cast<int32_t>(i));
  }
  return out;
}

int32_t DraftTree::add(int32_t token, int32_t parent, double logp) {
  if (parent < -1 || parent >= size()) throw std::logic_error("DraftTree::add: bad parent");
  if (child_q.empty()) {
    child_q.resize(1);
    child_mode.resize(1, ChildSampling::deterministic);
  }
  DraftNode n;
  n.token = token;
  n.parent = parent;
  n.depth = parent < 0 ? 1 : nodes[static_cast<size_t>(parent)].depth + 1;
  n.logp = logp;
  nodes.push_back(n);
  child_q.emplace_back();
  child_mode.push_back(ChildSampling::deterministic);
  return size() - 1;
}

void DraftTree::set_children_source(int slot, Distribution q, ChildSampling mode) {
  if (child_q.empty()) {
    child_q.resize(1);
    child_mode.resize(1, ChildSampling::deterministic);
  }
  if (slot < 0 || slot >= static_cast<int>(child_q.size())) {
    throw std::logic_error("DraftTree::set_children_source: bad slot");
  }
  child_q[static_cast<size_t>(slot)] = std::move(q);
  child_mode[static_cast<size_t>(slot)] = mode;
}

DraftTree DraftTree::chain(const std::vector<int32_t>& tokens, std::vector<Distribution> q,
                           ChildSampling mode) {
  DraftTree t;
  double logp = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i < q.size()) {
      const double pr = q[i].prob(tokens[i]);
      logp += pr > 0 ? std::log(pr) : -1e30;
      t.set_children_source(static_cast<int>(i), std::move(q[i]), mode);
    }
    t.add(tokens[i], static_cast<int32_t>(i) - 1, logp);
  }
  return t;
}

void DraftTree::validate() const {
  if (!nodes.empty() && (child_q.size() != nodes.size() + 1 || child_mode.size() != nodes.size() + 1)) {
    throw std::logic_error("DraftTree: slot vectors not sized n_nodes + 1");
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const DraftNode& n = nodes[i];
    if (n.parent >= static_cast<int32_t>(i) || n.parent < -1) throw std::logic_error("DraftTree: parent after child");
    const int want = n.parent < 0 ? 1 : nodes[static_cast<size_t>(n.parent)].depth + 1;
    if (n.depth != want) throw std::logic_error("DraftTree: inconsistent depth");
  }
}

}  // namespace specchat
