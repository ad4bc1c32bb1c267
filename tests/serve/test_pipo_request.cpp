// PIPO's request extension and settings in the server (app/serve/api_request.h, config.h):
// "decode_mode": "pipo" is the only way in (never a default), "acceptance_threshold" is checked
// and accepted only with it, a drafter named with it is refused; the config file's PIPO keys are
// validated (threshold in [0, 1] and only with a release; pair_size 2 and extra_draft_tokens 1
// fixed).
#include <catch2/catch.hpp>
#include <string>
#include <variant>

#include "app/serve/api_request.h"

using namespace specchat;
using namespace specchat::serve;
using nlohmann::json;

namespace {

std::variant<ApiRequest, ApiError> parse(const std::string& body, Endpoint ep = Endpoint::chat) {
  ServeConfig c;
  c.default_max_tokens = 32;
  return parse_api_request(body, ep, c, 256);
}

ApiRequest ok(const std::string& body, Endpoint ep = Endpoint::chat) {
  auto r = parse(body, ep);
  if (auto* e = std::get_if<ApiError>(&r)) FAIL("refused: " << e->message);
  return std::get<ApiRequest>(r);
}

ApiError refused(const std::string& body) {
  auto r = parse(body);
  if (std::holds_alternative<ApiRequest>(r)) FAIL("accepted: " << body);
  return std::get<ApiError>(r);
}

const std::string kMsg = R"("messages":[{"role":"user","content":"hi"}])";

}  // namespace

TEST_CASE("pipo request: decode_mode selects PIPO explicitly, lossless by default", "[unit][pipo]") {
  const ApiRequest d = ok("{" + kMsg + "}");
  CHECK(d.mode == DecodeMode::lossless);
  CHECK(d.acceptance_threshold < 0);
  CHECK(ok("{" + kMsg + R"(,"decode_mode":"lossless"})").mode == DecodeMode::lossless);
  CHECK(ok("{" + kMsg + R"(,"decode_mode":null})").mode == DecodeMode::lossless);

  const ApiRequest p = ok("{" + kMsg + R"(,"decode_mode":"pipo","max_tokens":9,"temperature":0.5,"seed":3})");
  CHECK(p.mode == DecodeMode::pipo);
  CHECK(p.acceptance_threshold < 0);  // the server's default applies
  CHECK(p.max_tokens == 9);
  CHECK(p.sampling.temperature == Approx(0.5f));
  CHECK(p.sampling.seed == 3u);

  const ApiRequest t = ok("{" + kMsg + R"(,"decode_mode":"pipo","acceptance_threshold":0.25})");
  CHECK(t.acceptance_threshold == Approx(0.25f));
  CHECK(ok("{" + kMsg + R"(,"decode_mode":"pipo","acceptance_threshold":0})").acceptance_threshold == 0.0f);
  CHECK(ok("{" + kMsg + R"(,"decode_mode":"pipo","acceptance_threshold":1})").acceptance_threshold == 1.0f);
  // "speculative": false is harmless with PIPO (the remote client sends it).
  CHECK(ok("{" + kMsg + R"(,"decode_mode":"pipo","speculative":false})").mode == DecodeMode::pipo);
  // Completions too.
  CHECK(ok(R"({"prompt":"Once","decode_mode":"pipo","stream":true})", Endpoint::completion).mode == DecodeMode::pipo);
}

