#include "app/cli/chat.h"

#include <cstdio>
#include <iostream>
#include <set>
#include <string>

#include "app/cli/feature_drafters.h"
#include "app/cli/report.h"
#include "engine/chat_context.h"
#include "engine/model_pair.h"
#include "engine/runtime/request_planner.h"

namespace specchat::cli {

int cmd_chat(const CommonOptions& given) {
  PairOptions po;
  po.target_path = given.model;
  po.n_ctx = given.n_ctx;
  po.n_threads = given.threads;
  apply_backends(given, po);
  apply_draft(given, given.drafter == "model" && given.draft_k > 0, po);
  ModelPair pair = ModelPair::load(po);
  CommonOptions o = given;
  use_draft_choice(pair, o);
  for (const std::string& w : pair.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  Generator g(*pair.target, pair.draft.get());
  const FeatureDrafters fd = install_feature_drafters(g.engine(), o);
  RequestPlanner planner(pair, o.threads);
  planner.set_feature_drafters(fd);
  // The conversation with each reply's generated ids: the next prompt splices them in exactly,
  // so the previous turn stays in the KV cache (engine/chat_context.h).
  std::vector<ContextMessage> history;
  if (!o.system.empty()) history.push_back({{"system", o.system}, {}, 0, {}});
  const size_t n_fixed = history.size();
  std::fprintf(stderr, "specchat chat — %s; type a message, /reset to start over, /exit to quit\n",
               pair.draft || o.drafter == "ngram" || fd.block_size > 0 || fd.mtp ? "speculative" : "plain decoding");
  std::set<std::string> warned;  // the plan's warnings, once per session
  std::string line;
  while (true) {
    std::fputs("> ", stderr);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      history.resize(n_fixed);
      std::fprintf(stderr, "(conversation reset: the next message starts a new chat%s)\n",
                   n_fixed > 0 ? "; the system prompt stays" : "");
      continue;
    }
    if (line.empty()) continue;
    history.push_back({{"user", line}, {}, 0, {}});
    // RequestPlanner's one context policy: the oldest exchanges go until the reply has room.
    const ContextFit fit = planner.fit_context(history, o.n);
    if (!fit.fits) {
      std::fprintf(stderr, "error: %s\n", fit.problem.c_str());
      history.pop_back();
      continue;
    }
    if (fit.n_dropped > 0) {
      const auto first = history.begin() + static_cast<long>(n_fixed);
      history.erase(first, first + fit.n_dropped);
      std::fprintf(stderr, "(context full: left out the %d oldest message(s))\n", fit.n_dropped);
    }
    GenerateRequest req = make_request(o, fit.prompt, o.draft_k);
    if (req.spec.draft_k > 0) {
      const TreePlan plan = planner.plan_tree(spec_settings(o), req.prompt);
      for (const std::string& w : plan.warnings) {
        if (warned.insert(w).second) std::fprintf(stderr, "warning: %s\n", w.c_str());
      }
      req.spec = plan.spec;
    }
    const GenerationResult r = g.generate(req, [](const TokenEvent& e) {
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
    });
    std::printf("\n");
    std::fflush(stdout);  // the reply's line ends before the stats line on stderr
    std::fprintf(stderr, "[%s · %d of %d prompt tokens cached]\n", stats_line(r.stats, req.spec).c_str(),
                 r.stats.n_prompt_cached, r.stats.n_prompt);
    history.push_back({{"assistant", r.text}, r.tokens, pair.target->vocab().hash(), pair.template_name});
  }
  return 0;
}

}  // namespace specchat::cli
