// parse_api_request (app/serve/api_request.h): what is accepted, defaults, and that every
// malformed body becomes a 400 ApiError in OpenAI's shape instead of an exception.
#include <catch2/catch.hpp>
#include <string>
#include <variant>

#include "app/serve/api_request.h"

using namespace specchat;
using namespace specchat::serve;
using nlohmann::json;

namespace {

ServeConfig defaults() {
  ServeConfig c;
  c.default_max_tokens = 64;
  c.temperature = 0.0f;
  return c;
}

ApiRequest ok(const std::string& body, Endpoint ep = Endpoint::chat, int max_output = 256) {
  auto r = parse_api_request(body, ep, defaults(), max_output);
  if (auto* e = std::get_if<ApiError>(&r)) FAIL("refused: " << e->message);
  return std::get<ApiRequest>(r);
}

ApiError refused(const std::string& body, Endpoint ep = Endpoint::chat, int max_output = 256) {
  auto r = parse_api_request(body, ep, defaults(), max_output);
  if (std::holds_alternative<ApiRequest>(r)) FAIL("accepted: " << body);
  return std::get<ApiError>(r);
}

}  // namespace

TEST_CASE("chat requests: messages, parameters and the server's defaults", "[unit]") {
  const ApiRequest r = ok(R"({"model":"x","messages":[{"role":"system","content":"be brief"},
      {"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}],
      "max_tokens":12,"temperature":0.7,"top_p":0.9,"top_k":40,"seed":7,"stop":["\n\n","END"],"stream":true})");
  REQUIRE(r.messages.size() == 2);
  CHECK(r.messages[0].role == "system");
  CHECK(r.messages[1].content == "hi there");
  CHECK(r.model == "x");
  CHECK(r.max_tokens == 12);
  CHECK(r.sampling.temperature == Approx(0.7f));
  CHECK(r.sampling.top_p == Approx(0.9f));
  CHECK(r.sampling.top_k == 40);
  CHECK(r.sampling.seed == 7u);
  CHECK(r.stop == std::vector<std::string>{"\n\n", "END"});
  CHECK(r.stream);

  const ApiRequest d = ok(R"({"messages":[{"role":"user","content":"hi"}],"temperature":null})");
  CHECK(d.max_tokens == 64);  // default_max_tokens
  CHECK(d.sampling.greedy());
  CHECK_FALSE(d.stream);
  CHECK(d.spec.drafter == DrafterChoice::model);
  CHECK(d.spec.draft_k == SpecSettings{}.draft_k);
}

TEST_CASE("completion requests take a prompt string or a one-string array", "[unit]") {
  CHECK(ok(R"({"prompt":"Once upon"})", Endpoint::completion).prompt == "Once upon");
  CHECK(ok(R"({"prompt":["Once upon"]})", Endpoint::completion).prompt == "Once upon");
  CHECK(refused(R"({"prompt":["a","b"]})", Endpoint::completion).param == "prompt");
  CHECK(refused(R"({"prompt":""})", Endpoint::completion).param == "prompt");
  CHECK(refused(R"({"messages":[{"role":"user","content":"x"}]})", Endpoint::completion).code ==
        "missing_required_parameter");
}

TEST_CASE("speculative parameters override the server's defaults", "[unit]") {
  const ApiRequest r = ok(R"({"messages":[{"role":"user","content":"x"}],"draft_k":6,"tree":"dynamic",
      "node_budget":24,"drafter":"ngram"})");
  CHECK(r.spec.draft_k == 6);
  CHECK(r.spec.tree == TreeMode::dynamic);
  CHECK(r.spec.node_budget == 24);
  CHECK(r.spec.drafter == DrafterChoice::ngram);
  CHECK(ok(R"({"messages":[{"role":"user","content":"x"}],"speculative":false,"drafter":"ngram"})").spec.drafter ==
        DrafterChoice::none);
  CHECK(ok(R"({"messages":[{"role":"user","content":"x"}],"drafter":"none","speculative":true})").spec.drafter ==
        DrafterChoice::model);
  CHECK(refused(R"({"messages":[{"role":"user","content":"x"}],"tree":"auto"})").param == "tree");
  CHECK(refused(R"({"messages":[{"role":"user","content":"x"}],"draft_k":65})").param == "draft_k");
  CHECK(refused(R"({"messages":[{"role":"user","content":"x"}],"node_budget":0})").param == "node_budget");
  CHECK(refused(R"({"messages":[{"role":"user","content":"x"}],"speculative":"yes"})").code == "invalid_type");
}

