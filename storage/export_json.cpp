// JSON export and import of one conversation (format in export.h). The parser checks every
// field itself, naming the JSON path of what is wrong, so a bad file never reaches the store.
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "storage/export.h"
#include "storage/rows.h"

namespace specchat {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;  // keys in the order written: readable files

constexpr const char* kFormat = "specchat-conversation";
constexpr int kVersion = 2;
constexpr int kLegacyVersion = 1;  // no "parent"; "active" = on the active path

// ---- export -------------------------------------------------------------------------------

// `parent`: the index of m's parent in the exported list, or null.
OrderedJson message_to_json(const Message& m, const OrderedJson& parent) {
  // The store's own stats encoding, so the two never disagree (keys in alphabetical order).
  const Json stored_stats = rows::stats_to_json(m.stats);
  OrderedJson stats = OrderedJson::object();
  for (const auto& [k, v] : stored_stats.items()) stats[k] = v;
  OrderedJson drafted = OrderedJson::array();
  for (uint8_t d : m.drafted) drafted.push_back(int{d});
  return {{"role", m.role},
          {"text", m.text},
          {"token_ids", m.token_ids},
          {"drafted", drafted},
          {"tokenizer_hash", std::to_string(m.tokenizer_hash)},
          {"template_name", m.template_name},
          {"stats", stats},
          {"parent", parent},
          {"active", m.active},
          {"finish", m.finish},
          {"created_ms", m.created_ms}};
}

// ---- import -------------------------------------------------------------------------------

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
  throw StorageError("invalid", "conversation JSON: " + path + ": " + what);
}

std::string member_path(const std::string& parent, const char* key) { return parent + "." + key; }
std::string index_path(const std::string& parent, size_t i) {
  return parent + "[" + std::to_string(i) + "]";
}

const char* type_name(const Json& j) { return j.type_name(); }

// A value for an error message: a short scalar as written, anything else by its type (printing
// an arbitrary value could recurse as deep as the document nests, or run to megabytes).
std::string brief(const Json& j) {
  if (j.is_structured()) return std::string("an ") + (j.is_array() ? "array" : "object");
  std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// Documents nest no deeper than this (a conversation needs 4 levels); deeper is refused while
// parsing, before anything walks the value.
constexpr int kMaxDepth = 32;

struct TooDeep {};

// The member `key` of object `obj`, or nullptr when absent (and not `required`).
const Json* member(const Json& obj, const std::string& path, const char* key, bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) invalid(member_path(path, key), "missing");
    return nullptr;
  }
  return &*it;
}

std::string get_string(const Json& obj, const std::string& path, const char* key, bool required) {
  const Json* v = member(obj, path, key, required);
  if (!v) return "";
  if (!v->is_string())
    invalid(member_path(path, key), std::string("expected a string, found ") + type_name(*v));
  return v->get<std::string>();
}

// An integer in [lo, hi]; `def` when absent.
int64_t get_int(const Json& obj, const std::string& path, const char* key, int64_t lo, int64_t hi,
                int64_t def) {
  const Json* v = member(obj, path, key, false);
  if (!v) return def;
  const std::string p = member_path(path, key);
  if (!v->is_number_integer()) invalid(p, std::string("expected an integer, found ") + type_name(*v));
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
    invalid(p, std::to_string(v->get<uint64_t>()) + " is out of range");
  const auto x = v->get<int64_t>();
  if (x < lo || x > hi) invalid(p, std::to_string(x) + " is out of range " + std::to_string(lo) +
                                       ".." + std::to_string(hi));
  return x;
}

double get_number(const Json& obj, const std::string& path, const char* key) {
  const Json* v = member(obj, path, key, false);
  if (!v) return 0;
  if (!v->is_number())
    invalid(member_path(path, key), std::string("expected a number, found ") + type_name(*v));
  const double x = v->get<double>();
  if (!std::isfinite(x)) invalid(member_path(path, key), "is not finite");
  return x;
}

const Json& get_array(const Json& obj, const std::string& path, const char* key, bool required) {
  static const Json kEmpty = Json::array();
  const Json* v = member(obj, path, key, required);
  if (!v) return kEmpty;
  if (!v->is_array())
    invalid(member_path(path, key), std::string("expected an array, found ") + type_name(*v));
  return *v;
}

uint64_t parse_hash(const Json& obj, const std::string& path) {
  const std::string s = get_string(obj, path, "tokenizer_hash", false);
  if (s.empty()) return 0;
  uint64_t h = 0;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), h);
  if (r.ec != std::errc() || r.ptr != s.data() + s.size())
    invalid(member_path(path, "tokenizer_hash"),
            "'" + s + "' is not a decimal 64-bit unsigned integer");
  return h;
}

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr int64_t kMaxI64 = std::numeric_limits<int64_t>::max();

