// Chat templates by name: turn a list of messages into the prompt the model was trained on.
//
// A template renders to pieces: text (template text and message content, encoded as plain text)
// and markers (the template's control tokens: <|im_start|>, <|eot_id|>, the model's BOS/EOS,
// ...). Only markers may become control token ids: a message that contains "<|im_end|>" is text
// and stays text (Tokenizer::encode_chat_pieces).
#pragma once

#include <string>
#include <vector>

namespace specchat {

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;
};

// One piece of a rendered chat. `marker`: a control token of the template, written as its one
// id when the vocabulary has a control or user-defined piece with exactly this text (as
// llama.cpp's parse_special would match it), else encoded as text (Llama 2's "[INST]" is text).
struct ChatPiece {
  std::string text;
  bool marker = false;
};

// The model's own special-token texts that templates write (tokenizer.ggml.{bos,eos}_token_id
// pieces): "</s><s>" between Llama 2 turns, EOS after a Mistral or Zephyr reply, ...
struct ChatSpecials {
  std::string bos = "<s>";
  std::string eos = "</s>";
};

// Renders `messages` with the named template and, when `add_generation_prompt`, the opening of
// the assistant's reply. Names: chat_template_names(). The BOS token that starts a prompt is not
// part of the output (the caller prepends its id when the vocabulary wants it).
// Throws std::invalid_argument for an unknown name or role.
std::vector<ChatPiece> render_chat_pieces(const std::string& template_name,
                                          const std::vector<ChatMessage>& messages,
                                          bool add_generation_prompt = true,
                                          const ChatSpecials& specials = {});
// The concatenated text of render_chat_pieces (for display and prefix checks).
std::string render_chat(const std::string& template_name, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt = true, const ChatSpecials& specials = {});
// The concatenated text of `pieces`.
std::string chat_pieces_text(const std::vector<ChatPiece>& pieces);
// Names render_chat accepts, in a fixed order: "specchat" (bundled models), "llama2" ([INST]
// with <<SYS>>), "llama3" (header ids), "chatml" (Qwen and others), "mistral" ([INST] without
// <<SYS>>), "phi3", "zephyr", "gemma", "vicuna".
std::vector<std::string> chat_template_names();
// Every marker text any template writes (besides the model's BOS/EOS), for the tokenizer's rule
// that user text never becomes one of them.
const std::vector<std::string>& chat_marker_texts();

// The template name for a GGUF `tokenizer.chat_template` value: the value itself when it is one
// of chat_template_names(), else a family recognised from the distinctive markers of its Jinja
// text (<|start_header_id|> -> llama3, <|im_start|> -> chatml, <start_of_turn> -> gemma,
// [INST] with <<SYS>> -> llama2, [INST] without -> mistral, <|user|> with <|end|> -> phi3 or,
// for the bundled name, specchat, <|user|> with eos -> zephyr, USER:/ASSISTANT: -> vicuna);
// "" when empty or not recognised (the caller falls back to a template the user picks, with a
// notice: model_pair.h).
std::string chat_template_name_for(const std::string& gguf_template);

}  // namespace specchat
