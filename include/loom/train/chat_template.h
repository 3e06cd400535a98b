#pragma once
// How a conversation becomes the text a language model continues (docs/text.md, "Chat
// templates"): each message is its role's format with the message in place of `{content}`, the
// conversation is the formats in order, and a reply is asked for by the generation prompt. A
// template is a JSON object, kept in a model folder as chat_template.json or given to `loom serve
// --chat-template`:
//
//   {"bos": "", "system": "<|im_start|>system\n{content}<|im_end|>\n",
//    "user": "<|im_start|>user\n{content}<|im_end|>\n",
//    "assistant": "<|im_start|>assistant\n{content}<|im_end|>\n",
//    "generation_prompt": "<|im_start|>assistant\n", "stop": ["<|im_end|>"]}
//
// transformers' templates are Jinja programs; most are this pattern written as one, and are
// rewritten as such an object (docs/text.md shows ChatML, Llama 3 and Zephyr).
#include <string>
#include <vector>

#include "loom/core/api.h"

namespace loom::train {

struct LOOM_API ChatMessage {
  std::string role;  // "system", "user", "assistant", or any role the template formats
  std::string content;
};

class LOOM_API ChatTemplate {
 public:
  ChatTemplate() = default;  // empty(): formats nothing
  // From the JSON text of a template: ValueError naming what is wrong (not an object, a format
  // that is not a string or lacks {content} or holds it twice, an unknown key, no role at all).
  static ChatTemplate parse(const std::string& json_text);
  // From a file (IOError when it cannot be read; ValueError as parse, naming the file).
  static ChatTemplate load(const std::string& path);

  bool empty() const { return roles_.empty(); }
  // The text of the conversation, then the generation prompt when `add_generation_prompt`.
  // ValueError for a role the template has no format for (naming those it has).
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true) const;
  // Texts that end a reply (the template's "stop"), for the generation's stop strings.
  const std::vector<std::string>& stop() const { return stop_; }
  std::vector<std::string> roles() const;

 private:
  struct Role {
    std::string name;
    std::string before;  // the format's text before {content}
    std::string after;   // and after it
  };
  std::string bos_;
  std::vector<Role> roles_;
  std::string generation_prompt_;
  std::vector<std::string> stop_;
};

}  // namespace loom::train
