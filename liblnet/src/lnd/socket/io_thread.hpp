// An epoll I/O thread of the socket LND. Connections and listening sockets register a
// handler; other threads hand it work with post(). It wakes once a second for
// housekeeping (keepalives, timeouts, reconnects) and otherwise sleeps in epoll_wait,
// except while a message is half-way through a socket: then it polls (epoll_wait that
// returns at once) as the MPI LND's progress thread does (IdlePolicy), and sleeps again
// after a couple of hundred rounds without an event. Waking a thread for every few
// kilobytes of a stream costs more CPU than polling for them (docs/perf.md).
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <lnet/mutex.hpp>

namespace lnet::sock {

class IoHandler {
 public:
  // Handles `events`; true when it left a message half-way through its socket (part of
  // it received or still to send), so that the thread polls for the rest.
  virtual bool on_events(std::uint32_t events) = 0;

 protected:
  ~IoHandler() = default;
};

class IoThread {
 public:
  using Tick = std::function<void(std::chrono::steady_clock::time_point)>;

  explicit IoThread(Tick tick);
  ~IoThread();
  IoThread(const IoThread&) = delete;
  IoThread& operator=(const IoThread&) = delete;

  // fd registration; may be called from any thread.
  // 0 or -errno of epoll_ctl.
  [[nodiscard]] int add(int fd, IoHandler* h, std::uint32_t events);
  [[nodiscard]] int modify(int fd, IoHandler* h, std::uint32_t events);
  void remove(int fd);
  // Runs `fn` on the I/O thread (soon; not inline).
  void post(std::function<void()> fn);
  bool on_this_thread() const { return std::this_thread::get_id() == thread_.get_id(); }
  // Keeps `obj` alive until the end of the current loop turn (events of this turn may
  // still name it).
  void retire(std::shared_ptr<void> obj);
  void stop();
  // Rounds polled without sleeping since the start, and whether it polls now (tests).
  std::uint64_t polls() const { return polls_.load(std::memory_order_relaxed); }
  bool polling() const { return polling_.load(std::memory_order_acquire); }

 private:
  void run();

  Tick tick_;
  int epfd_ = -1;
  int wakefd_ = -1;
  Mutex mutex_;
  std::vector<std::function<void()>> posted_ LNET_GUARDED_BY(mutex_);
  std::vector<std::shared_ptr<void>> retired_ LNET_GUARDED_BY(mutex_);
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> polls_{0};
  std::atomic<bool> polling_{false};  // the I/O thread's own state, read by tests
  std::thread thread_;
};

}  // namespace lnet::sock