MessageStats parse_stats(const Json& obj, const std::string& parent) {
  MessageStats s;
  const Json* v = member(obj, parent, "stats", false);
  if (!v) return s;
  const std::string path = member_path(parent, "stats");
  if (!v->is_object()) invalid(path, std::string("expected an object, found ") + type_name(*v));
  s.mode = get_string(*v, path, "mode", false);
  s.n_tokens = static_cast<int>(get_int(*v, path, "n_tokens", 0, kMaxInt, 0));
  s.tokens_per_s = get_number(*v, path, "tokens_per_s");
  s.ttft_ms = get_number(*v, path, "ttft_ms");
  s.acceptance_rate = get_number(*v, path, "acceptance_rate");
  s.mean_accepted_length = get_number(*v, path, "mean_accepted_length");
  s.n_drafted = static_cast<int>(get_int(*v, path, "n_drafted", 0, kMaxInt, 0));
  s.n_accepted = static_cast<int>(get_int(*v, path, "n_accepted", 0, kMaxInt, 0));
  return s;
}

Message parse_message(const Json& j, const std::string& path) {
  if (!j.is_object()) invalid(path, std::string("expected an object, found ") + type_name(j));
  Message m;
  m.role = get_string(j, path, "role", true);
  if (m.role != "system" && m.role != "user" && m.role != "assistant")
    invalid(member_path(path, "role"), "'" + m.role + "' is not system, user or assistant");
  m.text = get_string(j, path, "text", true);

  const std::string ids_path = member_path(path, "token_ids");
  const Json& ids = get_array(j, path, "token_ids", false);
  m.token_ids.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const Json& t = ids[i];
    const bool ok = t.is_number_integer() &&
                    (t.is_number_unsigned() ? t.get<uint64_t>() <= INT32_MAX
                                            : t.get<int64_t>() >= 0 && t.get<int64_t>() <= INT32_MAX);
    if (!ok) invalid(index_path(ids_path, i), brief(t) + " is not a token id (0..2147483647)");
    m.token_ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }

  const std::string drafted_path = member_path(path, "drafted");
  const Json& drafted = get_array(j, path, "drafted", false);
  if (!drafted.empty() && drafted.size() != m.token_ids.size())
    invalid(drafted_path, "has " + std::to_string(drafted.size()) + " entries for " +
                              std::to_string(m.token_ids.size()) +
                              " token ids (must be one per token, or none)");
  m.drafted.reserve(drafted.size());
  for (size_t i = 0; i < drafted.size(); ++i) {
    const Json& d = drafted[i];
    if (!d.is_number_integer() || (d != 0 && d != 1))
      invalid(index_path(drafted_path, i), brief(d) + " is not 0 or 1");
    m.drafted.push_back(static_cast<uint8_t>(d.get<int>()));
  }

  m.tokenizer_hash = parse_hash(j, path);
  m.template_name = get_string(j, path, "template_name", false);
  m.stats = parse_stats(j, path);
  if (const Json* a = member(j, path, "active", false)) {
    if (!a->is_boolean())
      invalid(member_path(path, "active"), std::string("expected true or false, found ") + type_name(*a));
    m.active = a->get<bool>();
  }
  m.finish = get_string(j, path, "finish", false);
  if (!is_finish_reason(m.finish))
    invalid(member_path(path, "finish"), "'" + m.finish + "' is not length, eos, stop, cancelled or context_full");
  m.created_ms = get_int(j, path, "created_ms", 0, kMaxI64, 0);
  return m;
}

// A message's optional "latents" (a PIPO reply's pair sequence); nullopt when absent.
std::optional<MessageLatents> parse_latents(const Json& msg, const std::string& parent) {
  const Json* v = member(msg, parent, "latents", false);
  if (!v) return std::nullopt;
  const std::string path = member_path(parent, "latents");
  if (!v->is_object()) invalid(path, std::string("expected an object, found ") + type_name(*v));
  MessageLatents l;
  l.release = get_string(*v, path, "release", true);
  if (l.release.empty()) invalid(member_path(path, "release"), "is empty (the PIPO release that made the pairs)");
  const std::string pairs_path = member_path(path, "pairs");
  const Json& pairs = get_array(*v, path, "pairs", true);
  l.pairs.reserve(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    const Json& t = pairs[i];
    const bool ok = t.is_number_integer() && (t.is_number_unsigned() ? t.get<uint64_t>() <= INT32_MAX
                                                                     : t.get<int64_t>() >= -1 && t.get<int64_t>() <= INT32_MAX);
    if (!ok) invalid(index_path(pairs_path, i), brief(t) + " is not a token id (0..2147483647) or the PAD (-1)");
    l.pairs.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  if (const std::string bad = rows::latent_pairs_problem(l.pairs); !bad.empty()) invalid(pairs_path, bad);
  return l;
}

// The checked document (after parsing): parse_conversation_json's second half.
ImportedConversation parse_document(const Json& doc);

}  // namespace

