// The runner's backend over an OpenAI-compatible server (see endpoint_backend.h).
#include "app/cli/bench/endpoint_backend.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <utility>

namespace specchat::bench {

EndpointBackend::EndpointBackend(EndpointOptions o) : opts_(std::move(o)) {
  if (opts_.capacity < 1) opts_.capacity = 1;
  remote::parse_endpoint_url(opts_.url);  // a bad URL fails here, before any request
}

EndpointBackend::~EndpointBackend() {
  cancel_.store(true);  // streams in flight close at their next piece
  for (auto& [id, r] : requests_) {
    if (r->thread.joinable()) r->thread.join();
  }
}

void EndpointBackend::check_configs(const std::vector<BenchConfig>& configs) {
  for (const BenchConfig& c : configs) {
    if (c.approximate()) {
      throw ConfigError("--endpoint: configuration " + c.name + " cannot be asked of a server (PIPO runs locally only)");
    }
    if (c.settings.drafter == DrafterChoice::block || c.settings.drafter == DrafterChoice::mtp)
      throw ConfigError("--endpoint: configuration " + c.name +
                        " cannot be asked of a server (no request parameter selects the block drafter or MTP head)");
  }
}

std::vector<int32_t> EndpointBackend::encode(const BenchPrompt& p, const std::string& prompt_format) {
  prompt_format_ = prompt_format;
  if (!p.input_ids.empty()) return p.input_ids;
  size_t bytes = 0;
  for (const std::string& t : p.turns) bytes += t.size();
  return std::vector<int32_t>(std::max<size_t>(1, (bytes + 3) / 4), 0);  // an estimate: 4 bytes a token
}

SpecConfig EndpointBackend::plan(const BenchConfig& c, const std::vector<int32_t>& /*prompt*/) {
  config_ = c;
  SpecConfig s;
  s.draft_k = c.baseline() ? 0 : (c.settings.tree == TreeMode::chain ? c.settings.draft_k : c.settings.depth);
  return s;
}

int64_t EndpointBackend::submit(const GenerateRequest& /*req*/, TokenCallback /*on_token*/) {
  throw std::logic_error("EndpointBackend sends text: submit through submit_prompt");
}

int64_t EndpointBackend::submit_prompt(const BenchPrompt& p, const GenerateRequest& req, TokenCallback on_token) {
  remote::RemoteRequest rr;
  rr.endpoint = opts_.url;
  rr.api_key = opts_.api_key;
  rr.model = opts_.model;
  rr.chat = prompt_format_ != "raw";
  if (rr.chat) {
    for (const std::string& t : p.turns) rr.messages.push_back({"user", t});
  } else {
    rr.prompt = p.turns.empty() ? std::string() : p.turns.front();
  }
  rr.max_tokens = req.max_tokens;
  rr.temperature = req.sampling.temperature;
  rr.seed = req.sampling.seed;
  rr.speculative = !config_.baseline();
  rr.cancel = &cancel_;
  if (!config_.baseline()) {
    const SpecSettings& s = config_.settings;
    const char* tree = s.tree == TreeMode::dynamic ? "dynamic" : s.tree == TreeMode::optimal ? "optimal" : "chain";
    rr.extra = {{"drafter", drafter_choice_name(s.drafter)}, {"draft_k", s.draft_k}, {"tree", tree}};
    if (s.tree != TreeMode::chain) rr.extra["node_budget"] = s.node_budget;
  }
  auto r = std::make_unique<Request>();
  r->on_token = std::move(on_token);
  Request* raw = r.get();
  int64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_id_++;
    requests_.emplace(id, std::move(r));
  }
  raw->thread = std::thread([this, raw, rr = std::move(rr)] {
    remote::RemoteResult res;
    std::string error;
    try {
      res = remote::remote_generate(rr, [this, raw](const std::string&) {
        std::lock_guard<std::mutex> lock(mu_);
        ++raw->pending_pieces;
        cv_.notify_all();
      });
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> lock(mu_);
    raw->result = std::move(res);
    raw->error = std::move(error);
    raw->done = true;
    cv_.notify_all();
  });
  return id;
}

void EndpointBackend::step() {
  std::vector<std::pair<Request*, int>> ready;
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto any = [this] {
      return std::any_of(requests_.begin(), requests_.end(),
                         [](const auto& kv) { return kv.second->pending_pieces > 0 || kv.second->done; });
    };
    cv_.wait_for(lock, std::chrono::milliseconds(2), any);
    for (auto& [id, r] : requests_) {
      if (r->pending_pieces == 0) continue;
      ready.emplace_back(r.get(), r->pending_pieces);
      r->pending_pieces = 0;
    }
  }
  // On the runner's thread, as the engine's callbacks are: it timestamps the first and last text.
  for (auto& [r, n] : ready) {
    for (int i = 0; i < n; ++i) r->on_token(TokenEvent{});
  }
}

bool EndpointBackend::finished(int64_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = requests_.find(id);
  return it == requests_.end() || (it->second->done && it->second->pending_pieces == 0);
}

GenerationResult EndpointBackend::take(int64_t id) {
  std::unique_ptr<Request> r;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = requests_.find(id);
    if (it == requests_.end()) throw std::invalid_argument("EndpointBackend: unknown request");
    r = std::move(it->second);
    requests_.erase(it);
  }
  if (r->thread.joinable()) r->thread.join();
  if (!r->error.empty()) throw std::runtime_error(r->error);
  const remote::RemoteResult& res = r->result;
  GenerationResult out;
  out.text = res.text;
  out.tokens.assign(res.text.begin(), res.text.end());  // bytes: what identity and the hash compare
  for (int32_t& b : out.tokens) b &= 0xff;
  GenerationStats& st = out.stats;
  st.n_generated = res.n_generated >= 0 ? static_cast<int>(res.n_generated) : static_cast<int>((res.text.size() + 3) / 4);
  st.n_drafted = static_cast<int>(res.n_drafted);
  st.n_accepted = static_cast<int>(std::min<long>(res.n_accepted, st.n_generated));
  st.n_steps = std::max(0, st.n_generated - st.n_accepted);
  st.n_target_tokens = st.n_generated;
  out.finish = res.finish_reason == "length" ? FinishReason::length : FinishReason::eos;
  return out;
}

}  // namespace specchat::bench
