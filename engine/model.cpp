#include "engine/model.h"

#include <algorithm>
#include <stdexcept>

namespace specchat {

Batch Batch::chain(std::span<const int32_t> toks, int start, bool all_logits) {
  Batch b;
  const int n = static_cast<int>(toks.size());
  b.tokens.assign(toks.begin(), toks.end());
  b.kv_pos0 = start;
  for (int i = 0; i < n; ++i) {
    b.pos.push_back(start + i);
    b.parent.push_back(i - 1);
  }
  if (all_logits) {
    for (int i = 0; i < n; ++i) b.out_rows.push_back(i);
  } else if (n > 0) {
    b.out_rows.push_back(n - 1);
  }
  return b;
}

LlamaModel::~LlamaModel() = default;

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path, const Options& opt) {
  auto file = std::make_unique<GgufFile>(GgufFile::open(path));
  const GgufFile& f = *file;
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->file_ = std::move(file);
  m->path_ = path;
  if (f.has("pipo.role") && !opt.pipo_backbone) {
    throw ModelError(path + ": this is the '" + f.get_string("pipo.role") + "' part of the PIPO release '" +
                     (f.has("pipo.release") ? f.get_string("pipo.release") : std::string("?")) +
                     "', not a plain model: load its release folder (pipo.json) in PIPO mode");
  }
  m->cfg_ = ModelConfig::from_gguf(f);
  m->vocab_ = Vocab::from_gguf(f);
  // <arch>.vocab_size, when given, must agree with the vocabulary (token_embd's rows are then
  // checked against it by the backend).
  if (m->cfg_.n_vocab != 0 && m->cfg_.n_vocab != m->vocab_.size()) {
    throw ModelError(path + ": " + m->cfg_.architecture + ".vocab_size is " + std::to_string(m->cfg_.n_vocab) +
                     " but the vocabulary (tokenizer.ggml.tokens) has " + std::to_string(m->vocab_.size()) +
                     " entries");
  }
  m->cfg_.n_vocab = m->vocab_.size();
  const int n_ctx = opt.n_ctx > 0 ? opt.n_ctx : m->cfg_.n_ctx_train;
  const BackendShape shape{n_ctx, std::max(1, opt.n_seq), std::max(1, opt.max_batch), opt.n_threads, opt.device, opt.pool,
                           opt.activations};
  m->backend_ = opt.backend == BackendKind::cuda ? make_cuda_backend(f, m->cfg_, shape)
                                                 : make_cpu_backend(f, m->cfg_, shape);
  // CUDA copied what it needs; the CPU backend reads the mapping for the model's lifetime.
  if (opt.backend == BackendKind::cuda) m->file_.reset();
  m->finish_init(opt, n_ctx);
  return m;
}

namespace {

// A vocabulary that decodes every id to a distinct visible piece; enough for a model that
// runs on token ids (benchmarks), not for text.
Vocab synthetic_vocab(int n_vocab) {
  Vocab v;
  v.model = "synthetic";
  v.pieces.reserve(static_cast<size_t>(n_vocab));
  for (int i = 0; i < n_vocab; ++i) {
    v.pieces.push_back(i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "t" + std::to_string(i));
    v.types.push_back(i < 3 ? (i == 0 ? TokenType::unknown : TokenType::control) : TokenType::normal);
  }
  v.scores.assign(static_cast<size_t>(n_vocab), 0.0f);
  v.bos_id = 1;
  v.eos_id = 2;
  v.unk_id = 0;
  return v;
}

}  // namespace

