// specchat-cli's PIPO mode end to end on a tiny release unit (pipo_fixture.h) made from the
// bundled target's sha256: generate and compare label it approximate, state which parts loaded,
// report the monitoring counters; a mixed release is refused with its kind; bench runs it as a
// configuration labelled approximate.
#include <algorithm>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/cli_runner.h"
#include "engine/drafters/sha256.h"
#include "engine/pipo/pipo_history.h"
#include "engine/pipo/pipo_fixture.h"
#include "engine/gguf.h"
#include "engine/utf8.h"
#include "engine/vocab.h"

using namespace specchat;
using namespace specchat::test;

namespace {

// A unit bound to the bundled target (so compare and bench can check it against the baseline's).
struct BoundUnit {
  PipoFixture f{1024};  // the bundled target's context, so every bench prompt fits
  BoundUnit() {
    f.target_sha = sha256_file_hex(target_model());
    f.write();
  }
  std::string dir() const { return f.dir.path.string(); }
};

}  // namespace

TEST_CASE("cli: generate --pipo is labelled approximate and reports the mode's counters", "[model][pipo]") {
  BoundUnit u;
  const CliResult r = run_cli({"generate", "--pipo", u.dir(), "--pipo-threshold", "0.3", "--prompt", "Once upon a time",
                               "-n", "10", "--json"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.json_ok);
  const auto& p = r.json["pipo"];
  CHECK(p["approximate"] == true);
  CHECK(p["label"] == "approximate: not verified by the target");
  CHECK(p["release"] == "test-release-1");
  CHECK(p["parts_loaded"]["compressor"] == true);
  CHECK(p["parts_loaded"]["mtp_head"].get<std::string>().find("mtp.gguf") != std::string::npos);
  CHECK(p["settings"]["pair_size"] == 2);
  CHECK(p["settings"]["extra_draft_tokens"] == 1);
  CHECK(p["settings"]["acceptance_threshold"].get<double>() == Approx(0.3));
  CHECK(p["settings"]["latent_context"].get<int>() <= p["settings"]["raw_context"].get<int>());
  const int steps = p["steps"];
  CHECK(steps > 0);
  CHECK(p["head_runs"].get<int>() <= steps);
  CHECK(p["token2_accepted"].get<int>() <= p["head_runs"].get<int>());
  CHECK(p["latent_length"].get<int>() <= p["raw_length"].get<int>());
  CHECK(r.json["tokens"].size() <= 10);
  CHECK(r.json["pairs"].size() == static_cast<size_t>(2 * steps));
  // The start-up log names the release and what loaded.
  CHECK(r.err.find("PIPO release 'test-release-1'") != std::string::npos);
  CHECK(r.err.find("MTP head") != std::string::npos);
}

TEST_CASE("cli: --pipo-threshold 1 never runs the head: one token per step", "[model][pipo]") {
  BoundUnit u;
  const CliResult r = run_cli({"generate", "--pipo", u.dir(), "--pipo-threshold", "1", "--prompt", "Once upon a time",
                               "-n", "6", "--json"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(r.json["pipo"]["head_runs"] == 0);
  CHECK(r.json["pipo"]["tokens_per_step"].get<double>() == Approx(1.0));
}

TEST_CASE("cli: a mixed PIPO release is refused with its kind, never run plainly", "[model][pipo]") {
  PipoFixture f;
  f.part_release["mtp"] = "other-release";
  f.write();
  const CliResult r = run_cli({"generate", "--pipo", f.dir.path.string(), "--prompt", "Hi", "-n", "4", "--json"});
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  REQUIRE(r.json_ok);
  CHECK(r.json["error"]["kind"] == "pipo_mixed_release");
  CHECK(r.json["error"]["message"].get<std::string>().find("other-release") != std::string::npos);
  CHECK_FALSE(r.json.contains("text"));
  // The backbone alone, as a plain model, is refused too.
  const CliResult b = run_cli({"generate", "--model", f.path("backbone"), "--draft", "none", "--prompt", "Hi", "-n", "4",
                               "--json"});
  CHECK(b.exit_code == 1);
  CHECK(b.out.find("PIPO release") != std::string::npos);
}

TEST_CASE("cli: compare --pipo shows the baseline, PIPO's divergence and its speedups", "[model][pipo]") {
  BoundUnit u;
  const CliResult r = run_cli({"compare", "--pipo", u.dir(), "--model", target_model(), "--pipo-threshold", "0.5",
                               "--chat", "Tell me a story.", "-n", "8", "--json"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.json_ok);
  CHECK(r.json["baseline"]["lossless"] == true);
  CHECK(r.json["pipo"]["approximate"] == true);
  CHECK(r.json["divergence"].contains("identical"));
  CHECK(r.json["ttft_speedup"].get<double>() > 0);
  // Another plain target than the release's is refused.
  const CliResult bad = run_cli({"compare", "--pipo", u.dir(), "--model", draft_model(), "--chat", "Hi", "-n", "4", "--json"});
  CHECK(bad.exit_code == 1);
  CHECK(bad.json["error"]["kind"] == "pipo_target_mismatch");
}

TEST_CASE("cli: compare --pipo -n 0 reports no speedup it could not measure", "[model][pipo]") {
  // Regression: with no generated token the ratios printed as 0.00x (a measured slowdown to
  // nothing); they are null in JSON and n/a in text.
  BoundUnit u;
  const CliResult r = run_cli({"compare", "--pipo", u.dir(), "--model", target_model(), "--chat", "Hi", "-n", "0", "--json"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.json_ok);
  CHECK(r.json["tpot_speedup"].is_null());
  const CliResult t = run_cli({"compare", "--pipo", u.dir(), "--model", target_model(), "--chat", "Hi", "-n", "0"});
  INFO(t.describe());
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("TPOT n/a") != std::string::npos);
  CHECK(t.out.find("0.00x") == std::string::npos);
}

TEST_CASE("cli: bench runs pipo as a configuration and labels it approximate", "[model][pipo][bench]") {
  BoundUnit u;
  const std::string report = u.f.dir.file("report");
  const CliResult r = run_cli({"bench", "--suite", "qualitative", "--per-group", "1", "--configs", "baseline,pipo:t=0.5",
                               "--pipo", u.dir(), "--pipo-fidelity", "2", "-n", "6", "--report", report},
                              600);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("APPROXIMATE") != std::string::npos);
  CHECK(r.out.find("KL ") != std::string::npos);  // the fidelity gauge in the summary
  std::ifstream in(report + "/summary.csv");
  REQUIRE(in);
  const auto split = [](const std::string& line) {
    std::vector<std::string> fields;
    std::string cur;
    for (char ch : line + ",") {
      if (ch == ',') {
        fields.push_back(cur);
        cur.clear();
      } else {
        cur += ch;
      }
    }
    return fields;
  };
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split(line);
  const auto col = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    REQUIRE(it != header.end());
    return static_cast<size_t>(it - header.begin());
  };
  const size_t c_approx = col("approximate"), c_samples = col("fidelity_samples"), c_kl = col("fidelity_kl_mean");
  bool pipo_row = false, base_row = false;
  while (std::getline(in, line)) {
    const std::vector<std::string> f = split(line);
    REQUIRE(f.size() == header.size());
    if (line.rfind("baseline,", 0) == 0) {
      base_row = true;
      CHECK(f[c_approx] == "0");
      CHECK(f[c_samples] == "0");
      continue;
    }
    if (line.rfind("pipo:t=0.50,", 0) != 0) continue;
    pipo_row = true;
    CHECK(f[c_approx] == "1");
    CHECK(std::stoi(f[c_samples]) >= 1);  // step 0 of every request at least
    const double kl = std::stod(f[c_kl]);
    CHECK(kl >= 0);
    CHECK(kl < 5);
  }
  CHECK(pipo_row);
  CHECK(base_row);
}

TEST_CASE("cli: --pipo-fidelity samples the KL of token 1 against the plain target", "[model][pipo]") {
  BoundUnit u;
  const CliResult r = run_cli({"generate", "--pipo", u.dir(), "--model", target_model(), "--pipo-fidelity", "2",
                               "--pipo-threshold", "1", "--prompt", "Once upon a time", "-n", "6", "--json"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  const auto& f = r.json["pipo"]["fidelity"];
  CHECK(f["every"] == 2);
  CHECK(f["samples"] == 3);  // 6 steps of one token: steps 0, 2, 4
  CHECK(f["mean_kl"].get<double>() > 0.0);
}

// Found by a helper trying to break the feature (2026-12-03).
TEST_CASE("cli: a --model that is not the release's plain target is refused by generate --pipo too", "[model][pipo]") {
  BoundUnit u;
  const CliResult r = run_cli({"generate", "--pipo", u.dir(), "--model", draft_model(), "--prompt", "Hi", "-n", "4", "--json"});
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  CHECK(r.json["error"]["kind"] == "pipo_target_mismatch");
  const CliResult missing = run_cli({"generate", "--pipo", u.dir(), "--model", "/no/such/model.gguf", "--prompt", "Hi", "-n", "4",
                                     "--json"});
  CHECK(missing.exit_code == 1);
  CHECK(missing.json["error"]["kind"] == "pipo_missing_part");
}

TEST_CASE("cli: plain-text generate --pipo prints the approximate label on stdout with the text", "[model][pipo]") {
  BoundUnit u;
  const CliResult r = run_cli({"generate", "--pipo", u.dir(), "--prompt", "Once upon a time", "-n", "6"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.find("approximate: not verified by the target") != std::string::npos);
}

TEST_CASE("cli: PIPO flags without --pipo, a NaN threshold and --pipo with --endpoint are refused", "[model][pipo]") {
  BoundUnit u;
  CHECK(run_cli({"generate", "--pipo-threshold", "0.5", "--prompt", "Hi", "-n", "2"}).exit_code == 2);
  CHECK(run_cli({"generate", "--pipo-fidelity", "4", "--prompt", "Hi", "-n", "2"}).exit_code == 2);
  CHECK(run_cli({"generate", "--pipo", u.dir(), "--pipo-threshold", "nan", "--prompt", "Hi", "-n", "2"}).exit_code == 2);
  CHECK(run_cli({"generate", "--pipo", u.dir(), "--endpoint", "http://127.0.0.1:9", "--prompt", "Hi", "-n", "2"}).exit_code == 2);
}

TEST_CASE("cli: speculative options with --pipo are refused not ignored", "[model][pipo]") {
  // Regression: --draft-k, --tree, --drafter and the other drafter options were accepted with
  // --pipo and ignored (PIPO drafts with its release's own MTP head and pair compressor).
  BoundUnit u;
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{"--draft-k", "6"}, {"--tree", "dynamic"}, {"--drafter", "mtp"}, {"--draft", "none"},
        {"--node-budget", "8"}, {"--branch", "2"}}) {
    for (const char* cmd : {"generate", "chat"}) {
      std::vector<std::string> args = {cmd, "--pipo", u.dir(), "-n", "2"};
      if (std::string(cmd) == "generate") args.insert(args.end(), {"--prompt", "Hi"});
      args.insert(args.end(), extra.begin(), extra.end());
      const CliResult r = run_cli(args, 180, "/dev/null");
      INFO(r.describe());
      CHECK(r.exit_code == 2);
      CHECK(r.err.find(extra[0] + " does not apply to --pipo") != std::string::npos);
    }
  }
}

TEST_CASE("cli: generate --pipo text keeps the reply's leading space and ends at a stop string as plain decoding does",
          "[model][pipo]") {
  // Regression: the CLI decoded the reply's ids as a whole text, which drops the first piece's
  // leading space (" there" became "there"), while the server and plain decoding keep every
  // token's bytes; a stop string also left the tokens that reached into it in "tokens".
  BoundUnit u;
  const Vocab v = Vocab::from_gguf(GgufFile::open(target_model()));
  int leading_space = 0;
  for (const char* seed : {"1", "2", "3", "4", "5", "6"}) {
    const CliResult r = run_cli({"generate", "--pipo", u.dir(), "--pipo-threshold", "0.3", "--prompt", "Once upon a time",
                                 "-n", "8", "--temp", "1", "--seed", seed, "--json"});
    INFO(r.describe());
    REQUIRE(r.exit_code == 0);
    REQUIRE(r.json_ok);
    std::string bytes;
    for (const auto& id : r.json["tokens"]) bytes += v.token_bytes(id.get<int32_t>());
    CHECK(r.json["text"].get<std::string>() == utf8_sanitize(bytes));  // an incomplete last character shows as U+FFFD
    if (!bytes.empty() && bytes[0] == ' ') ++leading_space;
  }
  // The case the bug hid: at least one reply starts with a space.
  REQUIRE(leading_space > 0);
  // A stop string cuts the text and the tokens together.
  const CliResult full = run_cli({"generate", "--pipo", u.dir(), "--pipo-threshold", "0.3", "--prompt", "Once upon a time",
                                  "-n", "8", "--temp", "1", "--seed", "1", "--json"});
  REQUIRE(full.json_ok);
  const std::string text = full.json["text"];
  REQUIRE(full.json["tokens"].size() >= 4);
  const std::string third = v.token_bytes(full.json["tokens"][2].get<int32_t>());
  REQUIRE(!third.empty());
  const size_t cut = text.find(third);
  const CliResult stopped = run_cli({"generate", "--pipo", u.dir(), "--pipo-threshold", "0.3", "--prompt",
                                     "Once upon a time", "-n", "8", "--temp", "1", "--seed", "1", "--stop", third, "--json"});
  INFO(stopped.describe());
  REQUIRE(stopped.json_ok);
  // The text ends at the last whole token before the stop string (the Emitter's rule).
  const std::string stext = stopped.json["text"];
  CHECK(stext.size() <= cut);
  CHECK(text.compare(0, stext.size(), stext) == 0);
  CHECK(stext.find(third) == std::string::npos);
  std::string kept;
  for (const auto& id : stopped.json["tokens"]) kept += v.token_bytes(id.get<int32_t>());
  CHECK(utf8_sanitize(kept) == stext);
  CHECK(stopped.json["pipo"]["stop_reason"] == "stop");
  // The reply's pairs and raw length end with the kept tokens (regression: they held the cut
  // ones, so the next turn re-prefilled and raw_length counted tokens the reply does not have).
  const std::vector<int32_t> stok = stopped.json["tokens"].get<std::vector<int32_t>>();
  const std::vector<int32_t> praw = pairs_to_raw(stopped.json["pairs"].get<std::vector<int32_t>>());
  CHECK(praw.size() <= stok.size());
  CHECK(praw.size() + 1 >= stok.size());
  CHECK(std::equal(praw.begin(), praw.end(), stok.begin()));
  CHECK(stopped.json["pipo"]["raw_length"].get<long>() ==
        stopped.json["prompt_tokens"].get<long>() + static_cast<long>(stok.size()));
}

TEST_CASE("cli: compare --pipo-fidelity counts the measured run and not its warm-up", "[model][pipo]") {
  // Regression: compare's warm-up run added its samples, so 1 step in 1 gave twice the steps.
  BoundUnit u;
  const CliResult r = run_cli({"compare", "--pipo", u.dir(), "--model", target_model(), "--pipo-threshold", "0.3", "--pipo-fidelity", "1",
                               "--prompt", "Once upon a time", "-n", "10", "--json"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  REQUIRE(r.json_ok);
  const auto& p = r.json["pipo"];
  CHECK(p["fidelity"]["samples"].get<int>() == p["steps"].get<int>());
}

TEST_CASE("cli: chat --pipo labels each reply on stdout and gauges each reply on its own", "[model][pipo]") {
  // Regressions: the label went to stderr only (stdout, piped on, had unlabelled approximate
  // text), and the fidelity samples of every earlier turn were added into each reply's line.
  BoundUnit u;
  const std::string input = u.f.dir.file("turns.txt");
  {
    std::ofstream o(input);
    o << "Hello there\nTell me more\n/exit\n";
  }
  const CliResult r = run_cli({"chat", "--pipo", u.dir(), "--model", target_model(), "--pipo-threshold", "0.3",
                               "--pipo-fidelity", "1", "-n", "6"},
                              180, input);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  std::vector<std::string> stats;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("[pipo: approximate: not verified by the target]", 0) == 0) stats.push_back(line);
  }
  REQUIRE(stats.size() == 2);
  for (const std::string& line : stats) {
    INFO(line);
    // With 1 step in 1, a reply's samples are its own steps.
    const size_t in_pos = line.find(" tokens in ");
    REQUIRE(in_pos != std::string::npos);
    const int steps = std::stoi(line.substr(in_pos + 11));
    const size_t open = line.find(" samples, 1 step in 1)");
    REQUIRE(open != std::string::npos);
    const size_t from = line.rfind('(', open);
    REQUIRE(from != std::string::npos);
    CHECK(std::stoi(line.substr(from + 1)) == steps);
  }
}

TEST_CASE("cli: chat --pipo leaves out the oldest messages when the context is full", "[model][pipo]") {
  // Regression: plain chat dropped the oldest exchanges (RequestPlanner::fit_context) but chat
  // --pipo did not: once the conversation outgrew the release's context every turn failed.
  BoundUnit u;
  const std::string input = u.f.dir.file("long-turns.txt");
  const int turns = 6;
  {
    std::ofstream o(input);
    for (int i = 0; i < turns; ++i) o << "Tell me one more thing about the little fox and the old oak tree, please\n";
    o << "/exit\n";
  }
  const CliResult r = run_cli({"chat", "--pipo", u.dir(), "--model", target_model(), "--pipo-threshold", "0.3",
                               "--ctx", "64", "-n", "8"},
                              180, input);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  int labelled = 0;
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("[pipo: approximate: not verified by the target]", 0) == 0) ++labelled;
  }
  CHECK(labelled == turns);  // every turn answered
  CHECK(r.err.find("context full: left out the") != std::string::npos);
  CHECK(r.err.find("error:") == std::string::npos);
}

TEST_CASE("cli: generate --pipo warns when --ctx goes past the release's default context", "[model][pipo]") {
  // Found by a helper: --ctx up to two tokens per backbone pair is allowed, but nothing past the
  // default context (the plain target's) was ever evaluated, and nothing said so.
  BoundUnit u;
  const CliResult past = run_cli({"generate", "--pipo", u.dir(), "--ctx", "1500", "--prompt", "Hi", "-n", "2"});
  INFO(past.describe());
  REQUIRE(past.exit_code == 0);
  CHECK(past.err.find("never measured for quality") != std::string::npos);
  const CliResult within = run_cli({"generate", "--pipo", u.dir(), "--ctx", "512", "--prompt", "Hi", "-n", "2"});
  INFO(within.describe());
  REQUIRE(within.exit_code == 0);
  CHECK(within.err.find("never measured for quality") == std::string::npos);
}
