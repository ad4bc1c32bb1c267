// A tree of drafted tokens, verified by the target in one forward with tree attention.
//
// Node i has a parent (−1 = the root, i.e. the last committed token) and depth = parent depth + 1
// (root children have depth 1); nodes are stored parents-first (parent < i). Its position in
// the sequence is (committed length − 1) + depth. The children of one parent were drawn from one
// draft distribution q in one of three ways, which decides the acceptance rule's variant
// (see acceptance.h): the tree records it per parent, it is not a global switch.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/sampler.h"

namespace specchat {

enum class ChildSampling {
  // Children are fixed functions of q (top-k, n-gram lookup): q is one-hot on each child
  // (EAGLE, Li et al. 2024 §3.3; FAULT-KINDS B02). On rejection p ← norm(p without x).
  deterministic,
  // Children drawn i.i.d. from q (SpecInfer, Miao et al. 2024 §4.2): accept min(1, p/q),
  // on rejection p ← norm(max(0, p − q)).
  with_replacement,
  // Children drawn from q without replacement (Sequoia, Chen et al. 2024 §3.2): as above, and
  // after a rejection of x also q ← norm(q without x).
  without_replacement,
};

struct DraftNode {
  int32_t token = 0;
  int32_t parent = -1;   // index of the parent node, −1 = root
  int32_t depth = 1;     // root children: 1
  double logp = 0.0;     // cumulative draft log-probability of the path to this node
};

struct DraftTree {
  std::vector<DraftNode> nodes;           // [n_nodes], parents first
  // Per parent slot (0 = root, i + 1 = node i): the distribution its children were drawn from
  // and how. Only slots that have children need a meaningful entry.
  std::vector<Distribution> child_q;      // [n_nodes + 1]
  std::vector<ChildSampling> child_mode;  // [n_nodes + 1]

  bool empty() const { return nodes.empty(); }
  int size() const { return static_cast<int>(nodes.size()); }
  int depth() const;
  // Children of parent slot s (0 = root, i + 1 = node i), in insertion order (the order in
  // which the acceptance rule tries them).
  std::vector<int32_t> children(int slot) const;
  // Appends a node; grows child_q/child_mode. Returns its index.
  int32_t add(int32_t token, int32_t parent, double logp);
  // Sets how the children of slot s were drawn.
  void set_children_source(int slot, Distribution q, ChildSampling mode);
  // A chain tree: tokens[i] is the child of tokens[i − 1]; q[i] the distribution tokens[i] was
  // drawn from (mode for all links).
  static DraftTree chain(const std::vector<int32_t>& tokens, std::vector<Distribution> q, ChildSampling mode);
  // Checks the invariants (parents first, depths, slot vectors sized); throws std::logic_error.
  void validate() const;
};

}  // namespace specchat
