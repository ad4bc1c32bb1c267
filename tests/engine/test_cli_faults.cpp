// specchat-cli against the fault kinds of ../shared/cases/FAULT-KINDS.md that apply to the CLI
// today (B01, B02/B04, B05, B06, B07, B09/B10, B12, B13, B14, B15, B17, B19, B22, B23).
//
// Every test runs the real binary as a child process (cli_runner.h: fork + execv, no shell) and
// parses its --json output. Every JSON result is checked against the statistics invariants of
// B22/B23 (check_result), so each run is also a metrics test. The models are snapshotted into a
// temporary directory once per test program, so a model file rewritten while the tests run (the
// recipe retrains in place) cannot make two runs disagree. Nothing here depends on what the
// bundled draft is, beyond sharing the target's vocabulary.
#include <catch2/catch.hpp>

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

using namespace specchat;
using nlohmann::json;
using Catch::Matchers::Contains;
using specchat::test::GgufBuilder;
using specchat::test::GgufLayout;
namespace fs = std::filesystem;

namespace {

using Args = std::vector<std::string>;

std::string S(long long v) { return std::to_string(v); }

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

const ModelSnapshot& models() {
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

const Vocab& vocab() {
  static const Vocab v = Vocab::from_gguf(GgufFile::open(models().target));
  return v;
}
const Vocab& draft_vocab() {
  static const Vocab v = Vocab::from_gguf(GgufFile::open(models().draft));
  return v;
}
const Tokenizer& tokenizer() {
  static const Tokenizer t(vocab());
  return t;
}

// Concatenated bytes of `ids` as the generator builds its text (no dummy-prefix stripping).
std::string bytes_of(const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += vocab().token_bytes(id);
  return s;
}

// First NORMAL id at or after `from` whose successor is NORMAL too, with a different string.
int32_t normal_id(const Vocab& v, int32_t from) {
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
Args cli(const std::string& sub, const Args& extra, const std::string& model = "",
         const std::string& draft = "") {
  Args a{sub, "--json", "--model", model.empty() ? models().target : model,
         "--draft", draft.empty() ? models().draft : draft};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// What `generate` streams without --json: the text written token by token, before the blank
// line and the stats line. The output must be valid UTF-8 (incomplete characters held back).
std::string streamed_text(const Args& extra, const std::string& model = "", const std::string& draft = "") {
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

std::vector<int32_t> toks(const json& r) { return r.at("tokens").get<std::vector<int32_t>>(); }

std::vector<int32_t> prefix(const std::vector<int32_t>& v, size_t n) {
  return std::vector<int32_t>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(std::min(n, v.size())));
}

// ---------------------------------------------------------------------------------------------
// Invariants of every result object (B22, B23): generate's object, or compare's baseline and
// speculative objects.

double num(const json& r, const char* key) {
  const json& v = r.at(key);
  REQUIRE(v.is_number());
  return v.get<double>();
}

void check_result(const json& r, const std::string& where) {
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
  CHECK(tau == Approx(steps > 0 ? static_cast<double>(gen) / steps : 0.0));
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
void check_output(const json& j, double wall_ms) {
  if (j.contains("baseline")) {
    REQUIRE(j.contains("speculative"));
    check_result(j.at("baseline"), "baseline");
    check_result(j.at("speculative"), "speculative");
    INFO(j.dump());
    const bool same = toks(j.at("baseline")) == toks(j.at("speculative"));
    REQUIRE(j.at("identical").is_boolean());
    CHECK(j.at("identical").get<bool>() == same);
    CHECK(j.at("first_difference").is_null() == same);
    CHECK(std::isfinite(num(j, "speedup")));
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
test::CliResult run_ok(const Args& a) {
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
json run_error(const Args& a) {
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

void expect_identical(const json& j) {
  INFO(j.dump());
  CHECK(j.at("identical") == true);
  CHECK(j.at("first_difference").is_null());
  CHECK(toks(j.at("baseline")) == toks(j.at("speculative")));
}

// Generated length for a budget of n: exactly n unless EOS came first.
void expect_length(const json& r, int n) {
  INFO(r.dump());
  const int gen = r.at("n_generated").get<int>();
  if (r.at("finish_reason") == "eos") {
    CHECK(gen < n);
  } else {
    CHECK(r.at("finish_reason") == "length");
    CHECK(gen == n);
  }
}

// Whether this specchat-cli has the n-gram (prompt lookup) drafter, `--draft ngram`. Parts of
// the tests that need it are skipped, with a warning, when it has not.
bool ngram_supported() {
  static const bool yes = [] {
    const test::CliResult r =
        test::run_cli(cli("generate", {"--draft-k", "2", "-n", "1", "--prompt", "x"}, "", "ngram"));
    return r.exit_code == 0 && r.json_ok && r.json.value("drafter", "") == "ngram";
  }();
  if (!yes) WARN("specchat-cli has no --draft ngram: n-gram cases skipped");
  return yes;
}

// Whether this specchat-cli drafts trees (`--tree dynamic|optimal`); skipped, warned, if not.
bool trees_supported() {
  static const bool yes = [] {
    const test::CliResult r = test::run_cli(cli("generate", {"--tree", "dynamic", "-n", "1", "--prompt", "x"}));
    return r.exit_code == 0 && r.json_ok && r.json.value("tree", "") == "dynamic";
  }();
  if (!yes) WARN("specchat-cli has no --tree: tree cases skipped");
  return yes;
}

// A copy of `src` with every f32 / f16 / bf16 tensor filled with small random values.
GgufBuilder random_weights(const GgufFile& src, uint32_t seed) {
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

}  // namespace

// ---------------------------------------------------------------------------------------------
// B01: greedy speculative decoding is exactly greedy baseline decoding.

TEST_CASE("cli B01: greedy compare is identical for every k, incl. a 1-token prompt", "[model][cli]") {
  const std::vector<Args> prompts = {
      {"--prompt", "Once upon a time"},
      {"--chat", "Tom has 3 apples and buys 5 more. How many does he have?"},
      {"--prompt", ""},  // BOS only: a 1-token context
  };
  for (const Args& p : prompts) {
    for (int k : {1, 2, 3, 4, 8, 16}) {
      Args extra{"--draft-k", S(k), "--temp", "0", "-n", "40"};
      extra.insert(extra.end(), p.begin(), p.end());
      INFO(p[0] << " '" << p[1] << "' k " << k);
      const json j = run_ok(cli("compare", extra)).json;
      expect_identical(j);
      CHECK(j.at("speculative").at("draft_k") == k);
      CHECK(j.at("speculative").at("mode") == "speculative");
      if (p[1].empty()) CHECK(j.at("baseline").at("n_prompt") == 1);
    }
  }
}

TEST_CASE("cli B01/B13: greedy compare with the n-gram drafter is identical, incl. a 1-token context",
          "[model][cli]") {
  if (!ngram_supported()) return;
  const std::vector<std::pair<Args, std::vector<int>>> cases = {
      {{"--prompt", "Once upon a time"}, {1, 2, 3, 4, 8, 16}},
      {{"--chat", "Tom has 3 apples and buys 5 more. How many does he have?"}, {1, 8}},
      {{"--prompt", ""}, {1, 8}},  // BOS only: nothing to look up at first
  };
  for (const auto& [p, ks] : cases) {
    for (int k : ks) {
      Args extra{"--draft-k", S(k), "--temp", "0", "-n", "40"};
      extra.insert(extra.end(), p.begin(), p.end());
      INFO("ngram " << p[0] << " '" << p[1] << "' k " << k);
      const json j = run_ok(cli("compare", extra, "", "ngram")).json;
      expect_identical(j);
      CHECK(j.at("speculative").at("drafter") == "ngram");
    }
  }
}

TEST_CASE("cli B01: greedy compare with draft trees is identical", "[model][cli]") {
  if (!trees_supported()) return;
  for (const char* tree : {"dynamic", "optimal"}) {
    for (const Args& p : {Args{"--prompt", "Once upon a time"}, Args{"--prompt", ""}}) {
      Args extra{"--tree", tree, "--temp", "0", "-n", "40"};
      extra.insert(extra.end(), p.begin(), p.end());
      INFO("tree " << tree << " prompt '" << p[1] << "'");
      const json j = run_ok(cli("compare", extra)).json;
      expect_identical(j);
      CHECK(j.at("speculative").at("tree") == tree);
    }
  }
}

TEST_CASE("cli B01/B22: the target as its own draft accepts everything (alpha ~ 1, tau ~ k+1)",
          "[model][cli]") {
  for (int k : {1, 4, 8}) {
    const int n = (k + 1) * (36 / (k + 1));  // whole blocks, so the last step is not clipped
    INFO("k " << k << " n " << n);
    const json j = run_ok(cli("compare", {"--draft-k", S(k), "--temp", "0", "-n", S(n), "--prompt",
                                          "Once upon a time"},
                              models().target, models().target))
                       .json;
    expect_identical(j);
    const json& s = j.at("speculative");
    CHECK(num(s, "acceptance_rate") >= 0.9);
    if (s.at("finish_reason") == "length") {
      CHECK(num(s, "mean_accepted_length") >= 0.9 * (k + 1));
    }
  }
}

TEST_CASE("cli B01/B22: a random-weights draft (nothing accepted) keeps the output identical",
          "[model][cli]") {
  TempDir tmp("b01-random");
  const std::string path = tmp.file("random-draft.gguf");
  random_weights(GgufFile::open(models().draft), 1234).write_file(path);
  for (int k : {1, 4, 16}) {
    INFO("k " << k);
    const json j = run_ok(cli("compare", {"--draft-k", S(k), "--temp", "0", "-n", "24", "--prompt",
                                          "Once upon a time"},
                              models().target, path))
                       .json;
    expect_identical(j);
    const json& s = j.at("speculative");
    CHECK(s.at("n_drafted").get<int>() > 0);
    CHECK(num(s, "acceptance_rate") <= 0.5);
    CHECK(num(s, "mean_accepted_length") <= 1.5);
  }
}

// ---------------------------------------------------------------------------------------------
// B02/B04: a seed fixes sampled output, whatever runs alongside.

TEST_CASE("cli B04: the same seed gives identical sampled tokens, also next to another run - "
          "seeds differ",
          "[model][cli]") {
  const Args a = cli("generate", {"--draft-k", "4", "--temp", "1.5", "--seed", "42", "-n", "32", "--prompt",
                                  "Once upon a time"});
  const json first = run_ok(a).json;
  CHECK(first.at("n_generated").get<int>() > 0);
  for (int i = 0; i < 2; ++i) {
    const json again = run_ok(a).json;
    CHECK(toks(again) == toks(first));
    CHECK(again.at("text") == first.at("text"));
  }
  // One more while a different sampled generation runs at the same time.
  const Args other = cli("generate", {"--draft-k", "3", "--temp", "1.0", "--seed", "7", "-n", "48",
                                      "--prompt", "Tom has a red ball."});
  auto fa = std::async(std::launch::async, [&] { return test::run_cli(a); });
  auto fb = std::async(std::launch::async, [&] { return test::run_cli(other); });
  const test::CliResult ra = fa.get(), rb = fb.get();
  {
    INFO(ra.describe());
    REQUIRE(ra.exit_code == 0);
    REQUIRE(ra.json_ok);
    check_output(ra.json, ra.wall_ms);
    CHECK(toks(ra.json) == toks(first));
  }
  {
    INFO(rb.describe());
    REQUIRE(rb.exit_code == 0);
    REQUIRE(rb.json_ok);
    check_output(rb.json, rb.wall_ms);
  }
  // The same with the n-gram drafter.
  if (ngram_supported()) {
    const Args ng = cli("generate", {"--draft-k", "4", "--temp", "1.5", "--seed", "42", "-n", "32", "--prompt",
                                     "Once upon a time. Once upon a time."},
                        "", "ngram");
    const json n1 = run_ok(ng).json;
    CHECK(toks(run_ok(ng).json) == toks(n1));
  }
  // Different seeds, different output.
  auto seeded = [](int seed) {
    return cli("generate", {"--draft-k", "4", "--temp", "1.5", "--seed", S(seed), "-n", "32", "--prompt",
                            "Once upon a time"});
  };
  CHECK(toks(run_ok(seeded(1)).json) != toks(run_ok(seeded(2)).json));
}

// ---------------------------------------------------------------------------------------------
// B05: a draft with another vocabulary is refused before generating, naming the difference.

TEST_CASE("cli B05: draft vocabulary mutations are refused with the mismatch named", "[model][cli]") {
  TempDir tmp("b05");
  const GgufFile src = GgufFile::open(models().draft);
  const Vocab& dv = draft_vocab();
  const int32_t n = dv.size();
  const int32_t x = normal_id(dv, n / 4);
  REQUIRE(x > 0);
  const auto tokens = src.get_string_array("tokenizer.ggml.tokens");
  const auto scores = src.get_f32_array("tokenizer.ggml.scores");
  const auto types = src.get_i32_array("tokenizer.ggml.token_type");
  const Args gen_args{"-n", "4", "--draft-k", "4", "--prompt", "Once upon a time"};

  // Control: the draft rewritten without changes is accepted, so refusals below come from the
  // mutations alone.
  {
    const std::string path = tmp.file("unchanged.gguf");
    GgufBuilder::from_file(src).write_file(path);
    run_ok(cli("generate", gen_args, models().target, path));
  }

  auto drop_last = [&](GgufBuilder& b) {
    b.set_string_array("tokenizer.ggml.tokens", std::vector<std::string>(tokens.begin(), tokens.end() - 1));
    b.set_f32_array("tokenizer.ggml.scores", std::vector<float>(scores.begin(), scores.end() - 1));
    b.set_i32_array("tokenizer.ggml.token_type", std::vector<int32_t>(types.begin(), types.end() - 1));
  };
  struct Case {
    std::string name;
    std::function<void(GgufBuilder&)> mutate;
    std::set<std::string> kinds;         // accepted error kinds
    std::vector<std::string> must_name;  // substrings of the message
  };
  const std::vector<Case> cases = {
      // A self-consistent draft with one token fewer (embedding and output rows dropped too):
      // the pair check itself must name both sizes.
      {"drop the last token (whole model)",
       [&](GgufBuilder& b) {
         drop_last(b);
         for (const char* name : {"token_embd.weight", "output.weight"}) {
           if (!src.tensor(name)) continue;
           GgufBuilder::Tensor& t = b.tensor(name);
           REQUIRE(t.ne.size() == 2);
           REQUIRE(t.ne[1] == static_cast<uint64_t>(n));
           const size_t row = t.data.size() / static_cast<size_t>(n);
           t.ne[1] = static_cast<uint64_t>(n - 1);
           t.data.resize(t.data.size() - row);
         }
         if (b.has("llama.vocab_size")) b.set_u32("llama.vocab_size", static_cast<uint32_t>(n - 1));
       },
       {"vocab_mismatch"},
       {S(n), S(n - 1), "draft"}},
      // Only the tokenizer arrays shortened: the file contradicts its own tensors. Refused when
      // the draft loads (the message names the draft and the sizes), before any pair check.
      {"drop the last token (tokenizer arrays only)", drop_last,
       {"vocab_mismatch", "vocab_error", "model_error"},
       {S(n), S(n - 1), "draft"}},
      {"change one normal token's string",
       [&](GgufBuilder& b) {
         auto t = tokens;
         t[static_cast<size_t>(x)] = "\xE2\x96\x81specchatmutated";
         b.set_string_array("tokenizer.ggml.tokens", t);
       },
       {"vocab_mismatch"},
       {"token " + S(x)}},
      {"swap two token strings",
       [&](GgufBuilder& b) {
         auto t = tokens;
         std::swap(t[static_cast<size_t>(x)], t[static_cast<size_t>(x) + 1]);
         b.set_string_array("tokenizer.ggml.tokens", t);
       },
       {"vocab_mismatch"},
       {"token " + S(x)}},
      {"tokenizer.ggml.model llama -> gpt2",
       [&](GgufBuilder& b) { b.set_string("tokenizer.ggml.model", "gpt2"); },
       {"vocab_mismatch"},
       {"gpt2", "llama"}},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::string path = tmp.file("mutated.gguf");
    GgufBuilder b = GgufBuilder::from_file(src);
    c.mutate(b);
    b.write_file(path);
    for (const char* sub : {"generate", "compare"}) {
      INFO(sub);
      const json e = run_error(cli(sub, gen_args, models().target, path));
      INFO(e.dump());
      CHECK(c.kinds.count(e.at("kind").get<std::string>()) == 1);
      for (const std::string& s : c.must_name) CHECK_THAT(e.at("message").get<std::string>(), Contains(s));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// B06: special-token differences follow the rule documented at check_draft_vocab.

TEST_CASE("cli B06: an unused CONTROL token may differ (warned) - EOS, NORMAL->CONTROL, add_bos may not",
          "[model][cli]") {
  TempDir tmp("b06");
  const Vocab& tv = vocab();
  const Vocab& dv = draft_vocab();
  const GgufFile dsrc = GgufFile::open(models().draft);
  const auto dtokens = dsrc.get_string_array("tokenizer.ggml.tokens");
  const auto dtypes = dsrc.get_i32_array("tokenizer.ggml.token_type");
  const Args gen_args{"-n", "24", "--draft-k", "4", "--temp", "0", "--prompt", "Once upon a time"};
  const std::string renamed = "<specchat_renamed_control>";

  SECTION("(a) rename an unused CONTROL token: accepted, warned, lossless") {
    // An unused CONTROL token: CONTROL in both files and not BOS/EOS/EOT.
    int32_t c = -1;
    for (int32_t id = 0; id < tv.size() && c < 0; ++id) {
      const auto i = static_cast<size_t>(id);
      if (tv.types[i] == TokenType::control && dv.types[i] == TokenType::control && id != tv.bos_id &&
          !tv.is_eog(id)) {
        c = id;
      }
    }
    std::string target = models().target;
    const std::string draft = tmp.file("draft-renamed-control.gguf");
    auto dt = dtokens;
    auto dty = dtypes;
    if (c < 0) {
      // The bundled vocabulary has no such token (its only CONTROL tokens are BOS and EOS), so
      // make one: the last NORMAL id becomes CONTROL in *both* files, then the draft renames it.
      for (int32_t id = tv.size() - 1; id >= 0 && c < 0; --id) {
        if (tv.types[static_cast<size_t>(id)] == TokenType::normal) c = id;
      }
      REQUIRE(c >= 0);
      const GgufFile tsrc = GgufFile::open(models().target);
      auto tty = tsrc.get_i32_array("tokenizer.ggml.token_type");
      tty[static_cast<size_t>(c)] = static_cast<int32_t>(TokenType::control);
      target = tmp.file("target-control.gguf");
      GgufBuilder::from_file(tsrc).set_i32_array("tokenizer.ggml.token_type", tty).write_file(target);
      dty[static_cast<size_t>(c)] = static_cast<int32_t>(TokenType::control);
    }
    INFO("control id " << c);
    dt[static_cast<size_t>(c)] = renamed;
    GgufBuilder::from_file(dsrc)
        .set_string_array("tokenizer.ggml.tokens", dt)
        .set_i32_array("tokenizer.ggml.token_type", dty)
        .write_file(draft);
    const test::CliResult r = run_ok(cli("compare", gen_args, target, draft));
    expect_identical(r.json);
    const auto warnings = r.json.at("warnings").get<std::vector<std::string>>();
    INFO(r.describe());
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0], Contains("token " + S(c)));
    CHECK_THAT(r.err, Contains("warning:"));
    CHECK_THAT(r.err, Contains("token " + S(c)));
  }

  SECTION("(a') the same rule in process (check_draft_vocab), incl. a renamed BOS") {
    Vocab t = tv, d = tv;
    const int32_t c = normal_id(tv, tv.size() / 2);
    REQUIRE(c > 0);
    const auto ci = static_cast<size_t>(c);
    t.types[ci] = d.types[ci] = TokenType::control;
    d.pieces[ci] = renamed;
    const VocabCheck ok = check_draft_vocab(t, d);
    CHECK(ok.ok);
    REQUIRE(ok.warnings.size() == 1);
    CHECK_THAT(ok.warnings[0], Contains("token " + S(c)));
    // UNUSED counts as never emitted too.
    t.types[ci] = d.types[ci] = TokenType::unused;
    CHECK(check_draft_vocab(t, d).ok);
    // BOS and EOS are CONTROL but never a tolerated difference.
    for (int32_t special : {tv.bos_id, tv.eos_id}) {
      Vocab d2 = tv;
      d2.pieces[static_cast<size_t>(special)] = renamed;
      const VocabCheck no = check_draft_vocab(tv, d2);
      CHECK_FALSE(no.ok);
      CHECK_THAT(no.error, Contains("token " + S(special)));
    }
  }

  SECTION("(b) a different EOS id is refused") {
    const int32_t other = normal_id(dv, 100);
    REQUIRE(other > 0);
    const std::string draft = tmp.file("draft-eos.gguf");
    GgufBuilder::from_file(dsrc).set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(other)).write_file(draft);
    const json e = run_error(cli("compare", gen_args, models().target, draft));
    CHECK(e.at("kind") == "vocab_mismatch");
    CHECK_THAT(e.at("message").get<std::string>(), Contains("EOS"));
    CHECK_THAT(e.at("message").get<std::string>(), Contains(S(other)));
  }

  SECTION("(c) a NORMAL token that is CONTROL in the draft is refused") {
    const int32_t x = normal_id(dv, 300);
    REQUIRE(x > 0);
    auto dty = dtypes;
    dty[static_cast<size_t>(x)] = static_cast<int32_t>(TokenType::control);
    const std::string draft = tmp.file("draft-normal-to-control.gguf");
    GgufBuilder::from_file(dsrc).set_i32_array("tokenizer.ggml.token_type", dty).write_file(draft);
    const json e = run_error(cli("compare", gen_args, models().target, draft));
    CHECK(e.at("kind") == "vocab_mismatch");
    CHECK_THAT(e.at("message").get<std::string>(), Contains("token " + S(x)));
  }

  SECTION("(d) a flipped add_bos_token is refused") {
    const std::string draft = tmp.file("draft-add-bos.gguf");
    GgufBuilder::from_file(dsrc).set_bool("tokenizer.ggml.add_bos_token", !dv.add_bos).write_file(draft);
    const json e = run_error(cli("compare", gen_args, models().target, draft));
    CHECK(e.at("kind") == "vocab_mismatch");
    CHECK_THAT(e.at("message").get<std::string>(), Contains("add_bos"));
  }
}

// ---------------------------------------------------------------------------------------------
// B07: a stop string wins over the length cap wherever it falls in an accepted block.

namespace {

struct StopCase {
  std::string prompt;
  std::vector<int32_t> base;   // greedy baseline tokens
  std::vector<size_t> start;   // byte offset of each token in bytes_of(base) (+ the end)
  std::string full;            // bytes_of(base)
};

StopCase greedy_baseline(const std::string& prompt, int n) {
  StopCase c;
  c.prompt = prompt;
  c.base = toks(run_ok(cli("generate", {"--draft-k", "0", "--temp", "0", "-n", S(n), "--prompt", prompt})).json);
  for (int32_t id : c.base) {
    c.start.push_back(c.full.size());
    c.full += vocab().token_bytes(id);
  }
  c.start.push_back(c.full.size());
  return c;
}

bool has_alpha(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char ch) { return std::isalpha(static_cast<unsigned char>(ch)); });
}

bool is_ascii(const std::string& s) {
  return std::all_of(s.begin(), s.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x80; });
}

// Checks one side of a stop run: the output is the baseline cut before token `kept`, when the
// stop lies inside the budget (needs `kept + 1` tokens), else the first n tokens.
void expect_stop_cut(const json& r, const StopCase& c, const std::string& stop, int kept, int n) {
  INFO("kept " << kept << " n " << n << " stop '" << stop << "': " << r.dump());
  const auto got = toks(r);
  if (n >= kept + 1) {
    CHECK(r.at("finish_reason") == "stop");
    CHECK(r.at("n_generated").get<int>() == kept);
    CHECK(got == prefix(c.base, static_cast<size_t>(kept)));
    const std::string text = r.at("text").get<std::string>();
    CHECK(text == utf8_sanitize(c.full.substr(0, c.start[static_cast<size_t>(kept)])));
    CHECK(text.find(stop) == std::string::npos);
  } else {
    CHECK(r.at("finish_reason") == "length");
    CHECK(r.at("n_generated").get<int>() == n);
    CHECK(got == prefix(c.base, static_cast<size_t>(n)));
  }
}

}  // namespace

TEST_CASE("cli B07: a stop string inside the last block ends generation there, for every k and n",
          "[model][cli]") {
  const int n_base = 32;
  // A prompt whose greedy output has a word-like token j whose text first occurs exactly there.
  StopCase c;
  int j = -1;
  std::string stop;
  for (const char* prompt : {"Once upon a time", "Tom has a red ball.", "The little dog", "Lily and Tom",
                             "One day, a girl"}) {
    c = greedy_baseline(prompt, n_base);
    for (size_t i = 3; i + 4 <= c.base.size() && j < 0; ++i) {
      const std::string s = vocab().token_bytes(c.base[i]);
      if (s.size() >= 2 && is_ascii(s) && has_alpha(s) && c.full.find(s) == c.start[i]) {
        j = static_cast<int>(i);
        stop = s;
      }
    }
    if (j >= 0) break;
  }
  INFO("prompt '" << c.prompt << "' stop '" << stop << "' at token " << j << " of '" << c.full << "'");
  REQUIRE(j >= 0);

  // The stop is token j's text: j tokens are kept once the budget reaches token j.
  for (int k : {1, 2, 4, 8, 16}) {
    for (int n = j - 1; n <= j + 3; ++n) {
      INFO("k " << k << " -n " << n);
      const json r = run_ok(cli("compare", {"--draft-k", S(k), "--temp", "0", "-n", S(n), "--prompt", c.prompt,
                                            "--stop", stop}))
                         .json;
      expect_identical(r);
      expect_stop_cut(r.at("baseline"), c, stop, j, n);
      expect_stop_cut(r.at("speculative"), c, stop, j, n);
    }
  }

  // Streaming (no --json) holds back text that may start the stop, and never shows it.
  for (int k : {1, 4, 8}) {
    INFO("streamed, k " << k);
    CHECK(streamed_text({"--draft-k", S(k), "--temp", "0", "-n", S(j + 3), "--prompt", c.prompt, "--stop", stop}) ==
          c.full.substr(0, c.start[static_cast<size_t>(j)]));
  }

  // A stop that starts inside token i-1 and ends in token i: token i-1 reaches into it, so only
  // i-1 tokens are kept.
  int i2 = -1;
  std::string stop2;
  for (size_t i = 3; i + 4 <= c.base.size() && i2 < 0; ++i) {
    const std::string prev = vocab().token_bytes(c.base[i - 1]);
    const std::string s = c.full.substr(c.start[i - 1] + 1, c.start[i + 1] - c.start[i - 1] - 1);
    if (prev.size() >= 2 && is_ascii(prev) && is_ascii(s) && c.full.find(s) == c.start[i - 1] + 1) {
      i2 = static_cast<int>(i);
      stop2 = s;
    }
  }
  INFO("spanning stop '" << stop2 << "' ending in token " << i2);
  REQUIRE(i2 >= 0);
  for (int k : {1, 4, 8}) {
    for (int n : {i2, i2 + 1, i2 + 3}) {
      INFO("k " << k << " -n " << n);
      const json r = run_ok(cli("compare", {"--draft-k", S(k), "--temp", "0", "-n", S(n), "--prompt", c.prompt,
                                            "--stop", stop2}))
                         .json;
      expect_identical(r);
      // Kept: i2 - 1 tokens, once the budget reaches token i2 (n >= i2 + 1).
      for (const char* side : {"baseline", "speculative"}) {
        const json& s = r.at(side);
        INFO(side << ": " << s.dump());
        const auto got = toks(s);
        if (n >= i2 + 1) {
          CHECK(s.at("finish_reason") == "stop");
          CHECK(got == prefix(c.base, static_cast<size_t>(i2 - 1)));
          CHECK(s.at("text").get<std::string>().find(stop2) == std::string::npos);
        } else {
          CHECK(s.at("finish_reason") == "length");
          CHECK(got == prefix(c.base, static_cast<size_t>(n)));
        }
      }
    }
    INFO("streamed, k " << k);
    CHECK(streamed_text({"--draft-k", S(k), "--temp", "0", "-n", S(i2 + 3), "--prompt", c.prompt, "--stop", stop2}) ==
          c.full.substr(0, c.start[static_cast<size_t>(i2 - 1)]));
  }
}

// ---------------------------------------------------------------------------------------------
// B09/B10: exactly N tokens, clipped inside a draft block; -n 0 generates nothing.

TEST_CASE("cli B09/B10: exactly N tokens for every N, equal to the baseline's first N", "[model][cli]") {
  const std::string prompt = "Once upon a time";
  const json base = run_ok(cli("generate", {"--draft-k", "0", "--temp", "0", "-n", "64", "--prompt", prompt})).json;
  const auto bt = toks(base);
  const int k = 8;
  std::vector<int> ns;
  for (int n = 1; n <= 20; ++n) ns.push_back(n);
  ns.push_back(2 * k);  // K-1, K, K+1 and 2K are inside 1..20 already
  ns.push_back(64);
  ns.erase(std::unique(ns.begin(), ns.end()), ns.end());
  for (int n : ns) {
    INFO("T=0 -n " << n);
    const json r = run_ok(cli("generate", {"--draft-k", S(k), "--temp", "0", "-n", S(n), "--prompt", prompt})).json;
    if (static_cast<int>(bt.size()) >= n) {
      CHECK(r.at("finish_reason") == "length");
      CHECK(r.at("n_generated").get<int>() == n);
      CHECK(toks(r) == prefix(bt, static_cast<size_t>(n)));
    } else {  // the baseline met EOS before n
      CHECK(r.at("finish_reason") == base.at("finish_reason"));
      CHECK(toks(r) == bt);
    }
  }
  for (int n : {0, 1, k - 1, k, k + 1, 2 * k}) {
    INFO("T=1 -n " << n);
    const json r = run_ok(cli("generate", {"--draft-k", S(k), "--temp", "1", "--seed", "5", "-n", S(n), "--prompt",
                                           prompt}))
                       .json;
    expect_length(r, n);
  }
  if (ngram_supported()) {
    for (int n : {0, 1, k - 1, k, k + 1, 2 * k}) {
      INFO("ngram T=0 -n " << n);
      const json r =
          run_ok(cli("generate", {"--draft-k", S(k), "--temp", "0", "-n", S(n), "--prompt", prompt}, "", "ngram")).json;
      CHECK(toks(r) == prefix(bt, static_cast<size_t>(n)));
      if (static_cast<int>(bt.size()) >= n) expect_length(r, n);
    }
  }
  if (trees_supported()) {
    for (const char* tree : {"dynamic", "optimal"}) {
      for (int n : {0, 1, 4, 5, 6, 12}) {  // around the default depth 5 (blocks of up to 6 tokens)
        INFO("tree " << tree << " T=0 -n " << n);
        const json r = run_ok(cli("generate", {"--tree", tree, "--temp", "0", "-n", S(n), "--prompt", prompt})).json;
        CHECK(toks(r) == prefix(bt, static_cast<size_t>(n)));
        if (static_cast<int>(bt.size()) >= n) expect_length(r, n);
      }
    }
  }
  {  // -n 0 generates nothing and is no error
    for (const char* sub : {"generate", "compare"}) {
      INFO(sub);
      const json j = run_ok(cli(sub, {"--draft-k", S(k), "-n", "0", "--prompt", prompt})).json;
      for (const json& r : j.contains("baseline") ? std::vector<json>{j.at("baseline"), j.at("speculative")}
                                                   : std::vector<json>{j}) {
        CHECK(r.at("n_generated") == 0);
        CHECK(r.at("tokens").empty());
        CHECK(r.at("text") == "");
        CHECK(r.at("finish_reason") == "length");
        CHECK(r.at("n_steps") == 0);
        CHECK(r.at("n_drafted") == 0);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// B12: a prompt longer than the context is a typed error; prompts at the boundary work.

namespace {

// Text whose encoding has exactly m tokens ("the the the ...").
std::string text_of_tokens(int m) {
  std::string s = "the";
  for (int i = 1; i < m; ++i) s += " the";
  REQUIRE(tokenizer().encode(s).size() == static_cast<size_t>(m));
  return s;
}

}  // namespace

TEST_CASE("cli B12: a prompt longer than the context is refused - prompts at the boundary work",
          "[model][cli]") {
  std::string words;
  for (int i = 0; i < 5000; ++i) words += "word ";
  const json e = run_error(cli("generate", {"-n", "8", "--draft-k", "4", "--prompt", words}));
  CHECK(e.at("kind") == "prompt_too_long");
  CHECK_THAT(e.at("message").get<std::string>(), Contains("context is"));
  CHECK_THAT(e.at("message").get<std::string>(), Contains("prompt has"));

  // Boundaries, with a small context: L = C + 1 is refused; L = C, C - 1 and C - k fit, and
  // generation stops with the context full after C + 1 - L tokens (the last token needs no slot).
  REQUIRE(vocab().add_bos);
  const int C = 48, k = 4, N = 16;
  {
    const json e2 = run_error(cli("compare", {"--ctx", S(C), "--draft-k", S(k), "-n", S(N), "--prompt",
                                              text_of_tokens(C)}));
    CHECK(e2.at("kind") == "prompt_too_long");
    CHECK_THAT(e2.at("message").get<std::string>(), Contains("prompt has " + S(C + 1) + " tokens, context is " + S(C)));
  }
  struct Boundary {
    int L, k;
    std::string draft;
  };
  std::vector<Boundary> cases;
  for (int L : {C, C - 1, C - 2, C - k, C - k - 1}) cases.push_back({L, k, ""});
  for (int L : {C, C - 5}) cases.push_back({L, 16, ""});  // drafts clipped to the room left
  if (ngram_supported()) {
    for (int L : {C, C - 5}) cases.push_back({L, 16, "ngram"});
  }
  for (const Boundary& b : cases) {
    const int L = b.L;
    INFO("prompt of " << L << " tokens, --ctx " << C << ", k " << b.k << " " << b.draft);
    const json j = run_ok(cli("compare", {"--ctx", S(C), "--draft-k", S(b.k), "-n", S(N), "--prompt",
                                          text_of_tokens(L - 1)},
                              "", b.draft))
                       .json;
    expect_identical(j);
    for (const char* side : {"baseline", "speculative"}) {
      const json& r = j.at(side);
      INFO(side << ": " << r.dump());
      CHECK(r.at("n_prompt") == L);
      const int room = std::min(N, C + 1 - L);
      if (r.at("finish_reason") != "eos") {
        CHECK(r.at("n_generated").get<int>() == room);
        CHECK(r.at("finish_reason") == (room < N ? "context_full" : "length"));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// B13: empty and whitespace prompts.

TEST_CASE("cli B13: an empty prompt is a BOS-only context - zero tokens without BOS is an error",
          "[model][cli]") {
  REQUIRE(vocab().add_bos);
  {
    const json r = run_ok(cli("generate", {"--draft-k", "4", "-n", "10", "--prompt", ""})).json;
    CHECK(r.at("prompt_tokens") == json::array({vocab().bos_id}));
    expect_length(r, 10);
    expect_identical(run_ok(cli("compare", {"--draft-k", "4", "-n", "10", "--prompt", ""})).json);
  }
  for (const std::string s : {" ", "\n"}) {
    INFO("prompt '" << s << "'");
    const json r = run_ok(cli("generate", {"--draft-k", "4", "-n", "10", "--prompt", s})).json;
    std::vector<int32_t> want{vocab().bos_id};
    for (int32_t id : tokenizer().encode(s)) want.push_back(id);
    CHECK(r.at("prompt_tokens").get<std::vector<int32_t>>() == want);
    expect_length(r, 10);
  }
  // Both models without BOS: "" has no tokens at all, which must be a typed error.
  TempDir tmp("b13");
  const std::string t = tmp.file("target-no-bos.gguf"), d = tmp.file("draft-no-bos.gguf");
  GgufBuilder::from_file(GgufFile::open(models().target)).set_bool("tokenizer.ggml.add_bos_token", false).write_file(t);
  GgufBuilder::from_file(GgufFile::open(models().draft)).set_bool("tokenizer.ggml.add_bos_token", false).write_file(d);
  for (const char* sub : {"generate", "compare"}) {
    INFO(sub);
    const json e = run_error(cli(sub, {"--draft-k", "4", "-n", "10", "--prompt", ""}, t, d));
    CHECK(e.at("kind") == "empty_prompt");
  }
  // ... while a non-empty prompt still runs on that pair.
  expect_identical(run_ok(cli("compare", {"--draft-k", "4", "-n", "8", "--prompt", "Once upon a time"}, t, d)).json);
}

// ---------------------------------------------------------------------------------------------
// B14: no drafting at all is a legal, plain decode.

TEST_CASE("cli B14: --draft-k 0 and --draft none decode plainly and report nothing drafted", "[model][cli]") {
  const Args p{"-n", "16", "--temp", "0", "--prompt", "Once upon a time"};
  for (const bool draft_none : {false, true}) {
    // --draft-k 0 with the bundled draft, or --draft none with the default k.
    Args a = draft_none ? Args{} : Args{"--draft-k", "0"};
    a.insert(a.end(), p.begin(), p.end());
    INFO((draft_none ? "--draft none" : "--draft-k 0"));
    const json r = run_ok(cli("generate", a, "", draft_none ? "none" : "")).json;
    CHECK(r.at("mode") == "baseline");
    CHECK(r.at("draft_k") == 0);
    CHECK(r.at("n_drafted") == 0);
    CHECK(r.at("n_accepted") == 0);
    CHECK(r.at("n_empty_drafts") == 0);
    CHECK(r.at("n_steps") == r.at("n_generated"));
    expect_length(r, 16);
  }
  const json j = run_ok(cli("compare", {"--draft-k", "0", "-n", "16", "--temp", "0", "--prompt", "Once upon a time"})).json;
  expect_identical(j);
  CHECK(j.at("speculative").at("n_drafted") == 0);
  // The n-gram drafter on a prompt with no repeated n-gram: steps with an empty draft are plain
  // target steps, not errors.
  if (ngram_supported()) {
    const json ng = run_ok(cli("compare", {"--draft-k", "8", "-n", "32", "--temp", "0", "--prompt",
                                           "Quick brown foxes jump over lazy dogs near misty hills"},
                               "", "ngram"))
                        .json;
    expect_identical(ng);
    CHECK(ng.at("speculative").at("n_empty_drafts").get<int>() > 0);
  }
}

// ---------------------------------------------------------------------------------------------
// B15: the CLI reports the prompt ids the engine's SentencePiece tokenizer gives.

TEST_CASE("cli B15: prompt_tokens are BOS + the tokenizer's ids, spaces kept", "[model][cli]") {
  for (const std::string s : {"   Hello", "Hello world", " Hello world", "a  b   c    d", "\tx\n\ny"}) {
    INFO("prompt '" << s << "'");
    const json r = run_ok(cli("generate", {"-n", "0", "--prompt", s})).json;
    const std::vector<int32_t> ids = tokenizer().encode(s);
    std::vector<int32_t> want;
    if (vocab().add_bos) want.push_back(vocab().bos_id);
    want.insert(want.end(), ids.begin(), ids.end());
    CHECK(r.at("prompt_tokens").get<std::vector<int32_t>>() == want);
    CHECK(r.at("n_prompt") == static_cast<int>(want.size()));
    CHECK(tokenizer().decode(ids) == s);
  }
}

// ---------------------------------------------------------------------------------------------
// B17: cutting generation inside a byte-fallback character never breaks the JSON.

TEST_CASE("cli B17: N cuts through byte-fallback characters give valid UTF-8 JSON and identity",
          "[model][cli]") {
  // A character no vocabulary piece contains: the tokenizer can only spell it in bytes.
  std::string ch;
  for (const std::string cand : {"\xF0\x9F\x98\x80", "\xE6\xBC\xA2", "\xE2\x82\xAC", "\xD0\xB6", "\xC3\xA9"}) {
    const bool in_piece = std::any_of(vocab().pieces.begin(), vocab().pieces.end(),
                                      [&](const std::string& p) { return p.find(cand) != std::string::npos; });
    if (!in_piece) {
      ch = cand;
      break;
    }
  }
  REQUIRE_FALSE(ch.empty());
  const std::string prompt = ch + ch + ch + ch;
  size_t n_byte_ids = 0;
  for (int32_t id : tokenizer().encode(prompt)) {
    n_byte_ids += vocab().types[static_cast<size_t>(id)] == TokenType::byte ? 1 : 0;
  }
  CHECK(n_byte_ids == prompt.size());
  bool generated_bytes = false;
  for (int n = 1; n <= 16; ++n) {
    INFO("-n " << n);
    const json j = run_ok(cli("compare", {"--draft-k", "8", "--temp", "0", "-n", S(n), "--prompt", prompt})).json;
    expect_identical(j);
    for (const char* side : {"baseline", "speculative"}) {
      const json& r = j.at(side);
      const auto ids = toks(r);
      // The ids are kept exactly; only an incomplete tail of their bytes becomes U+FFFD.
      CHECK(r.at("text").get<std::string>() == utf8_sanitize(bytes_of(ids)));
      for (int32_t id : ids) generated_bytes |= vocab().types[static_cast<size_t>(id)] == TokenType::byte;
    }
  }
  if (!generated_bytes) {
    WARN("the model emitted no byte-fallback token after '" << prompt
                                                            << "'; the swapped-byte-piece case below cuts inside characters");
  }
}

TEST_CASE("cli B17: cuts inside multi-byte characters the model does emit (byte pieces swapped in)",
          "[model][cli]") {
  // The bundled models rarely emit byte-fallback tokens, so make them: the ids they emit from a
  // BOS-only context do not depend on the vocabulary's strings, so swapping the entries of those
  // ids with the byte pieces of U+6F22 (E6 BC A2) in *both* files turns the same greedy ids into
  // multi-byte text. Cutting with -n then lands inside characters.
  const json base = run_ok(cli("generate", {"--draft-k", "0", "--temp", "0", "-n", "16", "--prompt", ""})).json;
  const auto g = toks(base);
  std::map<int32_t, int> count;
  for (int32_t id : g) {
    if (vocab().types[static_cast<size_t>(id)] == TokenType::normal) ++count[id];
  }
  REQUIRE_FALSE(count.empty());
  std::vector<int32_t> chosen{std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) {
                                return a.second < b.second;
                              })->first};  // the most frequent becomes the lead byte
  for (int32_t id : g) {
    if (chosen.size() < 3 && count.count(id) && std::find(chosen.begin(), chosen.end(), id) == chosen.end()) {
      chosen.push_back(id);
    }
  }
  const char* byte_pieces[] = {"<0xE6>", "<0xBC>", "<0xA2>"};
  std::vector<int32_t> byte_ids;
  for (size_t i = 0; i < chosen.size(); ++i) {
    const auto it = std::find(vocab().pieces.begin(), vocab().pieces.end(), std::string(byte_pieces[i]));
    REQUIRE(it != vocab().pieces.end());
    byte_ids.push_back(static_cast<int32_t>(it - vocab().pieces.begin()));
    REQUIRE(vocab().types[static_cast<size_t>(byte_ids.back())] == TokenType::byte);
  }
  TempDir tmp("b17");
  auto swapped = [&](const std::string& from, const std::string& to) {
    const GgufFile f = GgufFile::open(from);
    auto t = f.get_string_array("tokenizer.ggml.tokens");
    auto sc = f.get_f32_array("tokenizer.ggml.scores");
    auto ty = f.get_i32_array("tokenizer.ggml.token_type");
    for (size_t i = 0; i < chosen.size(); ++i) {
      const auto a = static_cast<size_t>(chosen[i]), b = static_cast<size_t>(byte_ids[i]);
      std::swap(t[a], t[b]);
      std::swap(sc[a], sc[b]);
      std::swap(ty[a], ty[b]);
    }
    GgufBuilder::from_file(f)
        .set_string_array("tokenizer.ggml.tokens", t)
        .set_f32_array("tokenizer.ggml.scores", sc)
        .set_i32_array("tokenizer.ggml.token_type", ty)
        .write_file(to);
  };
  const std::string t = tmp.file("target-bytes.gguf"), d = tmp.file("draft-bytes.gguf");
  swapped(models().target, t);
  swapped(models().draft, d);
  const Vocab mv = Vocab::from_gguf(GgufFile::open(t));
  int cut_inside = 0;
  for (int n = 1; n <= 16; ++n) {
    INFO("-n " << n);
    const test::CliResult r = run_ok(cli("compare", {"--draft-k", "8", "--temp", "0", "-n", S(n), "--prompt", ""}, t, d));
    expect_identical(r.json);
    for (const char* side : {"baseline", "speculative"}) {
      const json& s = r.json.at(side);
      INFO(side << ": " << s.dump());
      const auto ids = toks(s);
      CHECK(ids == prefix(g, static_cast<size_t>(n)));  // the ids are the model's, exactly
      std::string bytes;
      for (int32_t id : ids) bytes += mv.token_bytes(id);
      CHECK(s.at("text").get<std::string>() == utf8_sanitize(bytes));
      if (utf8_complete_prefix(bytes) < bytes.size()) ++cut_inside;
    }
    // Streamed, the same text arrives in valid UTF-8 pieces.
    CHECK(streamed_text({"--draft-k", "8", "--temp", "0", "-n", S(n), "--prompt", ""}, t, d) ==
          r.json.at("speculative").at("text").get<std::string>());
  }
  CHECK(cut_inside > 0);  // some -n really ended inside a character
}

// ---------------------------------------------------------------------------------------------
// B19: a cut-off GGUF is a typed error naming the file, as target and as draft.

TEST_CASE("cli B19: truncated model files are typed errors, the draft's naming the draft", "[model][cli]") {
  TempDir tmp("b19");
  const GgufFile src = GgufFile::open(models().target);
  GgufLayout lay;
  const GgufBuilder builder = GgufBuilder::from_file(src);
  const std::vector<uint8_t> bytes = builder.build(&lay);
  REQUIRE(lay.size == bytes.size());
  // Control: the rewritten file itself loads.
  const std::string whole = tmp.file("whole.gguf");
  GgufBuilder::write_bytes(whole, bytes);
  run_ok(cli("generate", {"-n", "1", "--prompt", "x"}, whole, "none"));

  size_t tokens_kv = 0;  // from_file writes the metadata in key order
  for (const auto& [key, value] : src.metadata()) {
    if (key == "tokenizer.ggml.tokens") break;
    ++tokens_kv;
  }
  REQUIRE(tokens_kv < lay.kv_value_start.size());
  const struct {
    const char* where;
    uint64_t size;
  } cuts[] = {
      {"at 90%", lay.size * 9 / 10},
      {"inside the header", 12},
      {"inside the tokens array", lay.kv_value_start[tokens_kv] + 100},
      {"exactly at the start of tensor data", lay.data_start},
      {"1 byte short", lay.size - 1},
  };
  for (const auto& cut : cuts) {
    INFO("cut " << cut.where << " (" << cut.size << " of " << lay.size << " bytes)");
    const std::string path = tmp.file("cut.gguf");
    GgufBuilder::write_bytes(path, GgufBuilder::truncated(bytes, cut.size));
    // The first tensor whose data lies past the cut, for data_past_end messages.
    std::string first_bad;
    for (size_t i = 0; i < builder.tensors().size() && first_bad.empty(); ++i) {
      if (lay.tensor_data_start[i] + builder.tensors()[i].data.size() > cut.size) first_bad = builder.tensors()[i].name;
    }
    for (const bool as_draft : {false, true}) {
      INFO((as_draft ? "as --draft" : "as --model"));
      const json e = as_draft ? run_error(cli("generate", {"-n", "1", "--prompt", "x"}, models().target, path))
                              : run_error(cli("generate", {"-n", "1", "--prompt", "x"}, path));
      const std::string kind = e.at("kind").get<std::string>(), msg = e.at("message").get<std::string>();
      INFO(e.dump());
      CHECK((kind == "truncated" || kind == "data_past_end"));
      CHECK_THAT(msg, Contains(path));
      if (as_draft) CHECK_THAT(msg, Contains("draft"));
      if (kind == "data_past_end") {
        CHECK(cut.size >= lay.data_start);
        CHECK_THAT(msg, Contains("'" + first_bad + "'"));
        CHECK_THAT(msg, Contains("expected file size " + S(static_cast<long long>(lay.size))));
        CHECK_THAT(msg, Contains("actual " + S(static_cast<long long>(cut.size))));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// B23: tokens/s on a longer speculative run, baseline and speculative.

TEST_CASE("cli B23: tokens_per_s is emitted tokens over decode time, finite and non-zero", "[model][cli]") {
  const json j = run_ok(cli("compare", {"--draft-k", "8", "--temp", "0", "-n", "96", "--prompt", "Once upon a time"})).json;
  expect_identical(j);
  for (const char* side : {"baseline", "speculative"}) {
    const json& r = j.at(side);
    INFO(side << ": " << r.dump());
    REQUIRE(r.at("n_generated").get<int>() >= 2);
    const double tps = num(r, "tokens_per_s");
    CHECK(tps > 0);
    CHECK(std::isfinite(tps));
    CHECK(tps == Approx(r.at("n_generated").get<int>() / (num(r, "decode_ms") / 1000.0)).epsilon(0.01));
  }
}
