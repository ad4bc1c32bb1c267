// specchat-cli against the fault kinds of the project's FAULT-KINDS.md (shared design cases): output identity and statistics (B01, B04, B09/B10, B14, B22, B23).
// Every test runs the real binary as a child process and checks each JSON result against the
// statistics invariants of B22/B23 (cli_faults_util.h).
#include <catch2/catch.hpp>

#include "cli_faults_util.h"

using namespace specchat::test::cli_faults;

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
  REQUIRE(ngram_supported());
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
  REQUIRE(trees_supported());
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
