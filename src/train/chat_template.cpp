#include "loom/train/chat_template.h"

#include <nlohmann/json.hpp>

#include "core/json_util.h"
#include "loom/core/error.h"
#include "loom/core/file.h"

namespace loom::train {

namespace {

constexpr const char* kContent = "{content}";
// A template of a few formats: larger is not a template (a hostile file is bounded).
constexpr size_t kMaxTemplateBytes = 1 << 20;

}  // namespace

ChatTemplate ChatTemplate::parse(const std::string& json_text) {
  const auto bad = [](const std::string& what) -> ChatTemplate { throw ValueError("chat template: " + what); };
  if (json_text.size() > kMaxTemplateBytes)
    return bad(std::to_string(json_text.size()) + " bytes (at most " + std::to_string(kMaxTemplateBytes) + ")");
  std::string error;
  const auto parsed = detail::parse_json(json_text, &error);
  if (!parsed) return bad("not JSON (" + error + ")");
  if (!parsed->is_object())
    return bad("not a JSON object of formats ({\"user\": \"...{content}...\", \"generation_prompt\": \"...\", ...})");
  ChatTemplate t;
  for (const auto& [key, value] : parsed->items()) {
    if (key == "stop") {
      if (!value.is_array()) return bad("\"stop\" must be a list of texts");
      for (const auto& s : value) {
        if (!s.is_string() || s.get<std::string>().empty()) return bad("\"stop\" must hold non-empty texts");
        t.stop_.push_back(s.get<std::string>());
      }
      continue;
    }
    if (!value.is_string()) return bad("\"" + key + "\" must be a text");
    const std::string text = value.get<std::string>();
    if (key == "bos") {
      t.bos_ = text;
    } else if (key == "generation_prompt") {
      t.generation_prompt_ = text;
    } else {
      const size_t at = text.find(kContent);
      if (at == std::string::npos) return bad("the format of role \"" + key + "\" has no {content}");
      if (text.find(kContent, at + 1) != std::string::npos) return bad("the format of role \"" + key + "\" has {content} twice");
      t.roles_.push_back({key, text.substr(0, at), text.substr(at + std::string(kContent).size())});
    }
  }
  if (t.roles_.empty()) return bad("no role format (give at least \"user\": \"...{content}...\")");
  return t;
}

ChatTemplate ChatTemplate::load(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return parse(text);
  } catch (const ValueError& e) {
    throw ValueError(path + ": " + e.what());
  }
}

std::vector<std::string> ChatTemplate::roles() const {
  std::vector<std::string> names;
  for (const Role& r : roles_) names.push_back(r.name);
  return names;
}

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  std::string text = bos_;
  for (const ChatMessage& m : messages) {
    const Role* role = nullptr;
    for (const Role& r : roles_)
      if (r.name == m.role) role = &r;
    if (!role) {
      std::string names;
      for (const Role& r : roles_) names += (names.empty() ? "" : ", ") + r.name;
      throw ValueError("chat template: no format for role \"" + m.role + "\" (the template has " + names + ")");
    }
    text += role->before + m.content + role->after;
  }
  if (add_generation_prompt) text += generation_prompt_;
  return text;
}

}  // namespace loom::train
