#include "app/serve/api_request.h"

#include <cmath>
#include <limits>

#include "engine/utf8.h"

namespace specchat::serve {

using nlohmann::json;

json ApiError::body() const {
  return json{{"error",
               {{"message", message},
                {"type", type},
                {"param", param.empty() ? json(nullptr) : json(param)},
                {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

namespace {

// Thrown inside the parser only; parse_api_request turns it into its ApiError result.
struct Refusal {
  ApiError e;
};

[[noreturn]] void refuse(const std::string& param, const std::string& message, const std::string& code = "invalid_value") {
  throw Refusal{ApiError{400, message, "invalid_request_error", param, code}};
}

int64_t integer(const json& j, const std::string& name, int64_t lo, int64_t hi) {
  if (!j.is_number_integer()) {
    // 16.0 is an integer to JSON's eye in many clients; anything fractional is refused.
    if (j.is_number_float()) {
      const double d = j.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && d >= static_cast<double>(lo) && d <= static_cast<double>(hi)) {
        return static_cast<int64_t>(d);
      }
    }
    if (j.is_number()) refuse(name, "'" + name + "' must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    refuse(name, "'" + name + "' must be an integer", "invalid_type");
  }
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(hi)) {
    refuse(name, "'" + name + "' must be at most " + std::to_string(hi));
  }
  const int64_t v = j.get<int64_t>();
  if (v < lo || v > hi) {
    refuse(name, "'" + name + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] (got " +
                     std::to_string(v) + ")");
  }
  return v;
}

double number(const json& j, const std::string& name, double lo, double hi, bool lo_open = false) {
  if (!j.is_number()) refuse(name, "'" + name + "' must be a number", "invalid_type");
  const double v = j.get<double>();
  if (!std::isfinite(v) || v > hi || v < lo || (lo_open && v == lo)) {
    refuse(name, "'" + name + "' must be in " + std::string(lo_open ? "(" : "[") + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  }
  return v;
}

bool boolean(const json& j, const std::string& name) {
  if (!j.is_boolean()) refuse(name, "'" + name + "' must be true or false", "invalid_type");
  return j.get<bool>();
}

std::string text(const json& j, const std::string& name) {
  if (!j.is_string()) refuse(name, "'" + name + "' must be a string", "invalid_type");
  return j.get<std::string>();
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts joined.
std::string content(const json& j, const std::string& name) {
  if (j.is_string()) return j.get<std::string>();
  if (!j.is_array()) refuse(name, "'" + name + "' must be a string or an array of text parts", "invalid_type");
  std::string out;
  for (const json& part : j) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
        !part["text"].is_string()) {
      refuse(name, "'" + name + "' parts must be {\"type\": \"text\", \"text\": string} (only text is supported)");
    }
    out += part["text"].get<std::string>();
  }
  return out;
}

std::vector<ChatMessage> messages(const json& j) {
  if (!j.is_array()) refuse("messages", "'messages' must be an array", "invalid_type");
  if (j.empty()) refuse("messages", "'messages' must not be empty");
  if (j.size() > 1024) refuse("messages", "'messages' holds more than 1024 messages");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string p = "messages[" + std::to_string(i) + "]";
    const json& m = j[i];
    if (!m.is_object()) refuse(p, "'" + p + "' must be an object", "invalid_type");
    if (!m.contains("role")) refuse(p + ".role", "'" + p + ".role' is required", "missing_required_parameter");
    const std::string role = text(m["role"], p + ".role");
    if (role != "system" && role != "user" && role != "assistant") {
      refuse(p + ".role", "'" + p + ".role' must be system, user or assistant (got '" + role + "')");
    }
    if (!m.contains("content") || m["content"].is_null()) {
      refuse(p + ".content", "'" + p + ".content' is required", "missing_required_parameter");
    }
    out.push_back({role, content(m["content"], p + ".content")});
  }
  return out;
}

std::vector<std::string> stops(const json& j) {
  std::vector<std::string> out;
  if (j.is_null()) return out;
  if (j.is_string()) {
    out.push_back(j.get<std::string>());
  } else if (j.is_array()) {
    if (j.size() > 4) refuse("stop", "'stop' holds at most 4 strings");
    for (const json& s : j) out.push_back(text(s, "stop"));
  } else {
    refuse("stop", "'stop' must be a string or an array of strings", "invalid_type");
  }
  for (const std::string& s : out) {
    if (s.empty()) refuse("stop", "'stop' strings must not be empty");
    if (s.size() > 256) refuse("stop", "'stop' strings must be at most 256 bytes");
  }
  return out;
}

ApiRequest parse(const json& j, Endpoint endpoint, const ServeConfig& c, int max_output) {
  if (!j.is_object()) refuse("", "the request body must be a JSON object", "invalid_type");
  ApiRequest r;
  r.endpoint = endpoint;
  r.max_tokens = std::min(c.default_max_tokens, max_output);
  r.sampling.temperature = c.temperature;
  r.sampling.top_p = c.top_p;
  r.sampling.top_k = c.top_k;
  r.sampling.seed = c.seed;
  r.spec = c.spec;
  if (endpoint == Endpoint::chat) {
    if (!j.contains("messages")) refuse("messages", "'messages' is required", "missing_required_parameter");
    r.messages = messages(j["messages"]);
  } else {
    if (!j.contains("prompt")) refuse("prompt", "'prompt' is required", "missing_required_parameter");
    const json& p = j["prompt"];
    if (p.is_array()) {
      if (p.size() != 1) refuse("prompt", "'prompt' must be a string or an array of exactly one string");
      r.prompt = text(p[0], "prompt");
    } else {
      r.prompt = text(p, "prompt");
    }
    if (r.prompt.empty()) refuse("prompt", "'prompt' must not be empty");
  }
  // null means "not given" for every optional parameter, as in OpenAI's API.
  auto given = [&](const char* k) { return j.contains(k) && !j[k].is_null(); };
  if (given("model")) r.model = text(j["model"], "model");
  const char* max_key = given("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  if (given(max_key)) {
    const int64_t n = integer(j[max_key], max_key, 0, std::numeric_limits<int64_t>::max());
    if (n > max_output) {
      refuse(max_key, "'" + std::string(max_key) + "' is " + std::to_string(n) + "; this server generates at most " +
                          std::to_string(max_output) + " tokens per request");
    }
    r.max_tokens = static_cast<int>(n);
  }
  if (given("temperature")) r.sampling.temperature = static_cast<float>(number(j["temperature"], "temperature", 0, 2));
  if (given("top_p")) r.sampling.top_p = static_cast<float>(number(j["top_p"], "top_p", 0, 1, true));
  if (given("top_k")) r.sampling.top_k = static_cast<int>(integer(j["top_k"], "top_k", 0, 1 << 20));
  if (given("seed")) r.sampling.seed = static_cast<uint64_t>(integer(j["seed"], "seed", 0, std::numeric_limits<int64_t>::max()));
  if (given("stop")) r.stop = stops(j["stop"]);
  if (given("stream")) r.stream = boolean(j["stream"], "stream");
  if (given("stream_options") && !j["stream_options"].is_object()) {
    refuse("stream_options", "'stream_options' must be an object", "invalid_type");
  }
  if (given("n") && integer(j["n"], "n", 1, 1) != 1) refuse("n", "only n = 1 is supported");
  if (given("drafter")) {
    r.drafter_named = true;
    if (!parse_drafter_choice(text(j["drafter"], "drafter"), &r.spec.drafter)) {
      refuse("drafter", "'drafter' must be model, ngram, block, mtp or none");
    }
  }
  if (given("speculative")) {
    // false: plain decoding whatever drafter is named; true: the model drafter unless another is named.
    if (!boolean(j["speculative"], "speculative")) r.spec.drafter = DrafterChoice::none;
    else if (r.spec.drafter == DrafterChoice::none) r.spec.drafter = DrafterChoice::model;
  }
  if (given("draft_k")) r.spec.draft_k = static_cast<int>(integer(j["draft_k"], "draft_k", 0, 64));
  if (given("tree")) {
    if (!parse_tree_mode(text(j["tree"], "tree"), &r.spec.tree)) refuse("tree", "'tree' must be chain, dynamic or optimal");
    r.spec.auto_tree = false;
  }
  if (given("node_budget")) r.spec.node_budget = static_cast<int>(integer(j["node_budget"], "node_budget", 1, 127));
  if (given("depth")) r.spec.depth = static_cast<int>(integer(j["depth"], "depth", 1, kMaxDepth));
  if (given("branch")) r.spec.branch = static_cast<int>(integer(j["branch"], "branch", 1, kMaxBranch));
  if (given("decode_mode")) {
    const std::string m = text(j["decode_mode"], "decode_mode");
    if (m == "pipo") r.mode = DecodeMode::pipo;
    else if (m != "lossless") refuse("decode_mode", "'decode_mode' must be lossless or pipo (got '" + m + "')");
  }
  if (given("acceptance_threshold")) {
    if (r.mode != DecodeMode::pipo) {
      refuse("acceptance_threshold", "'acceptance_threshold' applies only to \"decode_mode\": \"pipo\"");
    }
    r.acceptance_threshold = static_cast<float>(number(j["acceptance_threshold"], "acceptance_threshold", 0, 1));
  }
  if (r.mode == DecodeMode::pipo) {
    for (const char* k : {"drafter", "draft_k", "tree", "node_budget", "depth", "branch"}) {
      if (given(k)) {
        refuse(k, "'" + std::string(k) + "' does not apply to \"decode_mode\": \"pipo\" (PIPO drafts with its own head)");
      }
    }
    if (given("speculative") && j["speculative"].get<bool>()) {
      refuse("speculative", "'speculative': true does not apply to \"decode_mode\": \"pipo\" (it is approximate, not verified)");
    }
  }
  return r;
}

}  // namespace

std::variant<ApiRequest, ApiError> parse_api_request(std::string_view body, Endpoint endpoint, const ServeConfig& c,
                                                     int max_output) {
  if (!utf8_valid(body)) {
    return ApiError{400, "the request body is not valid UTF-8", "invalid_request_error", "", "invalid_utf8"};
  }
  const json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) {
    return ApiError{400, "the request body is not valid JSON", "invalid_request_error", "", "invalid_json"};
  }
  try {
    return parse(j, endpoint, c, max_output);
  } catch (const Refusal& r) {
    return r.e;
  } catch (const json::exception& e) {
    return ApiError{400, std::string("malformed request: ") + e.what(), "invalid_request_error", "", "invalid_value"};
  }
}

}  // namespace specchat::serve
