// ServeConfig (app/serve/config.h): the JSON file's keys and types, the security rule for
// non-loopback binds, and keys_equal (the constant-time API key comparison).
#include <catch2/catch.hpp>

#include "app/serve/config.h"
#include "app/serve/http_server.h"

using namespace specchat;
using namespace specchat::serve;
using nlohmann::json;

TEST_CASE("config file keys apply with their types", "[unit]") {
  ServeConfig c;
  apply_config_json(json::parse(R"({"host":"127.0.0.2","port":9000,"draft":"none","draft_k":6,"tree":"dynamic",
      "node_budget":20,"temperature":0.5,"parallel":2,"queue":3,"timeout_s":12.5,"log_content":true,
      "max_output_tokens":100,"drafter":"ngram","kv_type":"f32","draft_backoff":false,
      "activations":"f32"})"),
                    c);
  CHECK(c.host == "127.0.0.2");
  CHECK(c.port == 9000);
  CHECK(c.draft == "none");
  CHECK(c.spec.draft_k == 6);
  CHECK(c.spec.tree == TreeMode::dynamic);
  CHECK(c.spec.node_budget == 20);
  CHECK(c.spec.drafter == DrafterChoice::ngram);
  CHECK(c.temperature == Approx(0.5f));
  CHECK(c.parallel == 2);
  CHECK(c.queue == 3);
  CHECK(c.timeout_s == Approx(12.5));
  CHECK(c.log_content);
  CHECK(c.max_output_tokens == 100);
  CHECK(c.kv_type == "f32");
  CHECK_FALSE(c.spec.backoff);
  CHECK(ServeConfig{}.spec.backoff);
  CHECK(ServeConfig{}.kv_type == "f16");
  CHECK(c.activations == "f32");
  CHECK(ServeConfig{}.activations == "q8");
  CHECK_NOTHROW(validate_config(c));
}

TEST_CASE("config files refuse unknown keys, wrong types and secrets", "[unit]") {
  ServeConfig c;
  CHECK_THROWS_AS(apply_config_json(json::parse(R"({"prot":8080})"), c), ConfigError);
  CHECK_THROWS_AS(apply_config_json(json::parse(R"({"port":"8080"})"), c), ConfigError);
  CHECK_THROWS_AS(apply_config_json(json::parse(R"({"parallel":2.5})"), c), ConfigError);
  CHECK_THROWS_AS(apply_config_json(json::parse(R"({"tree":"auto"})"), c), ConfigError);
  CHECK_THROWS_AS(apply_config_json(json::parse(R"({"kv_type":"q8_0"})"), c), ConfigError);
  CHECK_THROWS_AS(apply_config_json(json::parse(R"({"activations":"q4"})"), c), ConfigError);
  CHECK_THROWS_AS(apply_config_json(json::parse(R"({"draft_backoff":"no"})"), c), ConfigError);
  CHECK_THROWS_AS(apply_config_json(json::parse(R"({"api_key":"secret"})"), c), ConfigError);
  CHECK_THROWS_AS(apply_config_json(json::parse(R"([1])"), c), ConfigError);
  CHECK_THROWS_AS(apply_config_file("/nonexistent/specchat.json", c), ConfigError);
}

TEST_CASE("validate_config: ranges and no non-loopback bind without a key", "[unit]") {
  ServeConfig c;
  CHECK_NOTHROW(validate_config(c));
  c.host = "0.0.0.0";
  CHECK_THROWS_WITH(validate_config(c), Catch::Contains("API key"));
  c.api_key = "k";
  CHECK_NOTHROW(validate_config(c));
  ServeConfig p;
  p.parallel = 0;
  CHECK_THROWS_AS(validate_config(p), ConfigError);
  ServeConfig t;
  t.temperature = -1;
  CHECK_THROWS_AS(validate_config(t), ConfigError);
  ServeConfig l;
  l.log_level = "loud";
  CHECK_THROWS_AS(validate_config(l), ConfigError);
}

TEST_CASE("loopback hosts", "[unit]") {
  CHECK(is_loopback_host("127.0.0.1"));
  CHECK(is_loopback_host("127.3.2.1"));
  CHECK(is_loopback_host("localhost"));
  CHECK(is_loopback_host("::1"));
  CHECK_FALSE(is_loopback_host("0.0.0.0"));
  CHECK_FALSE(is_loopback_host("::"));
  CHECK_FALSE(is_loopback_host("192.168.1.10"));
  CHECK_FALSE(is_loopback_host("128.0.0.1"));
}

TEST_CASE("keys_equal compares whole keys", "[unit]") {
  CHECK(keys_equal("secret-key", "secret-key"));
  CHECK_FALSE(keys_equal("secret-kex", "secret-key"));
  CHECK_FALSE(keys_equal("secret-ke", "secret-key"));
  CHECK_FALSE(keys_equal("secret-key-", "secret-key"));
  CHECK_FALSE(keys_equal("", "secret-key"));
  CHECK_FALSE(keys_equal("Secret-key", "secret-key"));
}
