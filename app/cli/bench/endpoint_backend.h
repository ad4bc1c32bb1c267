// The runner's backend over an OpenAI-compatible server (`bench --suite ... --endpoint URL`,
// issue 15): each request is one streamed chat (or completion) request, sent from its own thread
// so a wave's requests run concurrently on the server. A server sends text, not token ids, so:
//   - the output compared with baseline (identity) and hashed is the reply's UTF-8 bytes;
//   - output tokens are the server's usage.completion_tokens; drafted / accepted its speculative
//     timings when it reports them (our server and llama-server do); steps are then
//     output - accepted (each verification step emits its accepted drafts and one token of the
//     target's own), else one per token; per-position acceptance is unknown (left empty);
//   - input tokens are the suite's input_ids when it has them, else an estimate of one token per
//     4 bytes (the server's tokenizer is not known here).
// Configurations map to our server's request parameters (app/serve/api_request.h): baseline sends
// "speculative": false; chain, dynamic, optimal and ngram send drafter, draft_k, tree and
// node_budget. Another server ignores those keys and runs what it was started with, so every
// configuration measures the same thing there. block / mtp are refused (no request parameter
// selects them). TTFT is measured from the moment the request is queued to its first text, as for
// the engine; times include the network.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "app/cli/bench/runner.h"
#include "app/remote/openai_client.h"

namespace specchat::bench {

struct EndpointOptions {
  std::string url;      // http(s)://host:port[/v1]
  std::string api_key;  // empty = none
  std::string model;    // the "model" field; empty = the server's default
  int capacity = 64;    // most requests in flight
};

class EndpointBackend : public BenchBackend {
 public:
  explicit EndpointBackend(EndpointOptions o);
  ~EndpointBackend() override;  // waits for requests in flight
  // Throws ConfigError for a configuration no request parameter selects (block, mtp).
  static void check_configs(const std::vector<BenchConfig>& configs);

  std::vector<int32_t> encode(const BenchPrompt& p, const std::string& prompt_format) override;
  int n_ctx() const override { return 1 << 30; }  // the server enforces its own; an error is recorded
  int capacity() const override { return opts_.capacity; }
  SpecConfig plan(const BenchConfig& c, const std::vector<int32_t>& prompt) override;
  void clear_cache() override {}  // a server keeps no prefix of ours between requests
  int64_t submit(const GenerateRequest& req, TokenCallback on_token) override;
  int64_t submit_prompt(const BenchPrompt& p, const GenerateRequest& req, TokenCallback on_token) override;
  void step() override;  // waits briefly for text; forwards it to the callbacks on this thread
  bool finished(int64_t id) const override;
  GenerationResult take(int64_t id) override;  // rethrows the request's error

 private:
  struct Request {
    TokenCallback on_token;
    int pending_pieces = 0;  // text pieces received, not yet forwarded (guarded by mu_)
    bool done = false;
    std::string error;
    remote::RemoteResult result;
    std::thread thread;
  };
  EndpointOptions opts_;
  std::string prompt_format_ = "chat";
  BenchConfig config_;  // the one plan() was last called with: the wave's configuration
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<int64_t, std::unique_ptr<Request>> requests_;
  int64_t next_id_ = 1;
  std::atomic<bool> cancel_{false};  // set by the destructor: streams in flight close
};

}  // namespace specchat::bench
