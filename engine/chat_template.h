// Chat templates by name: turn a list of messages into the prompt text the model was trained on.
#pragma once

#include <string>
#include <vector>

namespace specchat {

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;
};

// Renders `messages` with the named template and, when `add_generation_prompt`, the opening of
// the assistant's reply. Names: "specchat" (bundled models), "llama2" ([INST]), "chatml",
// "zephyr", "vicuna". The BOS token is not part of the text (the caller prepends its id).
// Throws std::invalid_argument for an unknown name.
std::string render_chat(const std::string& template_name, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt = true);
// Names render_chat accepts, in a fixed order.
std::vector<std::string> chat_template_names();

// The template name for a GGUF `tokenizer.chat_template` value: the value itself when it is one
// of chat_template_names(), else a name recognised from the markers of a Jinja template
// (<|im_start|> -> chatml, [INST] -> llama2, <|user|>..<|end|> -> specchat, <|user|>..</s> ->
// zephyr, USER:/ASSISTANT: -> vicuna); "" when empty or not recognised (the caller chooses).
std::string chat_template_name_for(const std::string& gguf_template);

}  // namespace specchat
