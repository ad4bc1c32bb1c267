// Loading a target (and optional draft) with their shared tokenizer: what the CLI and the app
// both do before generating.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/chat_template.h"
#include "engine/generator.h"
#include "engine/model.h"
#include "engine/tokenizer.h"

namespace specchat {

struct PairOptions {
  std::string target_path;     // empty = bundled target
  std::string draft_path;      // empty = no draft model (or, with auto_draft, one picked by pick_draft)
  // With no draft_path: pick a compatible draft beside the target (pick_draft); when none is,
  // the pair has no draft and `draft_choice` says to use the n-gram drafter.
  bool auto_draft = false;
  int n_ctx = 0;               // 0 = target's n_ctx_train
  int n_threads = 0;           // BLAS threads; 0 = all cores
  int n_seq = 1;               // sequences decoded together (KV pool of both models; Engine capacity)
  BackendKind backend = BackendKind::cpu;        // target's backend
  BackendKind draft_backend = BackendKind::cpu;  // draft's backend (may differ: measured choice)
  DType kv_type = DType::f16;  // KV cache rows of both models (LlamaModel::Options::kv_type)
  // Activations of both models' block-type matrices on the CPU (LlamaModel::Options::activations).
  cpu::Activations activations = cpu::Activations::q8;
  // Chat template (chat_template_names()): "" = the one recognised in the target's
  // tokenizer.chat_template; a name = the user's pick, used whatever the file says.
  std::string chat_template;
  // Used, with a notice in ModelPair::warnings, when the file's template is missing or not
  // recognised and the user picked none (the CLI's --chat-template, the app's setting).
  std::string fallback_template = "chatml";
};

// Which drafter a pair uses and why (for a stderr line and the --json "draft_choice" field).
struct DraftChoice {
  std::string drafter = "none";  // "model" or "ngram" or "none"
  std::string path;              // the draft model's file when drafter == "model"
  std::string reason;            // one line, e.g. "smallest compatible .gguf beside the target"
};

// Picks a draft for `target_path` when the user named none (issue 11 item 6): among the other
// `.gguf` files in the target's folder that are smaller than the target, the smallest whose
// architecture and hyper-parameters load (ModelConfig) and whose vocabulary can serve the target
// (check_draft_vocab). Files that fail are skipped (no exception escapes for them). When none
// fits, drafter "ngram" (prompt lookup) with the reason. `target_vocab` is the loaded target's.
DraftChoice pick_draft(const std::string& target_path, const Vocab& target_vocab);

// A loaded pair. Throws GgufError / ModelError / VocabError; errors about the draft say so
// ("draft model <path>: ..."); a refused vocabulary throws VocabError with the reason.
struct ModelPair {
  std::unique_ptr<LlamaModel> target;
  std::unique_ptr<LlamaModel> draft;   // null when no draft
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<std::string> warnings;   // accepted vocabulary differences (B06), a context past
                                       // n_ctx_train, a chat template not recognised
  std::string template_name;           // PairOptions::chat_template, else recognised from the
                                       // target's tokenizer.chat_template, else the fallback
  DraftChoice draft_choice;            // how the draft was chosen (auto_draft), else "given"/"none"

  static ModelPair load(const PairOptions& opt);

  // BOS (when the vocab wants it) + encode(text): the text is plain text, control-token texts
  // in it stay text. Throws GenerationError("empty_prompt") when the result has no tokens.
  std::vector<int32_t> encode_prompt(const std::string& text) const;
  // BOS + the rendered chat (template_name, generation prompt) with the template's markers as
  // control ids and the messages as text (Tokenizer::encode_chat_pieces). When the last message
  // is the assistant's, that reply is continued ("assistant prefill", as llama-server does): its
  // text follows the generation prompt inside its open turn, encoded as a continuation.
  std::vector<int32_t> encode_chat(const std::vector<ChatMessage>& messages) const;
  // render_chat_pieces with template_name and the model's own BOS/EOS texts.
  std::vector<ChatPiece> render(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;
};

// What ModelPair::encode_prompt / encode_chat do, for any model with its tokenizer and template
// (the PIPO backbone, docs/design/pipo.md): [n_tokens] ids, BOS first when the vocabulary adds
// one. Throws GenerationError("empty_prompt") when nothing remains.
std::vector<int32_t> encode_prompt_ids(const Vocab& v, const Tokenizer& tok, const std::string& text);
std::vector<int32_t> encode_chat_ids(const Vocab& v, const Tokenizer& tok, const std::string& template_name,
                                     const std::vector<ChatMessage>& messages);

// The chat template for a target whose tokenizer.chat_template is `file_template`:
// `user_pick` when given (std::invalid_argument if it is not a name), else the recognised family,
// else `fallback` with a notice appended to `warnings` that names it and how to pick another.
std::string choose_chat_template(const std::string& file_template, const std::string& user_pick,
                                 const std::string& fallback, std::vector<std::string>& warnings);

// Where the bundled models live: $SPECCHAT_MODELS, else <exe dir>/../share/specchat/models when
// it holds the target (an installed program, e.g. from the .deb), else the source tree's
// resources/models (development builds), else "resources/models" relative to the working
// directory.
std::string bundled_models_dir();
std::string bundled_target_path();
std::string bundled_draft_path();

}  // namespace specchat
