// Read-only view of a ChatModel: one text document with a header per message ("You",
// "Assistant"), the message text, and a grey stats line under finished replies. A streamed
// token only appends its text at the end, so a long conversation costs nothing per token.
#pragma once

#include <QPointer>
#include <QString>
#include <QTextBrowser>

#include <vector>

namespace specchat::ui {

class ChatModel;

class ChatView : public QTextBrowser {
  Q_OBJECT

 public:
  explicit ChatView(QWidget* parent = nullptr);
  // Shows `model` (not owned; may be null) and follows its changes.
  void setModel(ChatModel* model);

 private:
  void rebuild();
  void rewriteFrom(int row);  // re-renders rows row .. end
  void writeRow(int row);     // appends row at the document end
  void onRowsInserted(int first);
  void onDataChanged(int first, int last);

  QPointer<ChatModel> model_;
  std::vector<int> starts_;   // [n_rows] document position where each row's text begins
  QString tail_text_;         // text rendered for the last row (streaming fast path)
};

}  // namespace specchat::ui
