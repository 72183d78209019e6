// AnthropicStream (see anthropic_stream.h).
#include "serve/anthropic_stream.h"

namespace zipmoe::serve {

using nlohmann::json;
using Event = RequestTicket::Event;

std::string sseEvent(const char* name, const json& data) {
  return std::string("event: ") + name + "\ndata: " + dumpJson(data) + "\n\n";
}

AnthropicStream::AnthropicStream(MessageIds ids, StopSequenceOf stopSequenceOf)
    : ids_(std::move(ids)), stopSequenceOf_(std::move(stopSequenceOf)) {}

std::string AnthropicStream::ping() { return sseEvent("ping", {{"type", "ping"}}); }

std::string AnthropicStream::open(int promptTokens) {
  const json message = {{"id", ids_.id},
                        {"type", "message"},
                        {"role", "assistant"},
                        {"model", ids_.model},
                        {"content", json::array()},
                        {"stop_reason", nullptr},
                        {"stop_sequence", nullptr},
                        {"usage",
                         {{"input_tokens", promptTokens},
                          {"cache_creation_input_tokens", 0},
                          {"cache_read_input_tokens", 0},
                          {"output_tokens", 0}}}};
  return sseEvent("message_start", {{"type", "message_start"}, {"message", message}});
}

std::string AnthropicStream::openBlock(Block kind, const json& contentBlock) {
  std::string out = closeBlock();
  open_ = kind;
  ++index_;
  out += sseEvent("content_block_start",
                  {{"type", "content_block_start"}, {"index", index_}, {"content_block", contentBlock}});
  if (index_ == 0) out += ping();  // where Anthropic sends its first ping
  return out;
}

std::string AnthropicStream::closeBlock() {
  if (open_ == Block::None) return {};
  open_ = Block::None;
  return sseEvent("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
}

std::string AnthropicStream::onEvent(const Event& e) {
  if (ended_) return {};
  std::string out;
  switch (e.kind) {
    case Event::Kind::Text:
      if (e.text.empty()) return {};
      if (open_ != Block::Text) out += openBlock(Block::Text, {{"type", "text"}, {"text", ""}});
      out += sseEvent("content_block_delta", {{"type", "content_block_delta"},
                                              {"index", index_},
                                              {"delta", {{"type", "text_delta"}, {"text", e.text}}}});
      return out;
    case Event::Kind::ToolCallBegin:
      ++toolsStreamed_;
      return openBlock(Block::Tool, toolUseBlock(e.call, false));
    case Event::Kind::ToolCallDelta:
      if (open_ != Block::Tool || e.text.empty()) return {};  // a piece of no open call: nothing to attach it to
      return sseEvent("content_block_delta", {{"type", "content_block_delta"},
                                              {"index", index_},
                                              {"delta", {{"type", "input_json_delta"}, {"partial_json", e.text}}}});
    case Event::Kind::Finished:
      return finish(e.finish);
    case Event::Kind::Failed:
      ended_ = true;
      return sseEvent("error", json::parse(anthropicErrorJson(*e.error)));
  }
  return {};
}

std::string AnthropicStream::finish(const GenerationStats& info) {
  std::string out;
  for (size_t i = static_cast<size_t>(toolsStreamed_); i < info.toolCalls.size(); ++i) {
    const ToolCall& call = info.toolCalls[i];
    out += openBlock(Block::Tool, toolUseBlock(call, false));
    if (!call.argumentsJson.empty())
      out += sseEvent("content_block_delta",
                      {{"type", "content_block_delta"},
                       {"index", index_},
                       {"delta", {{"type", "input_json_delta"}, {"partial_json", call.argumentsJson}}}});
  }
  out += closeBlock();
  const std::optional<std::string> stop =
      info.stopReason == StopReason::StopString && stopSequenceOf_ ? stopSequenceOf_(info) : std::nullopt;
  out += sseEvent("message_delta", {{"type", "message_delta"},
                                    {"delta",
                                     {{"stop_reason", anthropicStopReason(info.stopReason)},
                                      {"stop_sequence", stop ? json(*stop) : json(nullptr)}}},
                                    {"usage", anthropicUsage(info)}});
  out += sseEvent("message_stop", {{"type", "message_stop"}});
  ended_ = true;
  return out;
}

}  // namespace zipmoe::serve
