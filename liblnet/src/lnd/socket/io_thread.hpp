// An epoll I/O thread of the socket LND. Connections and listening sockets register a
// handler; other threads hand it work with post(). It wakes once a second for
// housekeeping (keepalives, timeouts, reconnects) and otherwise sleeps in epoll_wait.
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
  virtual void on_events(std::uint32_t events) = 0;

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

 private:
  void run();

  Tick tick_;
  int epfd_ = -1;
  int wakefd_ = -1;
  Mutex mutex_;
  std::vector<std::function<void()>> posted_ LNET_GUARDED_BY(mutex_);
  std::vector<std::shared_ptr<void>> retired_ LNET_GUARDED_BY(mutex_);
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace lnet::sock