std::string export_json(const Conversation& c, const std::vector<Message>& messages,
                        const std::map<int64_t, MessageLatents>& latents) {
  OrderedJson doc;
  doc["format"] = kFormat;
  doc["version"] = kVersion;
  doc["conversation"] = {{"title", c.title},
                         {"system_prompt", c.system_prompt},
                         {"created_ms", c.created_ms},
                         {"updated_ms", c.updated_ms}};
  OrderedJson ms = OrderedJson::array();
  std::unordered_map<int64_t, size_t> index_of;
  for (size_t i = 0; i < messages.size(); ++i) index_of.emplace(messages[i].id, i);
  for (const Message& m : messages) {
    const auto p = m.parent_id != 0 ? index_of.find(m.parent_id) : index_of.end();
    OrderedJson j = message_to_json(m, p != index_of.end() ? OrderedJson(p->second) : OrderedJson(nullptr));
    if (const auto l = latents.find(m.id); l != latents.end()) {
      j["latents"] = {{"release", l->second.release}, {"pairs", l->second.pairs}};
    }
    ms.push_back(std::move(j));
  }
  doc["messages"] = std::move(ms);
  return doc.dump(2, ' ', /*ensure_ascii=*/false, OrderedJson::error_handler_t::replace) + "\n";
}

ImportedConversation parse_conversation_json(const std::string& json) {
  // nlohmann stops at a NUL byte as at the end of the text: what follows would go unread.
  if (json.find('\0') != std::string::npos) invalid("$", "contains a NUL byte (not a JSON text)");
  Json doc;
  try {
    doc = Json::parse(json, [](int depth, Json::parse_event_t, Json&) {
      if (depth > kMaxDepth) throw TooDeep{};
      return true;
    });
  } catch (const TooDeep&) {
    invalid("$", "nested deeper than " + std::to_string(kMaxDepth) + " levels");
  } catch (const Json::exception& e) {  // parse_error, and out_of_range for a number like 1e400
    invalid("$", std::string("not valid JSON (") + e.what() + ")");
  }
  try {
    return parse_document(doc);
  } catch (const Json::exception& e) {  // a type or range the checks below did not foresee
    invalid("$", std::string("malformed (") + e.what() + ")");
  }
}

namespace {

ImportedConversation parse_document(const Json& doc) {
  if (!doc.is_object()) invalid("$", std::string("expected an object, found ") + type_name(doc));
  const std::string format = get_string(doc, "$", "format", true);
  if (format != kFormat)
    invalid("$.format", "'" + format + "' is not a SpecChat conversation ('" + kFormat + "')");
  const Json* version = member(doc, "$", "version", true);
  if (!version->is_number_integer() || (*version != kVersion && *version != kLegacyVersion))
    invalid("$.version", "unsupported version " + brief(*version) + " (this build reads versions " +
                             std::to_string(kLegacyVersion) + " and " + std::to_string(kVersion) + ")");
  const bool tree = *version == kVersion;

  ImportedConversation out;
  const Json* conv = member(doc, "$", "conversation", true);
  if (!conv->is_object())
    invalid("$.conversation", std::string("expected an object, found ") + type_name(*conv));
  out.conversation.title = get_string(*conv, "$.conversation", "title", false);
  out.conversation.system_prompt = get_string(*conv, "$.conversation", "system_prompt", false);
  out.conversation.created_ms = get_int(*conv, "$.conversation", "created_ms", 0, kMaxI64, 0);
  out.conversation.updated_ms = get_int(*conv, "$.conversation", "updated_ms", 0, kMaxI64, 0);

  const Json& messages = get_array(doc, "$", "messages", true);
  out.messages.reserve(messages.size());
  std::unordered_set<int64_t> chosen_under;  // parents (index + 1, 0 = none) with an active child
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string path = index_path("$.messages", i);
    Message m = parse_message(messages[i], path);
    if (tree) {
      m.id = static_cast<int64_t>(i) + 1;
      const Json* p = member(messages[i], path, "parent", false);
      if (p && !p->is_null()) {
        const bool earlier = p->is_number_integer() && !p->is_number_float() &&
                             (p->is_number_unsigned() || p->get<int64_t>() >= 0) && p->get<uint64_t>() < i;
        if (!earlier)
          invalid(member_path(path, "parent"), brief(*p) + " is not the index of an earlier message (or null)");
        m.parent_id = static_cast<int64_t>(p->get<uint64_t>()) + 1;
      }
      if (m.active && !chosen_under.insert(m.parent_id).second)
        invalid(member_path(path, "active"), "a second active message after the same parent (one per place)");
    }
    if (auto l = parse_latents(messages[i], path)) out.latents.emplace(static_cast<int64_t>(i) + 1, std::move(*l));
    out.messages.push_back(std::move(m));
  }
  return out;
}

}  // namespace

int64_t import_json(ConversationStore& store, const std::string& json) {
  const ImportedConversation imported = parse_conversation_json(json);
  // Latents are keyed by index + 1: the ids a version-2 list carries and a flat (version-1)
  // list is given by import_conversation.
  return store.import_conversation(imported.conversation, imported.messages, imported.latents);
}

}  // namespace specchat
