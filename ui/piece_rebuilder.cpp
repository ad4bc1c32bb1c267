#include "ui/piece_rebuilder.h"

#include "ui/chat_model.h"
#include "ui/engine_worker.h"

namespace specchat::ui {

PieceRebuilder::PieceRebuilder(ChatModel* model, EngineWorker* worker, QObject* parent)
    : QObject(parent), model_(model) {
  connect(this, &PieceRebuilder::decodeRequested, worker, &EngineWorker::decodePieces, Qt::QueuedConnection);
  connect(worker, &EngineWorker::piecesDecoded, this, &PieceRebuilder::onDecoded, Qt::QueuedConnection);
  connect(worker, &EngineWorker::modelsLoaded, this, [this] {
    failed_.clear();  // maybe another vocabulary now: ask again
    scan();
  }, Qt::QueuedConnection);
  connect(model, &QAbstractItemModel::modelReset, this, &PieceRebuilder::scan);
  connect(model, &QAbstractItemModel::rowsInserted, this, &PieceRebuilder::scan);
  scan();
}

void PieceRebuilder::scan() {
  if (!model_) return;
  for (const ChatItem& it : model_->items()) {
    if (it.role != QLatin1String("assistant") || it.streaming || it.id <= 0 || !it.pieces.isEmpty() ||
        it.token_ids.empty() || asked_.contains(it.id) || failed_.contains(it.id)) {
      continue;
    }
    asked_.insert(it.id);
    PiecesRequest r;
    r.message_id = it.id;
    r.ids = it.token_ids;
    r.drafted = it.drafted;
    r.tokenizer_hash = it.tokenizer_hash;
    Q_EMIT decodeRequested(r);
  }
}

void PieceRebuilder::onDecoded(const DecodedPieces& d) {
  asked_.remove(d.message_id);  // a row reloaded later (conversation switch) asks again
  if (!model_) return;
  if (!d.ok) {
    failed_.insert(d.message_id);  // retried after the next model load
    return;
  }
  for (int row = 0; row < model_->rowCount(); ++row) {
    const ChatItem& it = model_->item(row);
    if (it.id != d.message_id || !it.pieces.isEmpty() || it.streaming) continue;
    QList<TokenPiece> pieces;
    pieces.reserve(d.texts.size());
    for (int i = 0; i < d.texts.size(); ++i) {
      pieces.append(TokenPiece{d.texts.at(i), d.drafted.at(static_cast<size_t>(i)) != 0,
                               d.steps.at(static_cast<size_t>(i))});
    }
    model_->setPieces(row, pieces);
    return;
  }
}

}  // namespace specchat::ui
