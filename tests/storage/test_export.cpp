// Export to Markdown, HTML and JSON; JSON import (round trip, refused input, unicode).
#include <catch2/catch.hpp>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "storage/conversation_store.h"
#include "storage/export.h"
#include "storage_test_util.h"

using namespace specchat;
using specchat::test::make_message;
using specchat::test::storage_error_kind;

namespace {

const std::string kEmojiCjk = "\xF0\x9F\x9A\x80 rocket, \xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C, "
                              "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF";
const std::string kHostile = "Is <script>alert('x')</script> & \"quoted\" safe?";

// A conversation with every kind of field: a system prompt, a system message, token ids with
// an odd count, drafted flags, stats, a replaced (inactive) reply, a 64-bit tokenizer hash with
// the top bit set, unicode.
int64_t make_rich_conversation(ConversationStore& store) {
  const int64_t c = store.create_conversation("Export \xE2\x9C\x93 test", "You are <terse>.\nSecond line.");
  Message sys = make_message(c, "system", "system note");
  store.add_message(sys);
  Message q = make_message(c, "user", kHostile, {1, 450, 29871});
  q.tokenizer_hash = 0xFFFFFFFFFFFFFFFFull;
  q.template_name = "chatml";
  q.created_ms = 1'700'000'000'100;
  store.add_message(q);
  Message old = make_message(c, "assistant", "OLD BRANCH reply", {7, 8});
  old.created_ms = 1'700'000'000'200;
  const int64_t old_id = store.add_message(old);
  Message a = make_message(c, "assistant", "Answer: " + kEmojiCjk, {29946, 2, 17, 2147483647});
  a.drafted = {1, 1, 0, 1};
  a.tokenizer_hash = 0xFFFFFFFFFFFFFFFFull;
  a.template_name = "chatml";
  a.stats.mode = "speculative";
  a.stats.n_tokens = 4;
  a.stats.tokens_per_s = 123.456;
  a.stats.ttft_ms = 41.3;
  a.stats.acceptance_rate = 0.75;
  a.stats.mean_accepted_length = 2.5;
  a.stats.n_drafted = 4;
  a.stats.n_accepted = 3;
  a.created_ms = 1'700'000'000'300;
  store.add_message_replacing(old_id, a);
  store.add_message(make_message(c, "user", kEmojiCjk));
  return c;
}

bool contains(const std::string& hay, const std::string& needle) {
  return hay.find(needle) != std::string::npos;
}

std::string html_escaped(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '<') out += "&lt;";
    else if (ch == '>') out += "&gt;";
    else if (ch == '&') out += "&amp;";
    else if (ch == '"') out += "&quot;";
    else if (ch == '\'') out += "&#39;";
    else out += ch;
  }
  return out;
}

}  // namespace

TEST_CASE("export markdown: title, system prompt, every active message, stats", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = make_rich_conversation(store);
  const std::string md = export_markdown(*store.conversation(c), store.all_messages(c));

  CHECK(md.rfind("# Export \xE2\x9C\x93 test\n", 0) == 0);
  CHECK(contains(md, "> You are <terse>.\n> Second line.\n"));
  for (const Message& m : store.messages(c)) {
    INFO(m.text);
    CHECK(contains(md, m.text));
  }
  CHECK_FALSE(contains(md, "OLD BRANCH"));  // inactive branches are not part of the chat
  CHECK(contains(md, "**You**"));
  CHECK(contains(md, "**Assistant**"));
  CHECK(contains(md, "123.5 tokens/s"));
  CHECK(contains(md, "TTFT 41.3 ms"));
  CHECK(contains(md, "acceptance 75.0%"));
  CHECK(contains(md, "3 of 4 tokens from accepted drafts"));
  CHECK(contains(md, kEmojiCjk));
}

