#include "app/serve/config.h"

#include <arpa/inet.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace specchat::serve {

using nlohmann::json;

namespace {

[[noreturn]] void bad_type(const std::string& key, const char* want) {
  throw ConfigError("config key \"" + key + "\" must be " + want);
}

std::string get_string(const std::string& key, const json& v) {
  if (!v.is_string()) bad_type(key, "a string");
  return v.get<std::string>();
}

int64_t get_int(const std::string& key, const json& v) {
  if (!v.is_number_integer()) bad_type(key, "an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) bad_type(key, "a smaller integer");
  return v.get<int64_t>();
}

int get_int32(const std::string& key, const json& v) {
  const int64_t x = get_int(key, v);
  if (x < INT32_MIN || x > INT32_MAX) bad_type(key, "a 32-bit integer");
  return static_cast<int>(x);
}

double get_number(const std::string& key, const json& v) {
  if (!v.is_number()) bad_type(key, "a number");
  const double x = v.get<double>();
  if (!std::isfinite(x)) bad_type(key, "a finite number");
  return x;
}

bool get_bool(const std::string& key, const json& v) {
  if (!v.is_boolean()) bad_type(key, "true or false");
  return v.get<bool>();
}

using Setter = std::function<void(const std::string&, const json&, ServeConfig&)>;

const std::map<std::string, Setter>& setters() {
  static const std::map<std::string, Setter> m = {
      {"host", [](auto& k, auto& v, auto& c) { c.host = get_string(k, v); }},
      {"port", [](auto& k, auto& v, auto& c) { c.port = get_int32(k, v); }},
      {"model", [](auto& k, auto& v, auto& c) { c.model = get_string(k, v); }},
      {"draft", [](auto& k, auto& v, auto& c) { c.draft = get_string(k, v); }},
      {"manifest", [](auto& k, auto& v, auto& c) { c.manifest = get_string(k, v); }},
      {"model_name", [](auto& k, auto& v, auto& c) { c.model_name = get_string(k, v); }},
      {"n_ctx", [](auto& k, auto& v, auto& c) { c.n_ctx = get_int32(k, v); }},
      {"threads", [](auto& k, auto& v, auto& c) { c.threads = get_int32(k, v); }},
      {"draft_backoff", [](auto& k, auto& v, auto& c) { c.spec.backoff = get_bool(k, v); }},
      {"kv_type", [](auto& k, auto& v, auto& c) {
         c.kv_type = get_string(k, v);
         if (c.kv_type != "f16" && c.kv_type != "f32") bad_type(k, "\"f16\" or \"f32\"");
       }},
      {"activations", [](auto& k, auto& v, auto& c) {
         c.activations = get_string(k, v);
         if (c.activations != "q8" && c.activations != "f32") bad_type(k, "\"q8\" or \"f32\"");
       }},
      {"drafter", [](auto& k, auto& v, auto& c) {
         if (!parse_drafter_choice(get_string(k, v), &c.spec.drafter)) bad_type(k, "\"model\", \"ngram\" or \"none\"");
       }},
      {"tree", [](auto& k, auto& v, auto& c) {
         if (!parse_tree_mode(get_string(k, v), &c.spec.tree)) bad_type(k, "\"chain\", \"dynamic\" or \"optimal\"");
       }},
      {"draft_k", [](auto& k, auto& v, auto& c) { c.spec.draft_k = get_int32(k, v); }},
      {"node_budget", [](auto& k, auto& v, auto& c) { c.spec.node_budget = get_int32(k, v); }},
      {"depth", [](auto& k, auto& v, auto& c) { c.spec.depth = get_int32(k, v); }},
      {"branch", [](auto& k, auto& v, auto& c) { c.spec.branch = get_int32(k, v); }},
      {"temperature", [](auto& k, auto& v, auto& c) { c.temperature = static_cast<float>(get_number(k, v)); }},
      {"top_p", [](auto& k, auto& v, auto& c) { c.top_p = static_cast<float>(get_number(k, v)); }},
      {"top_k", [](auto& k, auto& v, auto& c) { c.top_k = get_int32(k, v); }},
      {"seed", [](auto& k, auto& v, auto& c) {
         const int64_t s = get_int(k, v);
         if (s < 0) bad_type(k, "a non-negative integer");
         c.seed = static_cast<uint64_t>(s);
       }},
      {"default_max_tokens", [](auto& k, auto& v, auto& c) { c.default_max_tokens = get_int32(k, v); }},
      {"max_output_tokens", [](auto& k, auto& v, auto& c) { c.max_output_tokens = get_int32(k, v); }},
      {"max_input_tokens", [](auto& k, auto& v, auto& c) { c.max_input_tokens = get_int32(k, v); }},
      {"max_body_bytes", [](auto& k, auto& v, auto& c) {
         const int64_t b = get_int(k, v);
         if (b <= 0) bad_type(k, "a positive integer");
         c.max_body_bytes = static_cast<size_t>(b);
       }},
      {"parallel", [](auto& k, auto& v, auto& c) { c.parallel = get_int32(k, v); }},
      {"queue", [](auto& k, auto& v, auto& c) { c.queue = get_int32(k, v); }},
      {"timeout_s", [](auto& k, auto& v, auto& c) { c.timeout_s = get_number(k, v); }},
      {"read_timeout_s", [](auto& k, auto& v, auto& c) { c.read_timeout_s = get_number(k, v); }},
      {"log_level", [](auto& k, auto& v, auto& c) { c.log_level = get_string(k, v); }},
      {"log_path", [](auto& k, auto& v, auto& c) { c.log_path = get_string(k, v); }},
      {"log_content", [](auto& k, auto& v, auto& c) { c.log_content = get_bool(k, v); }},
      {"pipo", [](auto& k, auto& v, auto& c) { c.pipo = get_string(k, v); }},
      {"pipo_threshold", [](auto& k, auto& v, auto& c) {
         const double t = get_number(k, v);
         if (t < 0 || t > 1) bad_type(k, "a number in [0, 1]");
         c.pipo_threshold = t;
       }},
      {"pipo_pair_size", [](auto& k, auto& v, auto& c) { c.pipo_pair_size = get_int32(k, v); }},
      {"pipo_extra_draft_tokens", [](auto& k, auto& v, auto& c) { c.pipo_extra_draft_tokens = get_int32(k, v); }},
      {"pipo_fidelity", [](auto& k, auto& v, auto& c) { c.pipo_fidelity = get_int32(k, v); }},
  };
  return m;
}

void check_range(const char* name, double v, double lo, double hi) {
  if (!(v >= lo && v <= hi)) {
    std::ostringstream s;
    s << name << " must be in [" << lo << ", " << hi << "] (got " << v << ")";
    throw ConfigError(s.str());
  }
}

}  // namespace

void apply_config_json(const json& j, ServeConfig& c) {
  if (!j.is_object()) throw ConfigError("the config file must hold one JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key == "api_key") {
      throw ConfigError("config key \"api_key\" is not read from files: use --api-key or SPECCHAT_API_KEY");
    }
    const auto it = setters().find(key);
    if (it == setters().end()) throw ConfigError("unknown config key \"" + key + "\"");
    it->second(key, value, c);
  }
}

