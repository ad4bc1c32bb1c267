#include "app/cli/chat.h"

#include <cstdio>
#include <iostream>
#include <string>

#include "app/cli/calibrate.h"
#include "app/cli/report.h"
#include "engine/chat_context.h"
#include "engine/model_pair.h"

namespace specchat::cli {

int cmd_chat(const CommonOptions& o) {
  PairOptions po;
  po.target_path = o.model;
  po.n_ctx = o.n_ctx;
  po.n_threads = o.threads;
  apply_backends(o, po);
  const bool want_draft = o.drafter == "model" && o.draft_k > 0;
  if (want_draft) po.draft_path = o.draft == "bundled" ? bundled_draft_path() : o.draft;
  ModelPair pair = ModelPair::load(po);
  for (const std::string& w : pair.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  const int k = o.drafter == "none" || (o.drafter == "model" && !pair.draft) ? 0 : o.draft_k;
  Generator g(*pair.target, pair.draft.get());
  // The conversation with each reply's generated ids: the next prompt splices them in exactly,
  // so the previous turn stays in the KV cache (engine/chat_context.h).
  std::vector<ContextMessage> history;
  if (!o.system.empty()) history.push_back({{"system", o.system}, {}, 0, {}});
  const size_t n_fixed = history.size();
  std::fprintf(stderr, "specchat chat — %s; type a message, /reset to start over, /exit to quit\n",
               pair.draft || o.drafter == "ngram" ? "speculative" : "plain decoding");
  const int n_ctx = pair.target->n_ctx();
  std::string line;
  while (true) {
    std::fputs("> ", stderr);
    if (!std::getline(std::cin, line) || line == "/exit") break;
    if (line == "/reset") {
      history.resize(n_fixed);
      continue;
    }
    if (line.empty()) continue;
    history.push_back({{"user", line}, {}, 0, {}});
    // Drop the oldest exchanges until the prompt leaves room for the reply.
    std::vector<int32_t> prompt = build_chat_context(pair, history).prompt;
    while (static_cast<int>(prompt.size()) + std::max(1, o.n) > n_ctx && history.size() > n_fixed + 1) {
      history.erase(history.begin() + static_cast<long>(n_fixed),
                    history.begin() + static_cast<long>(std::min(history.size() - 1, n_fixed + 2)));
      std::fprintf(stderr, "(context full: dropped the oldest exchange)\n");
      prompt = build_chat_context(pair, history).prompt;
    }
    if (static_cast<int>(prompt.size()) > n_ctx) {
      std::fprintf(stderr, "error: this message has %zu tokens with the template, context is %d\n", prompt.size(),
                   n_ctx);
      history.pop_back();
      continue;
    }
    GenerateRequest req = make_request(o, prompt, k);
    plan_tree(o, pair, req);
    const GenerationResult r = g.generate(req, [](const TokenEvent& e) {
      std::fwrite(e.text.data(), 1, e.text.size(), stdout);
      std::fflush(stdout);
    });
    std::printf("\n");
    std::fprintf(stderr, "[%s · %d of %d prompt tokens cached]\n", stats_line(r.stats, req.spec.draft_k).c_str(),
                 r.stats.n_prompt_cached, r.stats.n_prompt);
    history.push_back({{"assistant", r.text}, r.tokens, pair.target->vocab().hash(), pair.template_name});
  }
  return 0;
}

}  // namespace specchat::cli
