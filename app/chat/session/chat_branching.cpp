// ChatController: branching a conversation from one of its messages, the branches of the open chat,
// copying a message's code blocks, and the colour scheme (see chat_controller.h).
#include <QClipboard>
#include <QGuiApplication>

#include "chat_controller.h"
#include "chat_database.h"
#include "code_blocks.h"
#include "color_scheme.h"

namespace zipmoe::app {

void ChatController::loadBranches(const ChatRecord& chat) {
  branchParent_.clear();
  branches_.clear();
  if (!database_) return;
  if (chat.parentChatId) {
    if (const auto parent = database_->chat(chat.parentChatId))
      branchParent_ = {{QStringLiteral("id"), parent->id},
                       {QStringLiteral("title"), parent->title},
                       {QStringLiteral("position"), chat.branchPosition}};
  }
  for (const ChatRecord& b : database_->branchesOf(chat.id))
    branches_.push_back(QVariantMap{{QStringLiteral("id"), b.id},
                                    {QStringLiteral("title"), b.title},
                                    {QStringLiteral("position"), b.branchPosition}});
}

bool ChatController::branchFrom(int position) {
  if (!database_ || !currentChatId_) {
    setError(tr("Open a chat to branch it."));
    return false;
  }
  if (generating()) {
    setError(tr("Wait for the reply to end before branching the chat."));
    return false;
  }
  const qint64 from = currentChatId_;
  const QString title = tr("%1 (branch)").arg(currentChatTitle_);
  qint64 branch = 0;
  if (!tryDatabase([&](ChatDatabase& db) { branch = db.branchChat(from, position, title).id; })) return false;
  reloadChats();
  selectChat(branch);
  return true;
}

QVariantList ChatController::codeBlocks(const QString& text) const {
  QVariantList out;
  for (const CodeBlock& b : fencedCodeBlocks(text))
    out.push_back(QVariantMap{{QStringLiteral("language"), b.language}, {QStringLiteral("code"), b.code}});
  return out;
}

void ChatController::setDarkMode(bool dark) {
  if (dark == darkMode_) return;
  darkMode_ = applyColorScheme(dark);
  Q_EMIT darkModeChanged();
}

bool ChatController::copyText(const QString& text) {
  QClipboard* clipboard = QGuiApplication::clipboard();
  if (!clipboard) return false;
  clipboard->setText(text);
  return true;
}

}  // namespace zipmoe::app