TEST_CASE("export html: self-contained, escaped, every active message", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = make_rich_conversation(store);
  const std::string html = export_html(*store.conversation(c), store.all_messages(c));

  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(contains(html, "<meta charset=\"utf-8\">"));
  CHECK(contains(html, "<style>"));
  CHECK_FALSE(contains(html, "<script"));  // the message's <script> is text, not markup
  CHECK(contains(html, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quoted&quot;"));
  CHECK(contains(html, "You are &lt;terse&gt;."));
  // No external resources: nothing fetched from anywhere.
  for (const char* s : {"http://", "https://", "src=", "<link", "url(", "@import"}) {
    INFO(s);
    CHECK_FALSE(contains(html, s));
  }
  for (const Message& m : store.messages(c)) {
    INFO(m.text);
    CHECK(contains(html, html_escaped(m.text)));
  }
  CHECK_FALSE(contains(html, "OLD BRANCH"));
  CHECK(contains(html, "123.5 tokens/s"));
  CHECK(contains(html, "3 of 4 tokens from accepted drafts"));
  CHECK(contains(html, kEmojiCjk));
}

TEST_CASE("export json: format, version, every field of every message", "[unit]") {
  ConversationStore store(":memory:");
  const int64_t c = make_rich_conversation(store);
  const auto all = store.all_messages(c);
  const auto doc = nlohmann::json::parse(export_json(*store.conversation(c), all));

  CHECK(doc["format"] == "specchat-conversation");
  CHECK(doc["version"] == 2);
  CHECK(doc["conversation"]["title"] == "Export \xE2\x9C\x93 test");
  CHECK(doc["conversation"]["created_ms"] == store.conversation(c)->created_ms);
  REQUIRE(doc["messages"].size() == all.size());  // inactive branch included
  const auto& a = doc["messages"][3];
  CHECK(a["role"] == "assistant");
  CHECK(a["token_ids"] == nlohmann::json({29946, 2, 17, 2147483647}));  // unpadded
  CHECK(a["drafted"] == nlohmann::json({1, 1, 0, 1}));
  CHECK(a["tokenizer_hash"] == "18446744073709551615");  // decimal string, all 64 bits
  CHECK(a["template_name"] == "chatml");
  CHECK(a["stats"]["tokens_per_s"] == 123.456);
  CHECK(a["stats"]["n_accepted"] == 3);
  CHECK(a["active"] == true);
  CHECK(a["created_ms"] == 1'700'000'000'300);
  CHECK(doc["messages"][1]["token_ids"] == nlohmann::json({1, 450, 29871}));  // odd: no pad
  CHECK(doc["messages"][2]["active"] == false);
  // The tree: the old reply and its replacement both follow the question (index 1).
  CHECK(doc["messages"][0]["parent"].is_null());
  CHECK(doc["messages"][1]["parent"] == 0);
  CHECK(doc["messages"][2]["parent"] == 1);
  CHECK(doc["messages"][3]["parent"] == 1);
  CHECK(doc["messages"][4]["parent"] == 3);
}

TEST_CASE("json round trip: export, import, export again gives the same conversation", "[unit]") {
  ConversationStore src(":memory:");
  const int64_t c = make_rich_conversation(src);
  const auto conv = *src.conversation(c);
  const auto all = src.all_messages(c);
  const std::string first = export_json(conv, all);

  ConversationStore dst(":memory:");
  dst.create_conversation("already here");  // so the imported ids differ from the source's
  const int64_t id = import_json(dst, first);
  CHECK(id != c);
  const auto conv2 = dst.conversation(id);
  REQUIRE(conv2);
  const auto all2 = dst.all_messages(id);
  CHECK(export_json(*conv2, all2) == first);  // byte for byte: the JSON carries no ids

  CHECK(conv2->title == conv.title);
  CHECK(conv2->system_prompt == conv.system_prompt);
  CHECK(conv2->created_ms == conv.created_ms);
  CHECK(conv2->updated_ms == conv.updated_ms);
  REQUIRE(all2.size() == all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    INFO("message " << i);
    CHECK(all2[i].role == all[i].role);
    CHECK(all2[i].text == all[i].text);
    CHECK(all2[i].token_ids == all[i].token_ids);
    CHECK(all2[i].drafted == all[i].drafted);
    CHECK(all2[i].tokenizer_hash == all[i].tokenizer_hash);
    CHECK(all2[i].template_name == all[i].template_name);
    CHECK(all2[i].active == all[i].active);
    CHECK(all2[i].created_ms == all[i].created_ms);
    CHECK(all2[i].stats.mode == all[i].stats.mode);
    CHECK(all2[i].stats.n_tokens == all[i].stats.n_tokens);
    CHECK(all2[i].stats.tokens_per_s == all[i].stats.tokens_per_s);
    CHECK(all2[i].stats.ttft_ms == all[i].stats.ttft_ms);
    CHECK(all2[i].stats.acceptance_rate == all[i].stats.acceptance_rate);
    CHECK(all2[i].stats.mean_accepted_length == all[i].stats.mean_accepted_length);
    CHECK(all2[i].stats.n_drafted == all[i].stats.n_drafted);
    CHECK(all2[i].stats.n_accepted == all[i].stats.n_accepted);
  }
  // The Markdown of the copy is the Markdown of the original.
  CHECK(export_markdown(*conv2, all2) == export_markdown(conv, all));
  CHECK(all2[3].text == "Answer: " + kEmojiCjk);  // unicode survives
}

TEST_CASE("json import: malformed or unsupported input is refused and stores nothing", "[unit]") {
  ConversationStore src(":memory:");
  const int64_t c = make_rich_conversation(src);
  const std::string good = export_json(*src.conversation(c), src.all_messages(c));
  const auto good_doc = nlohmann::json::parse(good);

  // Each case: a change to the good document, and the JSON path the message must name.
  struct Case {
    const char* name;
    std::function<void(nlohmann::json&)> edit;
    const char* path;
  };
  const std::vector<Case> cases = {
      {"wrong format", [](auto& d) { d["format"] = "other-app"; }, "$.format"},
      {"missing format", [](auto& d) { d.erase("format"); }, "$.format"},
      {"version 3", [](auto& d) { d["version"] = 3; }, "$.version"},
      {"parent not earlier", [](auto& d) { d["messages"][1]["parent"] = 1; }, "$.messages[1].parent"},
      {"parent negative", [](auto& d) { d["messages"][1]["parent"] = -1; }, "$.messages[1].parent"},
      {"parent not an index", [](auto& d) { d["messages"][1]["parent"] = "0"; }, "$.messages[1].parent"},
      {"two active at one place", [](auto& d) { d["messages"][2]["active"] = true; }, "$.messages[3].active"},
      {"version as string", [](auto& d) { d["version"] = "1"; }, "$.version"},
      {"messages not an array", [](auto& d) { d["messages"] = 5; }, "$.messages"},
      {"conversation missing", [](auto& d) { d.erase("conversation"); }, "$.conversation"},
      {"title not a string", [](auto& d) { d["conversation"]["title"] = 3; }, "$.conversation.title"},
      {"negative token id", [](auto& d) { d["messages"][1]["token_ids"][1] = -3; },
       "$.messages[1].token_ids[1]"},
      {"token id above int32", [](auto& d) { d["messages"][1]["token_ids"][0] = 2147483648LL; },
       "$.messages[1].token_ids[0]"},
      {"fractional token id", [](auto& d) { d["messages"][1]["token_ids"][0] = 1.5; },
       "$.messages[1].token_ids[0]"},
      {"drafted length mismatch", [](auto& d) { d["messages"][3]["drafted"] = {1, 0}; },
       "$.messages[3].drafted"},
      {"drafted value 2", [](auto& d) { d["messages"][3]["drafted"][2] = 2; }, "$.messages[3].drafted[2]"},
      {"unknown role", [](auto& d) { d["messages"][0]["role"] = "robot"; }, "$.messages[0].role"},
      {"missing text", [](auto& d) { d["messages"][0].erase("text"); }, "$.messages[0].text"},
      {"hash not decimal", [](auto& d) { d["messages"][1]["tokenizer_hash"] = "0x12"; },
       "$.messages[1].tokenizer_hash"},
      {"hash over 64 bits", [](auto& d) { d["messages"][1]["tokenizer_hash"] = "18446744073709551616"; },
       "$.messages[1].tokenizer_hash"},
      {"active not bool", [](auto& d) { d["messages"][2]["active"] = 0; }, "$.messages[2].active"},
      {"stats not an object", [](auto& d) { d["messages"][3]["stats"] = "fast"; }, "$.messages[3].stats"},
      {"negative created_ms", [](auto& d) { d["messages"][3]["created_ms"] = -1; },
       "$.messages[3].created_ms"},
  };
  ConversationStore dst(":memory:");
  for (const Case& k : cases) {
    INFO(k.name);
    nlohmann::json d = good_doc;
    k.edit(d);
    std::string msg;
    CHECK(storage_error_kind([&] { import_json(dst, d.dump()); }, &msg) == "invalid");
    INFO(msg);
    CHECK(contains(msg, k.path));
  }
  for (const char* text : {"", "{", "[1, 2]", "null", "{\"format\": \"specchat-conversation\"", "\xFF\xFE"}) {
    INFO(text);
    CHECK(storage_error_kind([&] { import_json(dst, text); }) == "invalid");
  }
  CHECK(dst.list_conversations().empty());  // nothing stored by any refused import

  import_json(dst, good);  // and the untouched document imports
  CHECK(dst.list_conversations().size() == 1);
}

TEST_CASE("json import: optional fields default, unknown keys ignored", "[unit]") {
  const std::string minimal = R"({"format": "specchat-conversation", "version": 1, "future_key": [1],
    "conversation": {}, "messages": [{"role": "user", "text": "hi \u4f60\u597d \ud83d\ude80"}]})";
  const ImportedConversation imp = parse_conversation_json(minimal);
  CHECK(imp.conversation.title.empty());
  REQUIRE(imp.messages.size() == 1);
  CHECK(imp.messages[0].text == "hi \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x9A\x80");  // \u escapes too
  CHECK(imp.messages[0].token_ids.empty());
  CHECK(imp.messages[0].active);
  CHECK(imp.messages[0].tokenizer_hash == 0);

  ConversationStore store(":memory:");
  const int64_t id = import_json(store, minimal);
  const auto conv = store.conversation(id);
  REQUIRE(conv);
  CHECK(conv->created_ms > 1'600'000'000'000);  // absent times become "now"
  CHECK(store.messages(id).at(0).text == imp.messages[0].text);
}

