// Chat export — one chat and its messages as Markdown for people or as JSON for programs, and the
// atomic file write both use.
//
// Markdown keeps every message's text verbatim (code blocks survive), heads it with the role, and
// adds a reply's measurements ("TTFT 120 ms · 14.2 tok/s · expert hit rate 83 %") and a note on
// replies that did not complete. A code fence a cut-off reply left open is closed, so that it does
// not swallow the rest of the document.
//
// JSON (indented, UTF-8) has every field of the records: times as ISO-8601 UTC with milliseconds,
// states as their stored names ("complete", "incomplete", …), unknown measurements as null, and the
// chat's sampling settings as the JSON they are (or as the stored string when that is not JSON):
//   {"format": "zipmoe-chat", "formatVersion": 1, "chat": {…}, "messages": [{…}, …]}
//
// Thread-safety: pure functions; writeTextFileAtomically() may run on any thread (not two at once on
// one path). Cost: linear in the text.
#pragma once

#include <QString>

#include <stdexcept>
#include <vector>

#include "chat_database.h"

namespace zipmoe::app {

class ExportError : public std::runtime_error {
 public:
  explicit ExportError(const QString& message) : std::runtime_error(message.toStdString()) {}
};

QString exportChatMarkdown(const ChatRecord& chat, const std::vector<MessageRecord>& messages);
QString exportChatJson(const ChatRecord& chat, const std::vector<MessageRecord>& messages);

// The reply's stats line without emphasis, e.g. "TTFT 120 ms · 14.2 tok/s · expert hit rate 83 %";
// empty when nothing is known.
QString messageStatsLine(const MessageRecord& message);

// Writes `text` as UTF-8 to `path` through a temporary file renamed over it: readers see the old
// file or the new one, never a part. Throws ExportError naming the path and the reason.
void writeTextFileAtomically(const QString& path, const QString& text);

}  // namespace zipmoe::app
