#include "openai.h"

#include <cmath>

#include "core/json_util.h"
#include "core/utf8.h"

namespace loom::serve::detail {

namespace {

[[noreturn]] void refuse(const std::string& param, const std::string& message, int status = 400) {
  throw OpenAiError{status, message, param};
}

bool present(const nlohmann::json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

double number(const nlohmann::json& body, const char* key, double fallback, double lo, double hi, const char* range) {
  if (!present(body, key)) return fallback;
  const auto& v = body[key];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo || v.get<double>() > hi)
    refuse(key, std::string("\"") + key + "\" must be a number " + range + ", got " + v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return v.get<double>();
}

int64_t integer(const nlohmann::json& body, const char* key, int64_t fallback, int64_t lo, int64_t hi) {
  if (!present(body, key)) return fallback;
  const auto v = loom::detail::json_to_int(body[key], lo, hi);
  if (!v)
    refuse(key, std::string("\"") + key + "\" must be an integer from " + std::to_string(lo) + " to " + std::to_string(hi) + ", got " +
                    body[key].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return *v;
}

bool boolean(const nlohmann::json& body, const char* key) {
  if (!present(body, key)) return false;
  if (!body[key].is_boolean()) refuse(key, std::string("\"") + key + "\" must be true or false");
  return body[key].get<bool>();
}

// Fields whose only supported value is their default: anything else is refused by name rather
// than silently ignored.
void unsupported(const nlohmann::json& body) {
  for (const char* key : {"presence_penalty", "frequency_penalty"})
    if (present(body, key) && !(body[key].is_number() && body[key].get<double>() == 0))
      refuse(key, std::string("\"") + key + "\" is not supported (0 only); \"repetition_penalty\" is (1: none)");
  if (present(body, "n") && !(body["n"].is_number_integer() && body["n"].get<int64_t>() == 1))
    refuse("n", "\"n\" must be 1: one choice per request");
  if (present(body, "best_of") && !(body["best_of"].is_number_integer() && body["best_of"].get<int64_t>() == 1))
    refuse("best_of", "\"best_of\" must be 1");
  if (present(body, "logprobs") && !(body["logprobs"].is_boolean() && !body["logprobs"].get<bool>()))
    refuse("logprobs", "\"logprobs\" is not supported");
  if (present(body, "top_logprobs")) refuse("top_logprobs", "\"top_logprobs\" is not supported");
  if (present(body, "logit_bias") && !(body["logit_bias"].is_object() && body["logit_bias"].empty()))
    refuse("logit_bias", "\"logit_bias\" is not supported");
  if (present(body, "suffix")) refuse("suffix", "\"suffix\" is not supported");
  if (present(body, "tools") && !(body["tools"].is_array() && body["tools"].empty())) refuse("tools", "\"tools\" are not supported");
  if (present(body, "response_format")) {
    const auto& f = body["response_format"];
    if (!f.is_object() || !f.contains("type") || f["type"] != "text")
      refuse("response_format", "\"response_format\" must be {\"type\": \"text\"} (structured outputs are not supported)");
  }
}

std::vector<std::string> stop_texts(const nlohmann::json& body) {
  std::vector<std::string> stops;
  if (!present(body, "stop")) return stops;
  const auto& s = body["stop"];
  const auto add = [&](const nlohmann::json& v) {
    if (!v.is_string() || v.get<std::string>().empty()) refuse("stop", "\"stop\" must be a non-empty text or a list of up to 4");
    stops.push_back(v.get<std::string>());
  };
  if (s.is_array()) {
    if (s.size() > 4) refuse("stop", "\"stop\" holds " + std::to_string(s.size()) + " texts (at most 4)");
    for (const auto& v : s) add(v);
  } else {
    add(s);
  }
  return stops;
}

int64_t vocab_size(const train::LanguageModel& model) {
  if (const auto* g = std::get_if<zoo::GptConfig>(&model.network.config)) return g->vocab_size;
  if (const auto* l = std::get_if<zoo::LlamaConfig>(&model.network.config)) return l->vocab_size;
  return INT32_MAX;  // not a zoo model: the decoder refuses it before anything is served
}

// A prompt as text or token ids: "text", ["text"], [1, 2, 3] or [[1, 2, 3]].
void completion_prompt(const nlohmann::json& body, const train::LanguageModel& model, TextRequest& r) {
  if (!body.contains("prompt")) refuse("prompt", "\"prompt\" is missing (a text, or a list of token ids)");
  nlohmann::json p = body["prompt"];
  if (p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array())) p = nlohmann::json(p[0]);
  if (p.is_string()) {
    r.prompt_text = p.get<std::string>();
    r.prompt = model.encode(r.prompt_text, true);
    return;
  }
  if (p.is_array() && !p.empty() && p[0].is_number()) {
    const int64_t vocab = vocab_size(model);
    for (const auto& t : p) {
      const auto id = loom::detail::json_to_int(t, 0, vocab - 1);
      if (!id) refuse("prompt", "a prompt of token ids must hold integers from 0 to " + std::to_string(vocab - 1) + " (the vocabulary)");
      r.prompt.push_back(*id);
    }
    return;
  }
  refuse("prompt", "\"prompt\" must be a text, a list of token ids, or a list of one of these (one prompt per request)");
}

std::string message_content(const nlohmann::json& m) {
  if (!m.contains("content") || m["content"].is_null()) return "";
  const auto& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  if (c.is_array()) {  // parts: only text ones
    std::string text;
    for (const auto& part : c) {
      if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") || !part["text"].is_string())
        refuse("messages", "a message's content parts must be {\"type\": \"text\", \"text\": \"...\"} (no images or audio)");
      text += part["text"].get<std::string>();
    }
    return text;
  }
  refuse("messages", "a message's \"content\" must be a text or a list of text parts");
}

void chat_prompt(const nlohmann::json& body, const train::LanguageModel& model, TextRequest& r) {
  if (model.chat_template.empty())
    refuse("messages",
           "this model has no chat template: put chat_template.json in its folder or start the server with --chat-template FILE "
           "(docs/text.md, \"Chat templates\"); /v1/completions takes a plain prompt");
  if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
    refuse("messages", "\"messages\" must be a non-empty list of {\"role\", \"content\"}");
  std::vector<train::ChatMessage> messages;
  for (const auto& m : body["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      refuse("messages", "each message must be an object with a \"role\" text");
    messages.push_back({m["role"].get<std::string>(), message_content(m)});
  }
  try {
    r.prompt_text = model.chat_template.apply(messages, true);
  } catch (const Error& e) {
    refuse("messages", e.what());
  }
  // the template spells the begin-of-text itself when the model wants one
  r.prompt = model.encode(r.prompt_text, false);
}

}  // namespace

TextRequest parse_text_request(const nlohmann::json& body, bool chat, const train::LanguageModel& model,
                               const std::string& served_name, int64_t max_length) {
  if (!body.is_object()) refuse("", "the request body must be a JSON object");
  if (present(body, "model") && (!body["model"].is_string() || body["model"].get<std::string>() != served_name))
    refuse("model",
           "the model " + (body["model"].is_string() ? loom::detail::quote_text(body["model"].get<std::string>()) : std::string("given")) +
               " does not exist (this server serves " + loom::detail::quote_text(served_name) + ")",
           404);
  unsupported(body);
  TextRequest r;
  r.chat = chat;
  if (chat) chat_prompt(body, model, r);
  else completion_prompt(body, model, r);
  if (r.prompt.empty()) {
    if (model.end_tokens.empty()) refuse("prompt", "the prompt has no tokens and the model names no end-of-text token to start after");
    r.prompt.push_back(model.end_tokens[0]);  // GPT-2's way to start from nothing
  }
  const auto n = static_cast<int64_t>(r.prompt.size());
  if (n >= max_length)
    refuse(chat ? "messages" : "prompt", "the prompt has " + std::to_string(n) + " tokens; the model's context holds " +
                                             std::to_string(max_length) + ", so at most " + std::to_string(max_length - 1) +
                                             " leave room for one new token");
  train::GenerationOptions& g = r.generation;
  const int64_t room = max_length - n + 1;  // the last token chosen is never fed
  const char* max_key = chat && present(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  // OpenAI's defaults: 16 tokens for a completion, the context left for a chat
  const int64_t wanted = integer(body, max_key, chat ? room : 16, 0, INT32_MAX);
  g.max_new_tokens = std::min(wanted, room);
  g.sampling.temperature = number(body, "temperature", 1.0, 0.0, 2.0, "from 0 to 2");
  g.sampling.top_p = number(body, "top_p", 1.0, 0.0, 1.0, "from 0 to 1");
  if (g.sampling.top_p == 0) refuse("top_p", "\"top_p\" must be above 0");
  g.sampling.top_k = integer(body, "top_k", 0, -1, INT32_MAX);
  if (g.sampling.top_k < 0) g.sampling.top_k = 0;  // -1: all, as vLLM spells it
  g.sampling.min_p = number(body, "min_p", 0.0, 0.0, 1.0, "from 0 to 1");
  g.sampling.repetition_penalty = number(body, "repetition_penalty", 1.0, 1e-6, 1e6, "above 0");
  r.seeded = present(body, "seed");
  g.seed = r.seeded ? static_cast<uint64_t>(integer(body, "seed", 0, INT64_MIN, INT64_MAX)) : 0;
  g.stop_strings = stop_texts(body);
  for (const std::string& s : model.chat_template.stop())
    if (chat) g.stop_strings.push_back(s);
  g.stop_tokens = model.end_tokens;
  r.stream = boolean(body, "stream");
  if (present(body, "stream_options")) {
    const auto& so = body["stream_options"];
    if (!so.is_object()) refuse("stream_options", "\"stream_options\" must be an object");
    if (!r.stream) refuse("stream_options", "\"stream_options\" is only allowed with \"stream\": true");
    r.include_usage = boolean(so, "include_usage");
  }
  if (!chat) r.echo = boolean(body, "echo");
  return r;
}

const char* finish_reason(train::Generation::Finish finish) {
  return finish == train::Generation::Finish::Length ? "length" : "stop";
}

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens) {
  return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens}, {"total_tokens", prompt_tokens + completion_tokens}};
}