TEST_CASE("export markdown: single newlines stay line breaks, fenced code stays as typed", "[unit]") {
  // Issue 12: Markdown joins lines separated by one newline into one paragraph, so a poem or an
  // address typed on several lines came out on one.
  ConversationStore store(":memory:");
  const int64_t c = store.create_conversation("lines");
  Message m;
  m.conversation_id = c;
  m.role = "user";
  m.text = "roses are red\nviolets are blue\n\nnew paragraph\n```\ncode line 1\ncode line 2\n```\nafter";
  store.add_message(m);
  const std::string md = export_markdown(*store.conversation(c), store.all_messages(c));
  CHECK(contains(md, "roses are red  \nviolets are blue\n\nnew paragraph\n```\ncode line 1\ncode line 2\n```\nafter"));
}

TEST_CASE("json import: a version 1 file (no parents) keeps its active path and branches", "[unit]") {
  // Written by a build before branches were a tree: "active" meant "on the active path".
  const std::string v1 = R"({"format": "specchat-conversation", "version": 1, "conversation": {"title": "old"},
    "messages": [{"role": "user", "text": "q1", "active": true},
                 {"role": "assistant", "text": "a1", "active": false},
                 {"role": "assistant", "text": "a1b", "active": true},
                 {"role": "user", "text": "q2", "active": true},
                 {"role": "assistant", "text": "a2", "active": true}]})";
  ConversationStore store(":memory:");
  const int64_t id = import_json(store, v1);
  std::vector<std::string> path;
  for (const Message& m : store.messages(id)) path.push_back(m.text);
  CHECK(path == std::vector<std::string>{"q1", "a1b", "q2", "a2"});
  const auto alts = store.path_alternatives(id);
  REQUIRE(alts.size() == 1);
  CHECK(alts[0].second.size() == 2);
  // Exported again, it is a version 2 file with the same tree.
  const auto doc = nlohmann::json::parse(export_json(*store.conversation(id), store.all_messages(id)));
  CHECK(doc["version"] == 2);
  CHECK(doc["messages"][1]["parent"] == 0);
  CHECK(doc["messages"][2]["parent"] == 0);
  CHECK(doc["messages"][3]["parent"] == 2);
}