std::unique_ptr<LlamaModel> LlamaModel::random(const ModelConfig& cfg, const Options& opt, uint64_t seed,
                                               std::optional<QuantPreset> quant) {
  ModelConfig c = cfg;
  if (c.n_head_kv == 0) c.n_head_kv = c.n_head;
  if (c.n_head > 0 && c.head_dim == 0) c.head_dim = c.d_model / c.n_head;
  if (c.rope_dim == 0) c.rope_dim = c.head_dim;
  if (!c.plain_llama()) {
    throw ModelError("random model: only the plain llama layer (no biases, no Q/K norm, full unscaled RoPE)");
  }
  const int n_ctx = opt.n_ctx > 0 ? opt.n_ctx : c.n_ctx_train;
  if (c.n_vocab < 3 || c.d_model <= 0 || c.n_layer <= 0 || c.n_head <= 0 || c.n_head_kv <= 0 ||
      c.d_ff <= 0 || n_ctx <= 0 || c.n_head % c.n_head_kv != 0 || c.head_dim % 2 != 0 ||
      c.head_dim * c.n_head != c.d_model) {
    throw ModelError("random model: inconsistent config (need n_vocab >= 3, positive sizes, "
                     "n_head_kv dividing n_head, even head_dim = d_model / n_head, n_ctx > 0)");
  }
  std::unique_ptr<LlamaModel> m(new LlamaModel());
  m->path_ = "<random seed " + std::to_string(seed) + ">";
  m->cfg_ = c;
  m->vocab_ = synthetic_vocab(c.n_vocab);
  const BackendShape shape{n_ctx, std::max(1, opt.n_seq), std::max(1, opt.max_batch), opt.n_threads, opt.device, opt.pool,
                           opt.activations};
  if (quant && opt.backend != BackendKind::cuda) {
    throw ModelError(std::string("random model: quantized weights (") + quant_preset_name(*quant) +
                     ") only on the CUDA backend; on the CPU quantize a file from scripts/make-random-gguf "
                     "with specchat-quantize");
  }
  RandomMatrixType types;
  if (quant) {
    const QuantPreset p = *quant;
    const int n_layer = c.n_layer;
    types = [p, n_layer](const std::string& name, const std::vector<uint64_t>& ne) {
      return quant_tensor_type(p, name, ne, DType::f16, n_layer);
    };
  }
  m->backend_ = opt.backend == BackendKind::cuda ? make_cuda_backend_random(c, shape, seed, types)
                                                 : make_cpu_backend_random(c, shape, seed);
  m->finish_init(opt, n_ctx);
  return m;
}

void LlamaModel::finish_init(const Options& opt, int n_ctx) {
  max_batch_ = std::max(1, opt.max_batch);
  n_ctx_ = n_ctx;
  const int n_seq = std::max(1, opt.n_seq);
  const int kv_dim = cfg_.n_head_kv * cfg_.head_dim;
  if (opt.kv_type != DType::f16 && opt.kv_type != DType::f32) {
    throw ModelError(std::string("KV cache type must be f16 or f32, not ") + dtype_name(opt.kv_type));
  }
  kv_.reserve(static_cast<size_t>(n_seq));
  for (int sq = 0; sq < n_seq; ++sq) {
    KvRowStore* store = backend_->row_store(sq);  // device rows: f32 (the CUDA attention reads f32)
    kv_.push_back(store ? KvCache(cfg_.n_layer, n_ctx, kv_dim, store, DType::f32)
                        : KvCache(cfg_.n_layer, n_ctx, kv_dim, opt.kv_type));
  }
  const size_t B = static_cast<size_t>(max_batch_);
  visible_.resize(B * (static_cast<size_t>(n_ctx) + B));
  segs_.reserve(static_cast<size_t>(n_seq));
  tokens_.reserve(B);
  embd_.reserve(B * static_cast<size_t>(cfg_.d_model));
  pos_.reserve(B);
  out_rows_.reserve(B);
  hidden_rows_.reserve(B);
}

SharedWeight LlamaModel::packed_lm_head() const {
  SharedWeight s;
  if (const auto* cpu = dynamic_cast<const CpuBackend*>(backend_.get())) s.view = cpu->packed_lm_head(&s.keep);
  if (!s.keep) s = {};
  return s;
}

MemoryInfo LlamaModel::memory() const {
  MemoryInfo m = backend_->memory();
  m.kv_type = kv_.empty() ? DType::f32 : kv_.front().type();
  if (!m.on_device) {  // host rows: the caches hold them; CUDA counts its own pool and mask copy
    m.kv_bytes = 0;
    for (const KvCache& kv : kv_) m.kv_bytes += kv.bytes();
    m.activation_bytes += visible_.size();
  }
  return m;
}

