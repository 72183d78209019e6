// Tool prompts — how a conversation with tools is shown to the model. A chat template that renders
// tools itself (Qwen2.5's, Hermes-style templates: its rendering changes when `tools` is given) gets
// the tools, the assistants' earlier `tool_calls` and the `tool` messages as transformers passes
// them. Any other template (and plain completion) gets the generic format (token_constraint.h): the
// tools and the format's instructions appended to the system message (one is added when there is
// none), earlier calls written into the assistant's text as <tool_call> blocks, and tool results as a
// user message of <tool_response> blocks.
// Thread-safety: pure. Cost: two template renderings to tell whether the template renders tools.
#pragma once

#include <string>
#include <vector>

#include "zipmoe/generation/output_spec.h"
#include "zipmoe/text/chat_template.h"

namespace zipmoe {

// The conversation rendered with `template` (add_generation_prompt), tools and tool messages as above.
std::string renderWithTools(const ChatTemplate& chatTemplate, const std::vector<ChatMessage>& messages,
                            const std::vector<ToolSpec>& tools);
// The generic format's messages: tools in the system message, calls and results as text.
std::vector<ChatMessage> genericToolMessages(const std::vector<ChatMessage>& messages, const std::vector<ToolSpec>& tools);
// Whether the conversation needs any of this (tools offered, or tool calls / results in it).
bool usesTools(const std::vector<ChatMessage>& messages, const std::vector<ToolSpec>& tools);

}  // namespace zipmoe