TEST_CASE("tree depth and branching are request parameters too", "[unit]") {
  // Regression (break-it pass): "depth" was ignored without a word, so a request asking for an
  // optimal tree 4 deep ran the server's default of 5.
  const ApiRequest r = ok(R"({"messages":[{"role":"user","content":"x"}],"tree":"optimal","node_budget":12,
      "depth":4,"branch":2})");
  CHECK(r.spec.depth == 4);
  CHECK(r.spec.branch == 2);
  CHECK(r.spec.node_budget == 12);
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  CHECK(refused("{" + m + R"(,"depth":0})").param == "depth");
  CHECK(refused("{" + m + R"(,"depth":65})").param == "depth");
  CHECK(refused("{" + m + R"(,"branch":0})").param == "branch");
  CHECK(refused("{" + m + R"(,"branch":33})").param == "branch");
  CHECK(refused("{" + m + R"(,"depth":"4"})").code == "invalid_type");
  CHECK(refused("{" + m + R"(,"decode_mode":"pipo","depth":4})").param == "depth");
}

TEST_CASE("malformed requests are 400 errors in OpenAI's shape", "[unit]") {
  const std::string m = R"("messages":[{"role":"user","content":"x"}])";
  struct Case {
    std::string body, param;
  };
  const std::vector<Case> cases = {
      {"", ""},
      {"{", ""},
      {"[1,2]", ""},
      {"null", ""},
      {"\"text\"", ""},
      {std::string("{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}"), ""},  // invalid UTF-8
      {"{}", "messages"},
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[]})", "messages"},
      {R"({"messages":[1]})", "messages[0]"},
      {R"({"messages":[{"content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"tool","content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":5}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "messages[0].content"},
      {"{" + m + R"(,"max_tokens":"10"})", "max_tokens"},
      {"{" + m + R"(,"max_tokens":-1})", "max_tokens"},
      {"{" + m + R"(,"max_tokens":1.5})", "max_tokens"},
      {"{" + m + R"(,"max_tokens":1e300})", "max_tokens"},
      {"{" + m + R"(,"max_tokens":100000000000000000000})", "max_tokens"},
      {"{" + m + R"(,"max_tokens":257})", "max_tokens"},
      {"{" + m + R"(,"max_completion_tokens":999999})", "max_completion_tokens"},
      {"{" + m + R"(,"temperature":-0.5})", "temperature"},
      {"{" + m + R"(,"temperature":2.5})", "temperature"},
      {"{" + m + R"(,"temperature":"hot"})", "temperature"},
      {"{" + m + R"(,"top_p":0})", "top_p"},
      {"{" + m + R"(,"top_p":1.1})", "top_p"},
      {"{" + m + R"(,"top_k":-1})", "top_k"},
      {"{" + m + R"(,"seed":-3})", "seed"},
      {"{" + m + R"(,"stop":5})", "stop"},
      {"{" + m + R"(,"stop":["a","b","c","d","e"]})", "stop"},
      {"{" + m + R"(,"stop":[""]})", "stop"},
      {"{" + m + R"(,"stream":"true"})", "stream"},
      {"{" + m + R"(,"stream":1})", "stream"},
      {"{" + m + R"(,"n":2})", "n"},
      {"{" + m + R"(,"model":7})", "model"},
      {"{" + m + R"(,"stream_options":true})", "stream_options"},
  };
  for (const Case& c : cases) {
    INFO(c.body);
    const ApiError e = refused(c.body);
    CHECK(e.status == 400);
    CHECK(e.param == c.param);
    const json b = e.body();
    REQUIRE(b.contains("error"));
    CHECK(b["error"]["message"].is_string());
    CHECK_FALSE(b["error"]["message"].get<std::string>().empty());
    CHECK(b["error"]["type"] == "invalid_request_error");
    CHECK(b["error"].contains("param"));
    CHECK(b["error"].contains("code"));
  }
}

TEST_CASE("integral floats are integers, null parameters take the defaults", "[unit]") {
  const ApiRequest r = ok(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":16.0,"seed":null,"stop":null})");
  CHECK(r.max_tokens == 16);
  CHECK(r.stop.empty());
}

TEST_CASE("a request nested 100,000 levels deep is refused, not a crash", "[unit]") {
  // The conversation import crashed on such a document (a stack overflow printing it); the
  // server parses hostile bodies too.
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += '[';
  for (int i = 0; i < 100000; ++i) deep += ']';
  for (const std::string& body : {R"({"messages":[{"role":"user","content":)" + deep + "}]}",
                                  R"({"messages":[{"role":"user","content":"hi"}],"stop":)" + deep + "}", deep}) {
    const ApiError e = refused(body);
    CHECK(e.status == 400);
  }
  // An unknown key is ignored, as OpenAI's API does, however deep it nests.
  CHECK(ok(R"({"messages":[{"role":"user","content":"hi"}],"unknown":)" + deep + "}").messages.size() == 1);
}
