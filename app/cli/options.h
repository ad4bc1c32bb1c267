// Command-line options shared by the specchat-cli subcommands.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/generator.h"
#include "engine/model_pair.h"
#include "engine/runtime/spec_settings.h"

namespace specchat::cli {

// The flags as given. The speculative ones map into a SpecSettings (spec_settings()), whose
// defaults they take: one set of defaults for the CLI and the app (engine/runtime/spec_settings.h).
struct CommonOptions {
  std::string model;            // target GGUF; empty = bundled
  std::string draft;            // draft GGUF, "bundled", "none", "ngram"; empty = automatic (apply_draft)
  int draft_k = SpecSettings{}.draft_k;
  std::string drafter = drafter_choice_name(SpecSettings{}.drafter);  // model | ngram | block | mtp | none
  // Drafters that read the target's hidden states (app/cli/feature_drafters.h): the DFlash block
  // drafter GGUF (--block-drafter) and the MTP head GGUF (--mtp); empty = not given.
  std::string block_drafter;
  std::string mtp;
  // PIPO dual-end mode (docs/design/pipo.md; APPROXIMATE): a release folder or its pipo.json,
  // "bundled" = resources/models/pipo; empty = off. Threshold < 0 = the release's recommended.
  std::string pipo;
  float pipo_threshold = -1.0f;
  int pipo_fidelity = 0;  // > 0: the fidelity gauge on one step in N (loads the plain target)
  std::string tree = tree_mode_name(SpecSettings{}.tree);             // chain | dynamic | optimal | auto
  int node_budget = SpecSettings{}.node_budget;
  // --endpoint: the drafting options given (drafter, draft_k, tree, node_budget as our server's
  // request fields, app/serve/api_request.h), sent with a speculative request; null = none given
  // (nothing extra is sent: other OpenAI-compatible servers may refuse unknown fields).
  nlohmann::json remote_spec;
  int depth = SpecSettings{}.depth;
  int branch = SpecSettings{}.branch;
  float temp = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int n = 128;
  int n_ctx = 0;
  int threads = 0;
  std::string backend = "cpu";      // cpu | cuda: where the target runs
  std::string draft_backend;        // cpu | cuda; empty = as --backend
  bool no_backoff = false;          // --no-draft-backoff: draft every step even when drafts keep failing
  std::string kv_type = "f16";      // --kv-type: element type of the KV cache rows, f16 | f32
  std::string activations = "q8";  // --activations: q8 | f32 (cpu::Activations)
  std::string prompt;
  std::string chat;
  std::string system;
  std::string chat_template;        // --chat-template: a chat_template_names() entry, "" = the file's
  std::string messages_file;        // --messages: a JSON conversation (read_messages_file)
  std::vector<ChatMessage> messages;  // its messages, read by main before the command runs
  std::vector<std::string> stop;
  bool json = false;
  bool prompt_given = false, chat_given = false;
  // generate --endpoint: an OpenAI-compatible server instead of the local engine (app/cli/remote.h)
  std::string endpoint;
  std::string api_key;     // its key (else SPECCHAT_API_KEY)
  std::string model_name;  // the "model" field sent to it (--remote-model)
  std::string baseline_endpoint;  // compare: where the baseline runs (default: endpoint)
};

// Adds --endpoint, --api-key and --remote-model (generate and compare); with `compare` also
// --baseline-endpoint.
void add_remote_options(CLI::App& cmd, CommonOptions& o, bool compare = false);

// Checks that an option's text is an integer in [0, 2^64 - 1] written in full (CLI11 alone took
// "-1" as 2^64 - 1 and an overflowing value silently): for seeds.
const CLI::Validator& uint64_validator();

// Reads a conversation for --messages: a JSON file holding either an array of
// {"role": "system"|"user"|"assistant", "content": string} objects (the OpenAI chat format) or an
// object with such an array under "messages". The conversation is rendered with the model's chat
// template and a generation prompt, so the reply answers its last turn.
// Errors: std::runtime_error naming the file and the fault (unreadable, not JSON, no messages,
// a message without a string role/content, an unknown role).
std::vector<ChatMessage> read_messages_file(const std::string& path);

// A CLI11 check refusing NaN and infinities (CLI::Range lets NaN through: every comparison
// with NaN is false). Pair it with a CLI::Range.
extern const CLI::Validator kFinite;

// Adds the shared flags to a subcommand.
void add_common_options(CLI::App& cmd, CommonOptions& o);
// Adds --kv-type and --no-draft-backoff (part of add_common_options; bench adds them alone).
void add_engine_options(CLI::App& cmd, CommonOptions& o);

// Why the options given to `sub` (generate, compare or chat) cannot run as asked, or "" when
// they can: a drafter option with --pipo (PIPO drafts with its release's own MTP head and pair
// compressor), --draft none / ngram with a --drafter naming another drafter, a draft model
// (--draft FILE or bundled) with a --drafter other than model, --api-key / --remote-model without
// an endpoint, --system with a raw --prompt. Call before --draft's name is copied into
// o.drafter. Never throws.
std::string refused_combination(const CLI::App& sub, const CommonOptions& o);

// Copies --backend / --draft-backend, --kv-type and --chat-template into the load options.
void apply_backends(const CommonOptions& o, PairOptions& po);

// "f16" or "f32" (--kv-type, the server's kv_type) as a DType; std::invalid_argument otherwise.
DType parse_kv_type(const std::string& name);
// "q8" or "f32" (--activations) as cpu::Activations; std::invalid_argument otherwise.
cpu::Activations parse_activations(const std::string& name);

// The draft model to load when a model drafter is wanted (`need_draft`): --draft's file, the
// bundled draft for "bundled" or when neither --model nor --draft is given, and with --model but
// no --draft a compatible draft picked beside the target (PairOptions::auto_draft, pick_draft).
void apply_draft(const CommonOptions& o, bool need_draft, PairOptions& po);

// After loading with auto_draft: prints which drafter was chosen to stderr ("draft: ...") and,
// when no compatible draft model was found, switches `o` to the n-gram drafter.
void use_draft_choice(const ModelPair& pair, CommonOptions& o);

// The speculative settings of --drafter, --tree (auto: auto_tree), --draft-k, --node-budget,
// --depth and --branch. Unknown names (CLI11 refuses them) keep the defaults.
SpecSettings spec_settings(const CommonOptions& o);

// The request the options describe with `draft_k` drafted tokens per step (0 = baseline): the
// sampling, -n and --stop, and to_spec_config(spec_settings(o)) unplanned; plan_tree
// (app/cli/calibrate.h) then plans it for the loaded pair.
GenerateRequest make_request(const CommonOptions& o, std::vector<int32_t> prompt, int draft_k);

}  // namespace specchat::cli
