// Helpers shared by the specchat-cli fault-kind tests (test_cli_faults_*.cpp): the models
// snapshot, running the CLI, and the statistics invariants every JSON result must meet.
// Inline functions in a named namespace, so every test file shares one snapshot.
#pragma once


#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "engine/gguf.h"
#include "engine/tokenizer.h"
#include "engine/utf8.h"
#include "engine/vocab.h"
#include "gguf_writer.h"
#include "test_paths.h"


#include <catch2/catch.hpp>

namespace specchat::test::cli_faults {

using namespace specchat;
using nlohmann::json;
using Catch::Matchers::Contains;
using specchat::test::GgufBuilder;
using specchat::test::GgufLayout;
namespace fs = std::filesystem;


using Args = std::vector<std::string>;

inline std::string S(long long v) { return std::to_string(v); }

// ---------------------------------------------------------------------------------------------
// Models and temporary files

// A private copy of the bundled target and draft, removed when the test program exits.
struct ModelSnapshot {
  fs::path dir;
  std::string target, draft;
  ModelSnapshot() {
    dir = fs::temp_directory_path() / ("specchat-cli-faults-" + S(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    target = (dir / "target.gguf").string();
    draft = (dir / "draft.gguf").string();
    fs::copy_file(test::target_model(), target, fs::copy_options::overwrite_existing);
    fs::copy_file(test::draft_model(), draft, fs::copy_options::overwrite_existing);
  }
  ~ModelSnapshot() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  ModelSnapshot(const ModelSnapshot&) = delete;
  ModelSnapshot& operator=(const ModelSnapshot&) = delete;
};

inline const ModelSnapshot& models() {
  static const ModelSnapshot m;
  return m;
}

// A directory for one test's mutated files, removed at the end of the test.
class TempDir {
 public:
  explicit TempDir(const std::string& name) : p_(models().dir / name) {
    fs::remove_all(p_);
    fs::create_directories(p_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(p_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (p_ / name).string(); }

 private:
  fs::path p_;
};

inline const Vocab& vocab() {
  static const Vocab v = Vocab::from_gguf(GgufFile::open(models().target));
  return v;
}
inline const Vocab& draft_vocab() {
  static const Vocab v = Vocab::from_gguf(GgufFile::open(models().draft));
  return v;
}
inline const Tokenizer& tokenizer() {
  static const Tokenizer t(vocab());
  return t;
}

// Concatenated bytes of `ids` as the generator builds its text (no dummy-prefix stripping).
inline std::string bytes_of(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += vocab().token_bytes(id);
  return s;
}

// First NORMAL id at or after `from` whose successor is NORMAL too, with a different string.
inline int32_t normal_id(const Vocab& v, int32_t from) {
  for (int32_t id = from; id + 1 < v.size(); ++id) {
    const auto i = static_cast<size_t>(id);
    if (v.types[i] == TokenType::normal && v.types[i + 1] == TokenType::normal &&
        v.pieces[i] != v.pieces[i + 1] && !v.is_eog(id) && id != v.bos_id) {
      return id;
    }
  }
  return -1;
}

// ---------------------------------------------------------------------------------------------
// Command lines

// `sub` (generate / compare) with --json and explicit model paths, then `extra`.
inline Args cli(const std::string& sub, const Args& extra, const std::string& model = "",
         const std::string& draft = "") {
  Args a{sub, "--json", "--model", model.empty() ? models().target : model,
         "--draft", draft.empty() ? models().draft : draft};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// What `generate` streams without --json: the text written token by token, before the blank
// line and the stats line. The output must be valid UTF-8 (incomplete characters held back).
inline std::string streamed_text(const Args& extra, const std::string& model = "", const std::string& draft = "") {
  Args a{"generate", "--model", model.empty() ? models().target : model, "--draft",
         draft.empty() ? models().draft : draft};
  a.insert(a.end(), extra.begin(), extra.end());
  const test::CliResult r = test::run_cli(a);
  INFO(r.describe());
  REQUIRE(r.exited_cleanly());
  REQUIRE(r.exit_code == 0);
  CHECK(utf8_valid(r.out));
  const size_t end = r.out.rfind("\n\n");
  REQUIRE(end != std::string::npos);
  CHECK_THAT(r.out.substr(end), Contains(" tokens, "));
  return r.out.substr(0, end);
}

inline std::vector<int32_t> toks(const json& r) { return r.at("tokens").get<std::vector<int32_t>>(); }

inline std::vector<int32_t> prefix(const std::vector<int32_t>& v, size_t n) {
  return std::vector<int32_t>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(n, v.size())));
}

// ---------------------------------------------------------------------------------------------
// Invariants of every result object (B22, B23): generate's object, or compare's baseline and
// speculative objects.

inline double num(const json& r, const char* key) {
  const json& v = r.at(key);
  REQUIRE(v.is_number());
  return v.get<double>();
}

inline void check_result(const json& r, const std::string& where) {
  INFO(where << ": " << r.dump());
  REQUIRE(r.is_object());
  for (const char* k : {"mode", "draft_k", "prompt_tokens", "n_prompt", "tokens", "drafted_flags", "text",
                        "n_tokens", "n_generated", "finish_reason", "tokens_per_s", "ttft_ms", "tpot_ms",
                        "prefill_ms", "decode_ms", "draft_ms", "verify_ms", "sample_ms", "drafted",
                        "accepted", "n_drafted", "n_accepted", "n_steps", "n_empty_drafts",
                        "acceptance_rate", "mean_accepted_length", "accepted_hist"}) {
    REQUIRE(r.contains(k));
  }
  const int gen = r.at("n_generated").get<int>();
  const int drafted = r.at("drafted").get<int>();
  const int accepted = r.at("accepted").get<int>();
  const int steps = r.at("n_steps").get<int>();
  const int k = r.at("draft_k").get<int>();
  const auto flags = r.at("drafted_flags").get<std::vector<int>>();

  // Counts: what is reported is what was returned.
  CHECK(r.at("tokens").size() == static_cast<size_t>(gen));
  CHECK(r.at("n_tokens").get<int>() == gen);
  CHECK(flags.size() == static_cast<size_t>(gen));
  CHECK(r.at("prompt_tokens").size() == static_cast<size_t>(r.at("n_prompt").get<int>()));
  CHECK(r.at("n_drafted").get<int>() == drafted);
  CHECK(r.at("n_accepted").get<int>() == accepted);
  // B22: 0 <= accepted <= drafted; each step emits at most its accepted drafts plus one token;
  // the per-token flags sum to the counter.
  CHECK(accepted >= 0);
  CHECK(accepted <= drafted);
  CHECK(gen <= accepted + steps);
  // Only the last step can lose its target-sampled token (cut by N or an EOS); a stop string
  // may also drop earlier tokens that reach into it.
  const std::string finish = r.at("finish_reason").get<std::string>();
  if (finish == "length" || finish == "eos" || finish == "context_full") CHECK(gen >= accepted + steps - 1);
  int flag_sum = 0;
  for (int f : flags) {
    CHECK((f == 0 || f == 1));
    flag_sum += f;
  }
  CHECK(flag_sum == accepted);
  CHECK(r.at("n_empty_drafts").get<int>() >= 0);
  CHECK(r.at("n_empty_drafts").get<int>() <= steps);
  // Steps by number of accepted drafts: [depth + 1] (a chain's depth is k; older CLIs report
  // no depth). A step drafts at most max(k, node budget) tokens.
  const int depth = r.contains("depth") ? r.at("depth").get<int>() : k;
  const int per_step = std::max(k, r.contains("node_budget") ? r.at("node_budget").get<int>() : 0);
  const auto hist = r.at("accepted_hist").get<std::vector<int>>();
  CHECK(hist.size() == static_cast<size_t>(depth) + 1);
  long hist_steps = 0, hist_accepted = 0;
  for (size_t i = 0; i < hist.size(); ++i) {
    hist_steps += hist[i];
    hist_accepted += static_cast<long>(i) * hist[i];
  }
  CHECK(hist_steps == steps);
  CHECK(hist_accepted >= accepted);  // the histogram counts before clipping at N / a stop
  CHECK(drafted <= static_cast<long>(per_step) * steps);
  if (r.at("mode") == "baseline") CHECK(drafted == 0);
  // α and τ from the same counts.
  const double alpha = num(r, "acceptance_rate"), tau = num(r, "mean_accepted_length");
  CHECK(alpha == Approx(drafted > 0 ? static_cast<double>(accepted) / drafted : 0.0));
  // τ's numerator: the tokens the steps produced, a final EOS / end-of-turn included.
  const long produced = static_cast<long>(num(r, "n_target_tokens"));
  if (r.at("finish_reason") == "stop") {
    CHECK(produced >= gen);  // the tokens of a stop string are produced but not emitted
  } else {
    CHECK(produced == gen + (r.at("finish_reason") == "eos" ? 1 : 0));
  }
  CHECK(tau == Approx(steps > 0 ? static_cast<double>(produced) / steps : 0.0));
  const std::set<std::string> reasons{"length", "eos", "stop", "cancelled", "context_full"};
  CHECK(reasons.count(r.at("finish_reason").get<std::string>()) == 1);
  CHECK(utf8_valid(r.at("text").get<std::string>()));

  // B23: times are finite and non-negative; tokens/s is emitted tokens over decode time,
  // never 0 or infinite once two tokens came out, and consistent with TPOT.
  for (const char* key : {"tokens_per_s", "ttft_ms", "tpot_ms", "prefill_ms", "decode_ms", "draft_ms",
                          "verify_ms", "sample_ms"}) {
    INFO(key);
    CHECK(std::isfinite(num(r, key)));
    CHECK(num(r, key) >= 0);
  }
  const double tps = num(r, "tokens_per_s"), decode_ms = num(r, "decode_ms");
  if (gen >= 2) {
    CHECK(tps > 0);
    CHECK(decode_ms > 0);
    if (decode_ms > 0) {
      const double expected = gen / (decode_ms / 1000.0);
      CHECK(std::fabs(tps - expected) <= 0.01 * expected);
      CHECK(tps * num(r, "tpot_ms") == Approx(1000.0).epsilon(0.01));
    }
  }
  // The parts of decode time are measured inside it; the first token comes after prefill.
  CHECK(num(r, "draft_ms") + num(r, "verify_ms") + num(r, "sample_ms") <= decode_ms * 1.01 + 0.5);
  CHECK(num(r, "ttft_ms") + 0.01 >= num(r, "prefill_ms"));
}

// Checks a successful --json output: one result, or compare's pair plus its verdict.
inline void check_output(const json& j, double wall_ms) {
  if (j.contains("baseline")) {
    REQUIRE(j.contains("speculative"));
    check_result(j.at("baseline"), "baseline");
    check_result(j.at("speculative"), "speculative");
    INFO(j.dump());
    const bool same = toks(j.at("baseline")) == toks(j.at("speculative"));
    REQUIRE(j.at("identical").is_boolean());
    CHECK(j.at("identical").get<bool>() == same);
    CHECK(j.at("first_difference").is_null() == same);
    // RequestPlanner::compare's names: the decode tokens/s ratio, the total-time ratio beside it.
    // null exactly when a side generated nothing (no decode rate to divide).
    const bool none = j.at("baseline").at("n_generated") == 0 || j.at("speculative").at("n_generated") == 0;
    CHECK(j.at("speedup_decode").is_null() == none);
    if (!none) CHECK(std::isfinite(num(j, "speedup_decode")));
    CHECK(std::isfinite(num(j, "total_time_ratio")));
    CHECK(j.at("baseline").at("mode") == "baseline");
    CHECK(j.at("baseline").at("draft_k") == 0);
    CHECK(j.at("baseline").at("prompt_tokens") == j.at("speculative").at("prompt_tokens"));
    // An outside stopwatch bounds the times the CLI reports (B23).
    double inside = 0;
    for (const char* side : {"baseline", "speculative"}) {
      inside += num(j.at(side), "prefill_ms") + num(j.at(side), "decode_ms");
    }
    CHECK(inside <= wall_ms);
  } else {
    check_result(j, "generate");
    CHECK(num(j, "prefill_ms") + num(j, "decode_ms") <= wall_ms);
  }
  CHECK(j.at("warnings").is_array());
}

// A run that must succeed: exit 0, valid UTF-8 JSON without an error, all invariants.
inline test::CliResult run_ok(const Args& a) {
  test::CliResult r = test::run_cli(a);
  INFO(r.describe());
  REQUIRE(r.exited_cleanly());
  REQUIRE(r.exit_code == 0);
  REQUIRE(utf8_valid(r.out));
  REQUIRE(r.json_ok);
  REQUIRE(r.json.is_object());
  REQUIRE_FALSE(r.json.contains("error"));
  check_output(r.json, r.wall_ms);
  return r;
}

// A run that must be refused: exit 1 (no crash, no signal), {"error": {kind, message}}.
inline json run_error(const Args& a) {
  const test::CliResult r = test::run_cli(a);
  INFO(r.describe());
  REQUIRE(r.exited_cleanly());
  REQUIRE(r.exit_code == 1);
  REQUIRE(utf8_valid(r.out));
  REQUIRE(r.json_ok);
  REQUIRE(r.json.contains("error"));
  const json& e = r.json.at("error");
  REQUIRE(e.at("kind").is_string());
  REQUIRE(e.at("message").is_string());
  REQUIRE_FALSE(e.at("message").get<std::string>().empty());
  return e;
}

inline void expect_identical(const json& j) {
  INFO(j.dump());
  CHECK(j.at("identical") == true);
  CHECK(j.at("first_difference").is_null());
  CHECK(toks(j.at("baseline")) == toks(j.at("speculative")));
}

// Generated length for a budget of n: exactly n unless EOS came first.
inline void expect_length(const json& r, int n) {
  INFO(r.dump());
  const int gen = r.at("n_generated").get<int>();
  if (r.at("finish_reason") == "eos") {
    CHECK(gen < n);
  } else {
    CHECK(r.at("finish_reason") == "length");
    CHECK(gen == n);
  }
}

// Whether this specchat-cli has the n-gram (prompt lookup) drafter, `--draft ngram`. It must:
// a CLI without it fails the test that asks (nothing is skipped).
inline bool ngram_supported() {
  static const bool yes = [] {
    const test::CliResult r =
        test::run_cli(cli("generate", {"--draft-k", "2", "-n", "1", "--prompt", "x"}, "", "ngram"));
    return r.exit_code == 0 && r.json_ok && r.json.value("drafter", "") == "ngram";
  }();
  INFO("specchat-cli has no --draft ngram (`generate --draft ngram` failed): the n-gram cases need it");
  REQUIRE(yes);
  return yes;
}

// Whether this specchat-cli drafts trees (`--tree dynamic|optimal`). It must: a CLI without
// them fails the test that asks (nothing is skipped).
inline bool trees_supported() {
  static const bool yes = [] {
    const test::CliResult r = test::run_cli(cli("generate", {"--tree", "dynamic", "-n", "1", "--prompt", "x"}));
    return r.exit_code == 0 && r.json_ok && r.json.value("tree", "") == "dynamic";
  }();
  INFO("specchat-cli has no --tree (`generate --tree dynamic` failed): the tree cases need it");
  REQUIRE(yes);
  return yes;
}

// A copy of `src` with every f32 / f16 / bf16 tensor filled with small random values.
inline GgufBuilder random_weights(const GgufFile& src, uint32_t seed) {
  GgufBuilder b = GgufBuilder::from_file(src);
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  for (const GgufTensorInfo& info : src.tensors()) {
    GgufBuilder::Tensor& t = b.tensor(info.name);
    const uint64_t n = info.n_elements();
    std::vector<float> vals(n);
    for (float& v : vals) v = dist(gen);
    std::vector<uint8_t> bytes;
    if (info.type == GgmlType::f32) {
      bytes.resize(n * 4);
      std::memcpy(bytes.data(), vals.data(), bytes.size());
    } else if (info.type == GgmlType::f16 || info.type == GgmlType::bf16) {
      for (float v : vals) {
        GgufBuilder::push_u16(bytes, info.type == GgmlType::f16 ? test::f32_to_f16(v) : test::f32_to_bf16(v));
      }
    } else {
      continue;  // q8_0: keep the trained bytes (the other tensors are random already)
    }
    REQUIRE(bytes.size() == t.data.size());
    t.data = std::move(bytes);
  }
  return b;
}


}  // namespace specchat::test::cli_faults