std::span<const float> LlamaModel::sync_cache(std::span<const int32_t> ctx, int upto, bool want_logits, int seq) {
  KvCache& kv = this->kv(seq);
  if (upto <= 0 || upto > static_cast<int>(ctx.size()) || upto > kv.n_ctx()) {
    throw std::invalid_argument("sync_cache: upto out of range");
  }
  int keep = std::min(kv.common_prefix(ctx.first(static_cast<size_t>(upto))), want_logits ? upto - 1 : upto);
  kv.truncate(keep);
  std::span<const float> logits;
  while (keep < upto) {
    const int len = std::min(upto - keep, max_batch_);
    const auto part = ctx.subspan(static_cast<size_t>(keep), static_cast<size_t>(len));
    Batch b = Batch::chain(part, keep, false);
    b.seq = seq;
    logits = forward(b);
    kv.commit(part);
    keep += len;
  }
  return want_logits ? logits : std::span<const float>();
}

void LlamaModel::sync_cache_hidden(std::span<const int32_t> ctx, int upto, int seq, std::span<const int32_t> layers,
                                   const HiddenChunkFn& on_chunk) {
  KvCache& kv = this->kv(seq);
  if (upto <= 0 || upto > static_cast<int>(ctx.size()) || upto > kv.n_ctx()) {
    throw std::invalid_argument("sync_cache_hidden: upto out of range");
  }
  int keep = kv.common_prefix(ctx.first(static_cast<size_t>(upto)));
  kv.truncate(keep);
  while (keep < upto) {
    const int len = std::min(upto - keep, max_batch_);
    const auto part = ctx.subspan(static_cast<size_t>(keep), static_cast<size_t>(len));
    Batch b = Batch::chain(part, keep, true);
    b.seq = seq;
    const Batch* one[1] = {&b};
    const ForwardOut out = forward(one, layers);
    kv.commit(part);
    if (on_chunk) on_chunk(keep, len, out.hidden);
    keep += len;
  }
}

std::span<const float> LlamaModel::forward(const Batch& b) {
  const Batch* one[1] = {&b};
  return forward(one).logits;
}

