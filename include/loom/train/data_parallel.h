#pragma once
// How Model::fit trains one model in several processes at once (FitOptions::distributed).
// libloom knows no transport: loom::dist implements this over MPI (dist::data_parallel(),
// docs/distributed.md), so programs that train in one process need no MPI.
//
//   History h = model.fit(loader, {.epochs = 5, .distributed = dist::data_parallel()});
//
// Every call is collective: every rank makes the same calls in the same order.
#include <exception>
#include <vector>

#include "loom/core/api.h"
#include "loom/data/loader.h"

namespace loom::train {

class Model;
class Optimizer;

class LOOM_API DataParallel {
 public:
  virtual ~DataParallel() = default;
  virtual int rank() const = 0;  // 0 .. size() - 1; rank 0 shows progress and writes files
  virtual int size() const = 0;
  // At the start of fit: checks that the ranks agree (model, epochs done, loader position and
  // batches per epoch, named in the error every rank throws), makes every rank's parameters,
  // buffers and optimizer state rank 0's, and makes `train` this rank's shard of every epoch.
  virtual void begin(Model& model, data::DataLoader& train) = 0;
  // After backward, before the optimizer's step: every gradient becomes its mean over ranks.
  virtual void average_gradients(Optimizer& optimizer) = 0;
  // Every value becomes its mean over ranks (the same on every rank).
  virtual void average(std::vector<double>& values) = 0;
  // At the end of each phase of fit's loop (a step's forward and backward; its optimizer step,
  // metrics and on_batch_end; the validation pass; each callback hook), with what this rank
  // threw there (null: nothing).
  // When any rank failed, every rank throws: the failed ones their own exception, the others
  // an error naming the first failed rank and its message, so that none waits for it.
  virtual void check_failures(std::exception_ptr failure) = 0;
  // When fit returns or throws: releases what begin() set up for this fit (gradient hooks).
  virtual void end() noexcept {}
};

}  // namespace loom::train
