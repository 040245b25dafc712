// The epoll loop.
#include "io_thread.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <lnet/log.hpp>
#include <lnet/mutex.hpp>
#include <lnet/progress.hpp>

namespace lnet::sock {

IoThread::IoThread(Tick tick) : tick_(std::move(tick)) {
  epfd_ = epoll_create1(EPOLL_CLOEXEC);
  wakefd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;  // the wake-up fd
  epoll_ctl(epfd_, EPOLL_CTL_ADD, wakefd_, &ev);
  thread_ = std::thread([this] { run(); });
}

IoThread::~IoThread() {
  stop();
  close(wakefd_);
  close(epfd_);
}

void IoThread::stop() {
  if (stop_.exchange(true)) return;
  std::uint64_t one = 1;
  (void)!write(wakefd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

int IoThread::add(int fd, IoHandler* h, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = h;
  return epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

int IoThread::modify(int fd, IoHandler* h, std::uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.ptr = h;
  return epoll_ctl(epfd_, EPOLL_CTL_MOD, fd, &ev) == 0 ? 0 : -errno;
}

void IoThread::remove(int fd) { epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr); }

void IoThread::post(std::function<void()> fn) {
  {
    MutexLock g(mutex_);
    posted_.push_back(std::move(fn));
  }
  std::uint64_t one = 1;
  (void)!write(wakefd_, &one, sizeof one);
}

void IoThread::retire(std::shared_ptr<void> obj) {
  MutexLock g(mutex_);
  retired_.push_back(std::move(obj));
}

void IoThread::run() {
  constexpr int kMaxEvents = 64;
  epoll_event events[kMaxEvents];
  auto next_tick = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  IdlePolicy idle(1);  // its naps are never taken: the thread sleeps in epoll_wait instead
  while (!stop_.load()) {
    auto now = std::chrono::steady_clock::now();
    int wait_ms = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(next_tick - now).count());
    bool polling = polling_.load(std::memory_order_relaxed);  // a handler left a message half-way
    if (polling) {
      wait_ms = 0;
      polls_.fetch_add(1, std::memory_order_relaxed);
    }
    int n = epoll_wait(epfd_, events, kMaxEvents, wait_ms < 0 ? 0 : wait_ms);
    if (n < 0 && errno != EINTR) {
      int err = errno;
      LNET_LOG(Error, kLogLnd, "epoll_wait: %s (errno %d); the I/O thread stops", std::strerror(err), err);
      break;
    }
    int handled = 0;
    bool halfway = false;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.ptr == nullptr) {
        std::uint64_t v;
        while (read(wakefd_, &v, sizeof v) > 0) {
        }
        continue;
      }
      ++handled;
      halfway |= static_cast<IoHandler*>(events[i].data.ptr)->on_events(events[i].events);
    }
    // A turn with socket events decides; one without (a wake-up for posted work, or
    // nothing) leaves a poll going on, counted as an idle round.
    if (handled > 0) {
      polling = halfway;
      idle.restart();
    } else if (polling) {
      polling = idle.after_round(false, [] { return false; }) == 0;
    }
    polling_.store(polling, std::memory_order_release);
    std::vector<std::function<void()>> work;
    {
      MutexLock g(mutex_);
      work.swap(posted_);
    }
    for (auto& fn : work) fn();
    now = std::chrono::steady_clock::now();
    if (now >= next_tick) {
      tick_(now);
      next_tick = now + std::chrono::seconds(1);
    }
    std::vector<std::shared_ptr<void>> dead;
    {
      MutexLock g(mutex_);
      dead.swap(retired_);
    }
  }
}

}  // namespace lnet::sock
