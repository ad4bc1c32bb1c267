// Restores the draft visualization of replies reloaded from the database: for every finished
// assistant row of a ChatModel that has stored token ids but no pieces, asks the engine
// worker to decode them (EngineWorker::decodePieces) and puts the pieces back into the row.
// Asks again after models load (the vocabulary lives with them). GUI thread only.
#pragma once

#include <QObject>
#include <QPointer>
#include <QSet>

#include "ui/engine_types.h"

namespace specchat::ui {

class ChatModel;
class EngineWorker;

class PieceRebuilder : public QObject {
  Q_OBJECT

 public:
  // `model` and `worker` must outlive the rebuilder (it is usually their child).
  PieceRebuilder(ChatModel* model, EngineWorker* worker, QObject* parent = nullptr);

  // Requests every row that lacks pieces (rows already asked about are skipped).
  void scan();

 Q_SIGNALS:
  void decodeRequested(const specchat::ui::PiecesRequest& request);  // queued to the worker

 private:
  void onDecoded(const specchat::ui::DecodedPieces& d);
  QPointer<ChatModel> model_;
  QSet<qint64> asked_;   // message ids with a request in flight
  QSet<qint64> failed_;  // message ids the loaded models cannot decode (until the next load)
};

}  // namespace specchat::ui
