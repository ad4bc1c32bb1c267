#include "engine/model_pair.h"

#include "kernels/cpu/thread_pool.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <filesystem>

namespace specchat {

namespace fs = std::filesystem;

std::string bundled_models_dir() {
  if (const char* env = std::getenv("SPECCHAT_MODELS")) return env;
  // An installed program uses its own copy first, even on a machine that also holds a source
  // tree at the path compiled in (the packaging test runs the unpacked .deb beside the build).
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path p = exe.parent_path().parent_path() / "share" / "specchat" / "models";
    if (fs::exists(p / "specchat-target.gguf", ec)) return p.string();
  }
#ifdef SPECCHAT_MODELS_DIR
  if (fs::exists(fs::path(SPECCHAT_MODELS_DIR) / "specchat-target.gguf", ec)) return SPECCHAT_MODELS_DIR;
#endif
  return "resources/models";
}

std::string bundled_target_path() { return bundled_models_dir() + "/specchat-target.gguf"; }
std::string bundled_draft_path() { return bundled_models_dir() + "/specchat-draft.gguf"; }

DraftChoice pick_draft(const std::string& target_path, const Vocab& target_vocab) {
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(target_path, ec);
  const uintmax_t target_size = fs::file_size(target_path, ec);
  const fs::path dir = target.parent_path();
  std::vector<std::pair<uintmax_t, fs::path>> candidates;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path p = it->path();
    if (p.extension() != ".gguf" || fs::weakly_canonical(p, ec) == target) continue;
    const uintmax_t size = fs::file_size(p, ec);
    if (ec || size >= target_size) continue;  // a draft is smaller than its target
    candidates.emplace_back(size, p);
  }
  std::sort(candidates.begin(), candidates.end());
  for (const auto& [size, p] : candidates) {
    try {
      const GgufFile f = GgufFile::open(p.string());
      (void)ModelConfig::from_gguf(f);
      if (!check_draft_vocab(target_vocab, Vocab::from_gguf(f)).ok) {
        continue;
      }
      return {"model", p.string(), "smallest compatible .gguf beside the target (of " +
                                       std::to_string(candidates.size()) + " smaller ones)"};
    } catch (const std::exception&) {  // not a model SpecChat runs: try the next
    }
  }
  return {"ngram", "",
          candidates.empty() ? "no smaller .gguf beside the target; using the n-gram drafter"
                             : "none of the " + std::to_string(candidates.size()) +
                                   " smaller .gguf files beside the target can serve it as a draft; using the "
                                   "n-gram drafter"};
}

ModelPair ModelPair::load(const PairOptions& opt) {
  ModelPair mp;
  const std::string tpath = opt.target_path.empty() ? bundled_target_path() : opt.target_path;
  // One CPU thread pool for both models: they run one after the other on the engine thread.
  const auto pool = std::make_shared<cpu::ThreadPool>(opt.n_threads);
  LlamaModel::Options mo;
  mo.n_ctx = opt.n_ctx;
  mo.n_threads = opt.n_threads;
  mo.pool = pool;
  mo.n_seq = opt.n_seq;
  mo.backend = opt.backend;
  mo.kv_type = opt.kv_type;
  mo.activations = opt.activations;
  mp.target = LlamaModel::load(tpath, mo);
  if (opt.n_ctx > mp.target->config().n_ctx_train && mp.target->config().n_ctx_train > 0) {
    mp.warnings.push_back("context " + std::to_string(opt.n_ctx) + " is longer than the model's training context (" +
                          std::to_string(mp.target->config().n_ctx_train) +
                          " tokens): positions past it are untrained and output there is unreliable");
  }
  std::string draft_path = opt.draft_path;
  if (!draft_path.empty()) {
    mp.draft_choice = {"model", draft_path, "given"};
  } else if (opt.auto_draft) {
    mp.draft_choice = pick_draft(tpath, mp.target->vocab());
    if (mp.draft_choice.drafter == "model") draft_path = mp.draft_choice.path;
  }
  if (!draft_path.empty()) {
    try {
      LlamaModel::Options dopt;
      dopt.n_ctx = mp.target->n_ctx();
      dopt.n_threads = opt.n_threads;
      dopt.n_seq = opt.n_seq;
      dopt.pool = pool;
      dopt.backend = opt.draft_backend;
      dopt.kv_type = opt.kv_type;
      dopt.activations = opt.activations;
      mp.draft = LlamaModel::load(draft_path, dopt);
    } catch (const GgufError& e) {
      // Errors from the draft file name it, so the user knows which file is at fault (B19).
      throw GgufError(e.kind(), std::string("draft model: ") + e.what());  // what() names the file
    } catch (const ModelError& e) {
      throw ModelError(std::string("draft model: ") + e.what());
    } catch (const VocabError& e) {
      throw VocabError(std::string("draft model: ") + e.what());
    }
    const VocabCheck vc = check_draft_vocab(mp.target->vocab(), mp.draft->vocab());
    if (!vc.ok) {
      throw VocabError("vocab_mismatch: draft model " + draft_path +
                       " cannot serve target " + tpath + ": " + vc.error);
    }
    mp.warnings.insert(mp.warnings.end(), vc.warnings.begin(), vc.warnings.end());
  }
  mp.tokenizer = std::make_unique<Tokenizer>(mp.target->vocab());
  mp.template_name = choose_chat_template(mp.target->vocab().chat_template, opt.chat_template,
                                          opt.fallback_template, mp.warnings);
  return mp;
}