namespace {

nlohmann::json frame(const AnswerHeader& h, bool chunk) {
  return {{"id", h.id},
          {"object", h.chat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion"},
          {"created", h.created},
          {"model", h.model}};
}

std::string event(const nlohmann::json& j) {
  return "data: " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
}

}  // namespace

nlohmann::json text_answer(const AnswerHeader& h, const std::string& text, const char* finish, int64_t prompt_tokens,
                           int64_t completion_tokens) {
  nlohmann::json j = frame(h, false);
  nlohmann::json choice = {{"index", 0}, {"finish_reason", finish}, {"logprobs", nullptr}};
  if (h.chat) choice["message"] = {{"role", "assistant"}, {"content", text}};
  else choice["text"] = text;
  j["choices"] = nlohmann::json::array({choice});
  j["usage"] = usage_json(prompt_tokens, completion_tokens);
  return j;
}

std::string text_event(const AnswerHeader& h, const std::string& text, const char* finish, bool first) {
  nlohmann::json j = frame(h, true);
  nlohmann::json choice = {{"index", 0}, {"logprobs", nullptr}};
  choice["finish_reason"] = finish ? nlohmann::json(finish) : nlohmann::json(nullptr);
  if (h.chat) {
    nlohmann::json delta = nlohmann::json::object();
    if (first) delta["role"] = "assistant";
    if (!text.empty() || (first && !finish)) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  j["choices"] = nlohmann::json::array({choice});
  return event(j);
}

std::string usage_event(const AnswerHeader& h, int64_t prompt_tokens, int64_t completion_tokens) {
  nlohmann::json j = frame(h, true);
  j["choices"] = nlohmann::json::array();
  j["usage"] = usage_json(prompt_tokens, completion_tokens);
  return event(j);
}

std::string error_event(const std::string& message) { return event({{"error", error_json(message, "server_error", "")["error"]}}); }

nlohmann::json error_json(const std::string& message, const std::string& type, const std::string& param) {
  return {{"error",
           {{"message", message}, {"type", type}, {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)}, {"code", nullptr}}}};
}

}  // namespace loom::serve::detail