ForwardOut LlamaModel::forward(std::span<const Batch* const> batches, std::span<const int32_t> hidden_layers) {
  const ModelConfig& c = cfg_;
  if (batches.empty()) throw std::invalid_argument("forward: empty batch");
  for (int32_t h : hidden_layers) {
    if (h != kHiddenFinalNorm && (h < 0 || h >= c.n_layer)) {
      throw std::invalid_argument("forward: hidden-state layer " + std::to_string(h) + " out of range");
    }
  }
  size_t total = 0, total_out = 0;
  for (const Batch* bp : batches) {
    total += bp->tokens.size();
    total_out += bp->out_rows.size();
  }
  if (total > static_cast<size_t>(max_batch_)) throw std::invalid_argument("forward: batch larger than max_batch");
  if (total_out > static_cast<size_t>(max_batch_)) throw std::invalid_argument("forward: more out_rows than max_batch");
  segs_.clear();
  tokens_.clear();
  embd_.clear();
  const bool with_embd = !batches.front()->embd.empty();
  pos_.clear();
  out_rows_.clear();
  hidden_rows_.clear();
  const bool explicit_hidden = std::any_of(batches.begin(), batches.end(), [](const Batch* b) { return !b->hidden_rows.empty(); });
  size_t mask_off = 0;
  for (const Batch* bp : batches) {
    const Batch& b = *bp;
    const int n = static_cast<int>(b.tokens.size());
    if (n == 0) throw std::invalid_argument("forward: empty batch");
    if (b.seq < 0 || b.seq >= n_seq()) {
      throw std::invalid_argument("forward: sequence " + std::to_string(b.seq) + " out of range (n_seq " +
                                  std::to_string(n_seq()) + ")");
    }
    for (const SeqSegment& sg : segs_) {
      if (sg.seq == b.seq) throw std::invalid_argument("forward: two batches for one sequence");
    }
    KvCache& kv = kv_[static_cast<size_t>(b.seq)];
    if (b.pos.size() != b.tokens.size() || b.parent.size() != b.tokens.size()) {
      throw std::invalid_argument("forward: tokens/pos/parent sizes differ");
    }
    if (b.kv_pos0 < 0 || b.kv_pos0 + n > kv.n_ctx()) {
      throw std::invalid_argument("forward: batch does not fit the KV cache (n_ctx " + std::to_string(kv.n_ctx()) + ")");
    }
    const int n_prefix = b.n_prefix < 0 ? b.kv_pos0 : b.n_prefix;
    if (n_prefix > b.kv_pos0) throw std::invalid_argument("forward: n_prefix past kv_pos0");
    if (!b.parent_slot.empty() && b.parent_slot.size() != b.tokens.size()) {
      throw std::invalid_argument("forward: parent_slot size differs from tokens");
    }
    if (b.embd.empty() == with_embd ||
        (with_embd && b.embd.size() != b.tokens.size() * static_cast<size_t>(c.d_model))) {
      throw std::invalid_argument(with_embd ? "forward: input embeddings must be [n_tokens, d_model] in every batch"
                                            : "forward: input embeddings in some batches only");
    }
    // Slot links and the visibility mask (tree attention): token i sees the shared prefix,
    // itself and its ancestors, in this batch or in earlier tree slots. Built here for every
    // backend, so CPU and GPU see the same mask.
    const int n_masked = b.kv_pos0 + n - n_prefix;
    uint8_t* mask = visible_.data() + mask_off;
    std::fill(mask, mask + static_cast<size_t>(n) * n_masked, 0);
    for (int i = 0; i < n; ++i) {
      const int32_t t = b.tokens[static_cast<size_t>(i)];
      if (t < 0 || t >= c.n_vocab) throw std::invalid_argument("forward: token id out of range");
      const int32_t p = b.pos[static_cast<size_t>(i)];
      if (p < 0 || p >= kv.n_ctx()) throw std::invalid_argument("forward: position out of range [0, n_ctx)");
      const int32_t par = b.parent[static_cast<size_t>(i)];
      if (par >= i || par < -1) throw std::invalid_argument("forward: bad parent link");
      const int32_t ps = b.parent_slot.empty() ? -1 : b.parent_slot[static_cast<size_t>(i)];
      if (ps != -1 && (par != -1 || ps < n_prefix || ps >= b.kv_pos0)) {
        throw std::invalid_argument("forward: bad parent_slot link");
      }
      const int slot = b.kv_pos0 + i;
      kv.set_slot_parent(slot, par >= 0 ? b.kv_pos0 + par : ps);
      uint8_t* vis = mask + static_cast<size_t>(i) * n_masked;
      for (int sl = slot; sl >= n_prefix; sl = kv.slot_parent(sl)) vis[sl - n_prefix] = 1;
    }
    const int row0 = static_cast<int>(tokens_.size());
    for (int r : b.out_rows) {
      if (r < 0 || r >= n) throw std::invalid_argument("forward: out_rows index out of range");
      out_rows_.push_back(row0 + r);
    }
    if (explicit_hidden) {
      for (int r : b.hidden_rows.empty() ? b.out_rows : b.hidden_rows) {
        if (r < 0 || r >= n) throw std::invalid_argument("forward: hidden_rows index out of range");
        hidden_rows_.push_back(row0 + r);
      }
    }
    tokens_.insert(tokens_.end(), b.tokens.begin(), b.tokens.end());
    embd_.insert(embd_.end(), b.embd.begin(), b.embd.end());
    pos_.insert(pos_.end(), b.pos.begin(), b.pos.end());
    SeqSegment sg;
    sg.seq = b.seq;
    sg.row0 = row0;
    sg.n_rows = n;
    sg.kv_pos0 = b.kv_pos0;
    sg.n_prefix = n_prefix;
    sg.n_masked = n_masked;
    sg.visible = mask;
    sg.kv = &kv;
    segs_.push_back(sg);
    mask_off += static_cast<size_t>(n) * n_masked;
  }
  if (hidden_rows_.size() > static_cast<size_t>(max_batch_)) throw std::invalid_argument("forward: more hidden_rows than max_batch");
  ForwardArgs a;
  a.tokens = tokens_;
  a.embd = embd_;
  a.pos = pos_;
  a.out_rows = out_rows_;
  a.segments = segs_;
  a.hidden_layers = hidden_layers;
  a.hidden_rows = hidden_rows_;
  return backend_->forward(a);
}

}  // namespace specchat