std::string choose_chat_template(const std::string& file_template, const std::string& user_pick,
                                 const std::string& fallback, std::vector<std::string>& warnings) {
  const auto names = chat_template_names();
  auto check = [&](const std::string& name, const char* what) {
    if (std::find(names.begin(), names.end(), name) != names.end()) return name;
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    throw std::invalid_argument(std::string(what) + " \"" + name + "\" is not a chat template (known: " +
                                known + ")");
  };
  if (!user_pick.empty()) return check(user_pick, "chat template");
  const std::string found = chat_template_name_for(file_template);
  if (!found.empty()) return found;
  const std::string use = check(fallback, "fallback chat template");
  warnings.push_back(std::string(file_template.empty() ? "the model has no chat template"
                                                       : "the model's chat template is not one SpecChat recognises") +
                     ": chats use the \"" + use + "\" template; pick another with --chat-template "
                     "(CLI) or the chat template setting (app)");
  return use;
}

std::vector<int32_t> encode_prompt_ids(const Vocab& v, const Tokenizer& tok, const std::string& text) {
  std::vector<int32_t> ids;
  if (v.add_bos) ids.push_back(v.bos_id);
  const std::vector<int32_t> body = tok.encode(text, true);
  ids.insert(ids.end(), body.begin(), body.end());
  if (ids.empty()) {
    throw GenerationError("empty_prompt",
                          "the prompt tokenizes to zero tokens and the model adds no BOS");
  }
  return ids;
}

std::vector<int32_t> encode_chat_ids(const Vocab& v, const Tokenizer& tok, const std::string& template_name,
                                     const std::vector<ChatMessage>& messages) {
  std::vector<int32_t> ids;
  if (v.add_bos) ids.push_back(v.bos_id);
  // A last assistant message is continued: its text follows the generation prompt, its turn
  // left open (no dummy prefix: it continues a prompt).
  const bool cont = !messages.empty() && messages.back().role == "assistant";
  const std::vector<ChatMessage> rendered(messages.begin(), messages.end() - (cont ? 1 : 0));
  const std::vector<int32_t> body =
      tok.encode_chat_pieces(render_chat_pieces(template_name, rendered, true, tok.specials()), true);
  ids.insert(ids.end(), body.begin(), body.end());
  if (cont) {
    const std::vector<int32_t> tail = tok.encode(messages.back().content, false);
    ids.insert(ids.end(), tail.begin(), tail.end());
  }
  if (ids.empty()) {
    throw GenerationError("empty_prompt",
                          "the prompt tokenizes to zero tokens and the model adds no BOS");
  }
  return ids;
}

std::vector<int32_t> ModelPair::encode_prompt(const std::string& text) const {
  return encode_prompt_ids(target->vocab(), *tokenizer, text);
}

std::vector<ChatPiece> ModelPair::render(const std::vector<ChatMessage>& messages,
                                         bool add_generation_prompt) const {
  return render_chat_pieces(template_name, messages, add_generation_prompt, tokenizer->specials());
}

std::vector<int32_t> ModelPair::encode_chat(const std::vector<ChatMessage>& messages) const {
  return encode_chat_ids(target->vocab(), *tokenizer, template_name, messages);
}

}  // namespace specchat
