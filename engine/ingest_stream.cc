#include "engine/ingest_stream.h"

#include <utility>

namespace xpu::engine {

IngestWorkers::IngestWorkers(int threads) {
  if (threads < 1) threads = 1;
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Run(); });
}

IngestWorkers::~IngestWorkers() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void IngestWorkers::Post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> l(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void IngestWorkers::Run() {
  std::unique_lock<std::mutex> l(mu_);
  while (true) {
    cv_.wait(l, [this] { return stopping_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stopping, and nothing left
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    l.unlock();
    task();
    l.lock();
  }
}

IngestStream::IngestStream(grpc::CallbackServerContext* ctx, IngestWorkers* workers,
                           size_t max_queued_writes)
    : ctx_(ctx), workers_(workers), max_queued_writes_(max_queued_writes) {}

void IngestStream::Start(std::unique_ptr<Handler> handler) {
  handler_ = std::move(handler);
  StartRead(&in_);
}

void IngestStream::OnReadDone(bool ok) {
  if (ok) {
    workers_->Post([this] { Handle(); });
  } else {
    workers_->Post([this] { End(grpc::Status::OK); });
  }
}

void IngestStream::Handle() {
  grpc::Status st = handler_->OnMessage(in_);
  if (!st.ok()) {
    End(std::move(st));
    return;
  }
  in_.Clear();
  StartRead(&in_);
}

void IngestStream::End(grpc::Status why) {
  handler_->OnEnd(why);
  bool finish;
  {
    std::lock_guard<std::mutex> l(mu_);
    ending_ = true;
    status_ = std::move(why);
    finish = FinishWantedLocked();
  }
  if (finish) Finish(status_);
}

bool IngestStream::FinishWantedLocked() {
  if (!ending_ || finished_ || writing_) return false;
  finished_ = true;
  return true;
}

bool IngestStream::Write(xpu::v1::EngineMessage m) {
  bool backlog = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (ending_ || write_failed_ || self_cancelled_.load(std::memory_order_relaxed)) return false;
    if (writes_.size() >= max_queued_writes_) {
      backlog = true;
      self_cancelled_.store(true, std::memory_order_relaxed);
    } else {
      writes_.push_back(std::move(m));
      if (!writing_) {
        writing_ = true;
        StartWrite(&writes_.front());
      }
    }
  }
  if (!backlog) return true;
  handler_->OnWriteBacklog();
  ctx_->TryCancel();
  return false;
}

void IngestStream::OnWriteDone(bool ok) {
  bool finish;
  {
    std::lock_guard<std::mutex> l(mu_);
    writes_.pop_front();
    if (!ok) {
      write_failed_ = true;  // the call is broken: its read fails too
      writes_.clear();
    }
    writing_ = !writes_.empty();
    if (writing_) StartWrite(&writes_.front());
    finish = FinishWantedLocked();
  }
  if (finish) Finish(status_);
}

void IngestStream::OnCancel() {
  cancelled_.store(true, std::memory_order_relaxed);
  if (!self_cancelled_.load(std::memory_order_relaxed)) handler_->OnCancelled();
}

void IngestStream::OnDone() { delete this; }

}  // namespace xpu::engine