void apply_config_file(const std::string& path, ServeConfig& c) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("cannot read the config file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) throw ConfigError("the config file " + path + " is not valid JSON");
  apply_config_json(j, c);
}

bool is_loopback_host(const std::string& host) {
  if (host == "localhost" || host == "::1") return true;
  in_addr a{};
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
  return false;
}

void validate_config(const ServeConfig& c) {
  if (c.host.empty()) throw ConfigError("host must not be empty");
  check_range("port", c.port, 0, 65535);
  check_range("parallel", c.parallel, 1, 64);
  check_range("queue", c.queue, 0, 4096);
  check_range("n_ctx", c.n_ctx, 0, 1 << 20);
  check_range("threads", c.threads, 0, 256);
  check_range("draft_k", c.spec.draft_k, 0, 64);
  check_range("node_budget", c.spec.node_budget, 1, 127);
  check_range("depth", c.spec.depth, 1, 64);
  check_range("branch", c.spec.branch, 1, 32);
  check_range("temperature", c.temperature, 0, 2);
  check_range("top_p", c.top_p, 0, 1);
  if (c.top_p <= 0) throw ConfigError("top_p must be greater than 0");
  check_range("top_k", c.top_k, 0, 1 << 20);
  check_range("default_max_tokens", c.default_max_tokens, 0, 1 << 20);
  check_range("max_output_tokens", c.max_output_tokens, 0, 1 << 20);
  check_range("max_input_tokens", c.max_input_tokens, 0, 1 << 20);
  check_range("max_body_bytes", static_cast<double>(c.max_body_bytes), 1, 1 << 30);
  check_range("timeout_s", c.timeout_s, 0.1, 86400);
  check_range("read_timeout_s", c.read_timeout_s, 0.1, 3600);
  if (c.log_level != "debug" && c.log_level != "info" && c.log_level != "warn" && c.log_level != "error") {
    throw ConfigError("log_level must be debug, info, warn or error (got \"" + c.log_level + "\")");
  }
  if (c.model_name.empty()) throw ConfigError("model_name must not be empty");
  if (c.pipo_threshold != ServeConfig::kPipoThresholdUnset) {
    check_range("pipo_threshold", c.pipo_threshold, 0, 1);
    if (c.pipo.empty()) throw ConfigError("pipo_threshold (--pipo-threshold) needs a PIPO release (pipo / --pipo DIR)");
  }
  if (c.pipo_fidelity != 0) {
    check_range("pipo_fidelity", c.pipo_fidelity, 0, 1000000);
    if (c.pipo.empty()) throw ConfigError("pipo_fidelity (--pipo-fidelity) needs a PIPO release (pipo / --pipo DIR)");
  }
  if (c.pipo_pair_size != 2) {
    throw ConfigError("pipo_pair_size is fixed at 2 (tokens per latent; got " + std::to_string(c.pipo_pair_size) + ")");
  }
  if (c.pipo_extra_draft_tokens != 1) {
    throw ConfigError("pipo_extra_draft_tokens is fixed at 1 (tokens the MTP head adds per step; got " +
                      std::to_string(c.pipo_extra_draft_tokens) + ")");
  }
  if (!is_loopback_host(c.host) && c.api_key.empty()) {
    throw ConfigError("refusing to listen on " + c.host +
                      " without an API key: set --api-key or SPECCHAT_API_KEY, or bind to 127.0.0.1");
  }
}

}  // namespace specchat::serve