TEST_CASE("pipo request: bad modes and thresholds are 400 in OpenAI's shape", "[unit][pipo]") {
  struct Case {
    std::string body, param, code;
  };
  const Case cases[] = {
      {R"(,"decode_mode":"turbo")", "decode_mode", "invalid_value"},
      {R"(,"decode_mode":"PIPO")", "decode_mode", "invalid_value"},
      {R"(,"decode_mode":1)", "decode_mode", "invalid_type"},
      {R"(,"decode_mode":true)", "decode_mode", "invalid_type"},
      {R"(,"decode_mode":["pipo"])", "decode_mode", "invalid_type"},
      {R"(,"decode_mode":"pipo","acceptance_threshold":1.5)", "acceptance_threshold", "invalid_value"},
      {R"(,"decode_mode":"pipo","acceptance_threshold":-0.1)", "acceptance_threshold", "invalid_value"},
      {R"(,"decode_mode":"pipo","acceptance_threshold":"high")", "acceptance_threshold", "invalid_type"},
      {R"(,"decode_mode":"pipo","acceptance_threshold":{})", "acceptance_threshold", "invalid_type"},
      // A threshold without PIPO would be silently meaningless: refused.
      {R"(,"acceptance_threshold":0.5)", "acceptance_threshold", "invalid_value"},
      {R"(,"decode_mode":"lossless","acceptance_threshold":0.5)", "acceptance_threshold", "invalid_value"},
      // PIPO drafts with its own head: a drafter named with it is refused, not ignored.
      {R"(,"decode_mode":"pipo","drafter":"model")", "drafter", "invalid_value"},
      {R"(,"decode_mode":"pipo","draft_k":4)", "draft_k", "invalid_value"},
      {R"(,"decode_mode":"pipo","tree":"chain")", "tree", "invalid_value"},
      {R"(,"decode_mode":"pipo","node_budget":8)", "node_budget", "invalid_value"},
      {R"(,"decode_mode":"pipo","speculative":true)", "speculative", "invalid_value"},
  };
  for (const Case& c : cases) {
    INFO(c.body);
    const ApiError e = refused("{" + kMsg + c.body + "}");
    CHECK(e.status == 400);
    CHECK(e.type == "invalid_request_error");
    CHECK(e.param == c.param);
    CHECK(e.code == c.code);
    CHECK_FALSE(e.message.empty());
    const json b = e.body();
    CHECK(b["error"]["param"] == c.param);
    CHECK(b["error"]["message"].is_string());
  }
  // A number JSON cannot hold is the body's fault: 400 invalid_json.
  const ApiError big = refused("{" + kMsg + R"(,"decode_mode":"pipo","acceptance_threshold":1e400})");
  CHECK(big.status == 400);
  CHECK(big.code == "invalid_json");
}

TEST_CASE("pipo config: keys, ranges and the fixed settings", "[unit][pipo]") {
  ServeConfig c;
  CHECK(c.pipo.empty());
  CHECK(c.pipo_threshold == ServeConfig::kPipoThresholdUnset);
  CHECK_NOTHROW(validate_config(c));
  apply_config_json(json::parse(R"({"pipo":"bundled","pipo_threshold":0.4,"pipo_pair_size":2,
      "pipo_extra_draft_tokens":1})"),
                    c);
  CHECK(c.pipo == "bundled");
  CHECK(c.pipo_threshold == Approx(0.4));
  CHECK_NOTHROW(validate_config(c));

  auto config_error = [](const std::string& text) {
    ServeConfig x;
    try {
      apply_config_json(json::parse(text), x);
      validate_config(x);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(config_error(R"({"pipo":"d","pipo_threshold":1.01})").find("pipo_threshold") != std::string::npos);
  CHECK(config_error(R"({"pipo":"d","pipo_threshold":-0.5})").find("pipo_threshold") != std::string::npos);
  CHECK(config_error(R"({"pipo":"d","pipo_threshold":"0.5"})").find("pipo_threshold") != std::string::npos);
  CHECK(config_error(R"({"pipo_threshold":0.5})").find("needs a PIPO release") != std::string::npos);
  CHECK(config_error(R"({"pipo":"d","pipo_pair_size":3})").find("fixed at 2") != std::string::npos);
  CHECK(config_error(R"({"pipo":"d","pipo_extra_draft_tokens":2})").find("fixed at 1") != std::string::npos);
  CHECK(config_error(R"({"pipo":7})").find("\"pipo\"") != std::string::npos);
  CHECK(config_error(R"({"pipo":"d","pipo_threshold":0,"pipo_pair_size":2})").empty());
  CHECK(config_error(R"({"pipo":"d","pipo_threshold":1})").empty());
  // A threshold set programmatically (the flags) is range-checked too.
  ServeConfig f;
  apply_config_json(json{{"pipo", "d"}}, f);
  f.pipo_threshold = 2;
  CHECK_THROWS_AS(validate_config(f), ConfigError);
}
