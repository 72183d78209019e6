// AnthropicStream — a streamed reply's RequestTicket events → Anthropic's server-sent events, as
// text ready to write: `event: NAME\ndata: JSON\n\n`, each JSON carrying its "type".
//
// The grammar, as Anthropic sends it: message_start, then content blocks — each
// content_block_start (the first followed by a ping), its content_block_delta events (text_delta
// {text}; input_json_delta {partial_json}), then content_block_stop — then message_delta {delta:
// {stop_reason, stop_sequence}, usage}, and message_stop; pings may come anywhere after
// message_start (the server's heartbeat); a failure ends the stream with an `error` event instead. A text block opens at the first Text event (a reply without text has no
// text block), a tool_use block at each ToolCallBegin (closing the block before it); its
// ToolCallDelta pieces are its partial_json. Calls that Finished lists but that were not streamed
// (a core that reports them only at the end) are sent whole before message_delta.
// Pure: events in, text out; the server writes it (anthropic_routes.cpp), tests feed it synthetic
// events (tests/engine/serve/test_anthropic_stream.cpp).
// Thread-safety: one user. Cost: O(the event).
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "serve/anthropic_responses.h"
#include "zipmoe/serve/serve_scheduler.h"

namespace zipmoe::serve {

class AnthropicStream {
 public:
  // Which stop sequence ended a reply that ended on one (StopReason::StopString).
  using StopSequenceOf = std::function<std::optional<std::string>(const GenerationStats&)>;
  AnthropicStream(MessageIds ids, StopSequenceOf stopSequenceOf);

  // message_start (usage.input_tokens: the rendered prompt, before any of it is found in the cache;
  // message_delta's usage tells the split).
  std::string open(int promptTokens);
  // The events' text for one ticket event. After Finished or Failed the stream has ended.
  std::string onEvent(const RequestTicket::Event& event);
  // A ping event (the server's heartbeat while a reply waits).
  static std::string ping();
  bool ended() const { return ended_; }

 private:
  enum class Block { None, Text, Tool };
  std::string openBlock(Block kind, const nlohmann::json& contentBlock);
  std::string closeBlock();
  std::string finish(const GenerationStats& info);

  MessageIds ids_;
  StopSequenceOf stopSequenceOf_;
  Block open_ = Block::None;
  int index_ = -1;        // the open (or last) block's index
  int toolsStreamed_ = 0;  // ToolCallBegin events seen
  bool ended_ = false;
};

// One server-sent event: "event: NAME\ndata: JSON\n\n".
std::string sseEvent(const char* name, const nlohmann::json& data);

}  // namespace zipmoe::serve
