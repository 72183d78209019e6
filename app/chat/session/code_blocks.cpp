#include "code_blocks.h"

#include <QStringList>

namespace zipmoe::app {

namespace {

// The fence at the start of `line` (after ≤ 3 spaces): its character and length, or length 0.
std::pair<QChar, qsizetype> fenceOf(const QString& line) {
  qsizetype i = 0;
  while (i < line.size() && i < 3 && line[i] == QLatin1Char(' ')) ++i;
  if (i >= line.size() || (line[i] != QLatin1Char('`') && line[i] != QLatin1Char('~'))) return {QChar(), 0};
  const QChar c = line[i];
  qsizetype n = 0;
  while (i + n < line.size() && line[i + n] == c) ++n;
  return n >= 3 ? std::pair{c, n} : std::pair{QChar(), qsizetype{0}};
}

}  // namespace

std::vector<CodeBlock> fencedCodeBlocks(const QString& markdown) {
  std::vector<CodeBlock> blocks;
  const QStringList lines = markdown.split(QLatin1Char('\n'));
  bool open = false;
  QChar fenceChar;
  qsizetype fenceLength = 0;
  QStringList body;
  CodeBlock current;
  for (const QString& line : lines) {
    const auto [c, n] = fenceOf(line);
    if (!open) {
      if (n == 0) continue;
      const QString info = line.trimmed().mid(n).trimmed();
      if (c == QLatin1Char('`') && info.contains(QLatin1Char('`'))) continue;  // inline code, not a fence
      open = true;
      fenceChar = c;
      fenceLength = n;
      current = CodeBlock{info.section(QLatin1Char(' '), 0, 0), {}};
      body.clear();
      continue;
    }
    if (n >= fenceLength && c == fenceChar && line.trimmed().size() == n) {
      current.code = body.join(QLatin1Char('\n'));
      blocks.push_back(current);
      open = false;
      continue;
    }
    body.push_back(line);
  }
  if (open) {
    current.code = body.join(QLatin1Char('\n'));
    blocks.push_back(current);
  }
  return blocks;
}

}  // namespace zipmoe::app
