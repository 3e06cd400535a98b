#pragma once
// The OpenAI-compatible text routes' protocol (docs/serve.md, "Generation"): a completion or chat
// request's fields checked and turned into generation options, and the answers and server-sent
// events in OpenAI's shapes (those its Python client and other OpenAI-compatible clients parse).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "loom/train/generation.h"
#include "loom/train/language_model.h"

namespace loom::serve::detail {

// A request the protocol refuses: its status (400, 404) and the message naming the field.
struct OpenAiError {
  int status = 400;
  std::string message;
  std::string param;  // the field at fault, "" when none
  std::string type = "invalid_request_error";
};

struct TextRequest {
  bool chat = false;
  std::vector<int64_t> prompt;          // the tokens to continue
  std::string prompt_text;              // the prompt as text ("" when given as token ids)
  train::GenerationOptions generation;  // max_new_tokens already bounded by the context left
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last event with the usage
  bool echo = false;           // completions: the prompt's text before the completion
  bool seeded = false;         // "seed" was given (else the server draws one)
};

// The body of POST /v1/completions (chat false) or /v1/chat/completions, checked against the
// model (`served_name`, its tokenizer and chat template) and a context of `max_length`
// positions. Throws OpenAiError.
TextRequest parse_text_request(const nlohmann::json& body, bool chat, const train::LanguageModel& model,
                               const std::string& served_name, int64_t max_length);

// "stop" (a stop token or string), "length" (max_tokens or the context).
const char* finish_reason(train::Generation::Finish finish);

// Identifies one answer: its id, creation time and model name, in every event of a stream.
struct AnswerHeader {
  std::string id;
  int64_t created = 0;
  std::string model;
  bool chat = false;
};

nlohmann::json usage_json(int64_t prompt_tokens, int64_t completion_tokens);
// The whole answer of a request that did not stream.
nlohmann::json text_answer(const AnswerHeader& h, const std::string& text, const char* finish, int64_t prompt_tokens,
                           int64_t completion_tokens);
// One server-sent event of a stream: a piece of text (finish null), or the last one (`finish`
// set, text maybe empty); a chat stream's first event also names the role.
std::string text_event(const AnswerHeader& h, const std::string& text, const char* finish, bool first);
// The usage event (stream_options.include_usage): no choices, the usage.
std::string usage_event(const AnswerHeader& h, int64_t prompt_tokens, int64_t completion_tokens);
// An error met after the stream began (the status is sent already): an event with the error.
std::string error_event(const std::string& message);
inline constexpr const char* kDoneEvent = "data: [DONE]\n\n";

// An error's body, {"error": {"message", "type", "param", "code"}}.
nlohmann::json error_json(const std::string& message, const std::string& type, const std::string& param);

}  // namespace loom::serve::detail