TEST_CASE("json import: hostile documents (deep nesting, huge numbers, a NUL byte) are refused, not a crash", "[unit]") {
  // Found by a fresh-clone check: a value nested 100,000 deep crashed the import (stack overflow
  // printing it in the error), a number beyond double range escaped as another exception.
  ConversationStore store(":memory:");
  const std::string head = R"({"format": "specchat-conversation", "version": 2, "conversation": {}, "messages": [)"
                           R"({"role": "user", "text": "a"}, {"role": "user", "text": "b", "active": false, "parent": )";
  std::string deep = head;
  for (int i = 0; i < 100000; ++i) deep += '[';
  for (int i = 0; i < 100000; ++i) deep += ']';
  deep += "}]}";
  std::string why;
  CHECK(storage_error_kind([&] { import_json(store, deep); }, &why) == "invalid");
  CHECK(contains(why, "nested"));
  CHECK(storage_error_kind([&] { import_json(store, head + "1e400}]}"); }) == "invalid");
  std::string nul = head + "0}]}";
  nul += std::string(1, '\0') + "garbage";
  CHECK(storage_error_kind([&] { import_json(store, nul); }, &why) == "invalid");
  CHECK(contains(why, "NUL"));
  CHECK(store.list_conversations().empty());
  CHECK_NOTHROW(import_json(store, head + "0}]}"));  // the same document, well-formed
}

