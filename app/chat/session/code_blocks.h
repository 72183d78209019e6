// Fenced code blocks of a message's markdown: what the chat's "Copy code" buttons copy, exactly as
// the model wrote them (no trailing newline of the closing fence, indentation kept).
// A block opens with a line of three or more backticks or tildes (up to three spaces before them,
// an optional info string whose first word is the language) and closes with a line of at least as
// many of the same character; a block left open runs to the end of the text (a reply still
// streaming, or cut off). Thread-safety: a pure function. Cost: one pass over the text.
#pragma once

#include <QString>

#include <vector>

namespace zipmoe::app {

struct CodeBlock {
  QString language;  // the info string's first word; empty when none
  QString code;
};

std::vector<CodeBlock> fencedCodeBlocks(const QString& markdown);

}  // namespace zipmoe::app
