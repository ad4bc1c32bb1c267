// `specchat-cli generate --messages FILE`: a multi-turn conversation from a JSON file, rendered
// with the model's chat template (app/cli/options.cpp read_messages_file). One user turn equals
// --chat; earlier turns sit in the prompt; bad files fail with a message naming the fault.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli_runner.h"
#include "model_fixture.h"

using namespace specchat;
namespace fs = std::filesystem;

namespace {
struct TempFile {
  fs::path path;
  explicit TempFile(const std::string& text) {
    path = fs::temp_directory_path() / ("specchat-messages-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(reinterpret_cast<uintptr_t>(this)) + ".json");
    std::ofstream(path) << text;
  }
  ~TempFile() { fs::remove(path); }
};
}  // namespace

TEST_CASE("cli: --messages with one user turn is --chat, earlier turns are in the prompt", "[model][cli]") {
  const test::CliResult chat =
      test::run_cli({"generate", "--json", "-n", "8", "--drafter", "none", "--chat", "Tell me a story about Tom."});
  INFO(chat.describe());
  REQUIRE(chat.json_ok);
  const TempFile one(R"([{"role": "user", "content": "Tell me a story about Tom."}])");
  const test::CliResult r1 =
      test::run_cli({"generate", "--json", "-n", "8", "--drafter", "none", "--messages", one.path.string()});
  INFO(r1.describe());
  REQUIRE(r1.json_ok);
  CHECK(r1.json["prompt_tokens"] == chat.json["prompt_tokens"]);
  CHECK(r1.json["tokens"] == chat.json["tokens"]);

  const TempFile three(R"({"messages": [
      {"role": "user", "content": "Tell me a story about Tom."},
      {"role": "assistant", "content": "Tom had a red ball. He played all day."},
      {"role": "user", "content": "Tell me another story."}]})");
  const test::CliResult r3 =
      test::run_cli({"generate", "--json", "-n", "8", "--drafter", "none", "--messages", three.path.string()});
  INFO(r3.describe());
  REQUIRE(r3.json_ok);
  const auto p1 = chat.json["prompt_tokens"].get<std::vector<int>>();
  const auto p3 = r3.json["prompt_tokens"].get<std::vector<int>>();
  REQUIRE(p3.size() > p1.size() + 10);
  // The first turn up to its <|assistant|> marker opens the conversation unchanged (the text
  // after the marker differs: "\n" alone against "\nTom had ...").
  CHECK(std::equal(p1.begin(), p1.end() - 1, p3.begin()));
}

TEST_CASE("cli: --messages files that are not a conversation fail clearly", "[model][cli]") {
  struct Case {
    std::string text, expect;
  };
  for (const Case& c : {Case{"[{\"role\": \"user\", \"content\": ", "not JSON"}, Case{"[]", "no messages"},
                        Case{"{\"model\": \"x\"}", "no messages"},
                        Case{"[{\"role\": \"user\"}]", "string \"content\""},
                        Case{"[{\"role\": \"tool\", \"content\": \"x\"}]", "role \"tool\""}}) {
    const TempFile f(c.text);
    const test::CliResult r = test::run_cli({"generate", "-n", "2", "--messages", f.path.string()});
    INFO(r.describe());
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(c.expect) != std::string::npos);
  }
  const test::CliResult missing = test::run_cli({"generate", "-n", "2", "--messages", "/no/such/conversation.json"});
  INFO(missing.describe());
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("cannot read the file /no/such/conversation.json") != std::string::npos);
  CHECK(missing.err.find("not the JSON itself") == std::string::npos);
  // The conversation given inline (break-it pass): the message says the option takes a path.
  const test::CliResult inline_json =
      test::run_cli({"generate", "-n", "2", "--messages", "[{\"role\": \"user\", \"content\": \"Hi\"}]"});
  INFO(inline_json.describe());
  CHECK(inline_json.exit_code == 1);
  CHECK(inline_json.err.find("takes the path of a JSON file, not the JSON itself") != std::string::npos);
  // A directory is named as one (regression: reported as "not JSON (… unexpected end of input …)").
  const std::string dir = fs::temp_directory_path().string();
  const test::CliResult is_dir = test::run_cli({"generate", "-n", "2", "--messages", dir});
  INFO(is_dir.describe());
  CHECK(is_dir.exit_code == 1);
  CHECK(is_dir.err.find(dir + " is a directory") != std::string::npos);
  const test::CliResult both =
      test::run_cli({"generate", "-n", "2", "--messages", "/no/such/conversation.json", "--chat", "Hi"});
  INFO(both.describe());
  CHECK(both.exit_code == 2);
}

TEST_CASE("cli: --messages ending with the assistant's text continues that reply", "[model][cli]") {
  // Assistant prefill (llama-server's behaviour; the app's Continue relies on the same rule):
  // the reply's text follows the generation prompt inside its open turn, so the greedy output
  // goes on from it instead of starting a new reply.
  const test::CliResult whole =
      test::run_cli({"generate", "--json", "-n", "16", "--drafter", "none", "--chat", "Tell me a story about Tom."});
  INFO(whole.describe());
  REQUIRE(whole.json_ok);
  const std::string text = whole.json["text"].get<std::string>();
  const size_t cut = text.find(' ', 12);  // a few words in, at a word boundary
  REQUIRE(cut != std::string::npos);
  nlohmann::json conv = nlohmann::json::array(
      {{{"role", "user"}, {"content", "Tell me a story about Tom."}}, {{"role", "assistant"}, {"content", text.substr(0, cut)}}});
  const TempFile file(conv.dump());
  const test::CliResult cont =
      test::run_cli({"generate", "--json", "-n", "6", "--drafter", "none", "--messages", file.path.string()});
  INFO(cont.describe());
  REQUIRE(cont.json_ok);
  const auto p_whole = whole.json["prompt_tokens"].get<std::vector<int>>();
  const auto p_cont = cont.json["prompt_tokens"].get<std::vector<int>>();
  // The user turn and the generation prompt, then the reply's text: nothing closes the turn.
  REQUIRE(p_cont.size() > p_whole.size());
  CHECK(std::equal(p_whole.begin(), p_whole.end(), p_cont.begin()));
  // Greedy, it goes on with the words the uninterrupted reply had next.
  const std::string rest = cont.json["text"].get<std::string>();
  REQUIRE_FALSE(rest.empty());
  CHECK(text.compare(cut, rest.size(), rest) == 0);
}

TEST_CASE("cli: an empty --stop and a --seed outside 0 to 2^64 - 1 are refused", "[model][cli]") {
  // Regression (break-it pass, 2026-12-05): `--stop ""` was accepted and ignored, `--seed -1`
  // wrapped to 2^64 - 1 and `--seed 18446744073709551616` was taken silently.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"generate", "-n", "2", "-p", "Hi", "--stop", ""},
        std::vector<std::string>{"generate", "-n", "2", "-p", "Hi", "--seed", "-1"},
        std::vector<std::string>{"generate", "-n", "2", "-p", "Hi", "--seed", "18446744073709551616"},
        std::vector<std::string>{"generate", "-n", "2", "-p", "Hi", "--seed", "12x"}}) {
    const test::CliResult r = test::run_cli(args);
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK((r.err.find("--stop") != std::string::npos || r.err.find("--seed") != std::string::npos));
  }
  const test::CliResult top = test::run_cli({"generate", "--json", "-n", "2", "-p", "Hi", "--seed", "18446744073709551615"});
  INFO(top.describe());
  CHECK(top.exit_code == 0);
}