TEST_CASE("json round trip: a PIPO reply's latents travel with it", "[unit][pipo]") {
  // Regression: export left message_latents behind, so an imported PIPO conversation could not
  // continue its latent-format history (it re-prefilled).
  ConversationStore src(":memory:");
  const int64_t c = make_rich_conversation(src);
  const auto all = src.all_messages(c);
  const MessageLatents lat{"rel-7", {1, 450, 29871, kPairPad, 29946, 2, 17, 2147483647}};
  src.set_message_latents(all[3].id, lat);
  const std::string first = export_json(*src.conversation(c), all, src.conversation_latents(c));
  const auto doc = nlohmann::json::parse(first);
  CHECK(doc["messages"][3]["latents"]["release"] == "rel-7");
  CHECK(doc["messages"][3]["latents"]["pairs"] == nlohmann::json(lat.pairs));
  CHECK_FALSE(doc["messages"][2].contains("latents"));
  // Without latents the document is what it was.
  CHECK(export_json(*src.conversation(c), all) == export_json(*src.conversation(c), all, {}));
  CHECK_FALSE(nlohmann::json::parse(export_json(*src.conversation(c), all))["messages"][3].contains("latents"));

  ConversationStore dst(":memory:");
  dst.create_conversation("already here");
  const int64_t id = import_json(dst, first);
  const auto all2 = dst.all_messages(id);
  REQUIRE(all2.size() == all.size());
  const auto got = dst.message_latents(all2[3].id);
  REQUIRE(got);
  CHECK(got->release == "rel-7");
  CHECK(got->pairs == lat.pairs);
  CHECK_FALSE(dst.message_latents(all2[1].id));
  CHECK(dst.conversation_latents(id).size() == 1);
  CHECK(export_json(*dst.conversation(id), all2, dst.conversation_latents(id)) == first);

  // Bad latents are refused with their path, and nothing is stored.
  struct Case {
    const char* name;
    std::function<void(nlohmann::json&)> edit;
    const char* path;
  };
  const std::vector<Case> cases = {
      {"latents not an object", [](auto& d) { d["messages"][3]["latents"] = 5; }, "$.messages[3].latents"},
      {"empty release", [](auto& d) { d["messages"][3]["latents"]["release"] = ""; }, "$.messages[3].latents.release"},
      {"release missing", [](auto& d) { d["messages"][3]["latents"].erase("release"); }, "$.messages[3].latents.release"},
      {"odd pairs", [](auto& d) { d["messages"][3]["latents"]["pairs"].erase(0); }, "$.messages[3].latents.pairs"},
      {"empty pairs", [](auto& d) { d["messages"][3]["latents"]["pairs"] = nlohmann::json::array(); },
       "$.messages[3].latents.pairs"},
      {"PAD in a first slot", [](auto& d) { d["messages"][3]["latents"]["pairs"][2] = -1; },
       "$.messages[3].latents.pairs"},
      {"negative id", [](auto& d) { d["messages"][3]["latents"]["pairs"][1] = -5; }, "$.messages[3].latents.pairs[1]"},
      {"id not an integer", [](auto& d) { d["messages"][3]["latents"]["pairs"][1] = "x"; },
       "$.messages[3].latents.pairs[1]"},
  };
  ConversationStore bad(":memory:");
  for (const Case& k : cases) {
    INFO(k.name);
    nlohmann::json d = doc;
    k.edit(d);
    std::string msg;
    CHECK(storage_error_kind([&] { import_json(bad, d.dump()); }, &msg) == "invalid");
    INFO(msg);
    CHECK(contains(msg, k.path));
  }
  CHECK(bad.list_conversations().empty());
}
