// Locks that clang's thread-safety analysis understands (-Wthread-safety, the "tsa"
// preset): lnet::Mutex and lnet::SharedMutex wrap the standard ones, MutexLock /
// SharedLock hold them for a scope, and the LNET_* macros say which lock guards which
// member and which lock a function needs. With another compiler the macros are empty and
// the wrappers cost nothing. liblnet, its drivers and the MPI LND use them for every lock
// a class owns; an application need not.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define LNET_TSA(x) __attribute__((x))
#else
#define LNET_TSA(x)
#endif

#define LNET_CAPABILITY(x) LNET_TSA(capability(x))
#define LNET_SCOPED_CAPABILITY LNET_TSA(scoped_lockable)
#define LNET_GUARDED_BY(x) LNET_TSA(guarded_by(x))
#define LNET_PT_GUARDED_BY(x) LNET_TSA(pt_guarded_by(x))
#define LNET_ACQUIRED_BEFORE(...) LNET_TSA(acquired_before(__VA_ARGS__))
#define LNET_ACQUIRED_AFTER(...) LNET_TSA(acquired_after(__VA_ARGS__))
#define LNET_REQUIRES(...) LNET_TSA(requires_capability(__VA_ARGS__))
#define LNET_REQUIRES_SHARED(...) LNET_TSA(requires_shared_capability(__VA_ARGS__))
#define LNET_ACQUIRE(...) LNET_TSA(acquire_capability(__VA_ARGS__))
#define LNET_ACQUIRE_SHARED(...) LNET_TSA(acquire_shared_capability(__VA_ARGS__))
#define LNET_RELEASE(...) LNET_TSA(release_capability(__VA_ARGS__))
#define LNET_RELEASE_SHARED(...) LNET_TSA(release_shared_capability(__VA_ARGS__))
#define LNET_RELEASE_GENERIC(...) LNET_TSA(release_generic_capability(__VA_ARGS__))
#define LNET_TRY_ACQUIRE(...) LNET_TSA(try_acquire_capability(__VA_ARGS__))
#define LNET_EXCLUDES(...) LNET_TSA(locks_excluded(__VA_ARGS__))
#define LNET_RETURN_CAPABILITY(x) LNET_TSA(lock_returned(x))
// For what the analysis cannot follow (a lock chosen at run time, a lock handed between
// functions): say why next to it.
#define LNET_NO_THREAD_SAFETY_ANALYSIS LNET_TSA(no_thread_safety_analysis)

namespace lnet {

class LNET_CAPABILITY("mutex") Mutex {
 public:
  void lock() LNET_ACQUIRE() { m_.lock(); }
  void unlock() LNET_RELEASE() { m_.unlock(); }
  bool try_lock() LNET_TRY_ACQUIRE(true) { return m_.try_lock(); }
  // For std::condition_variable (through MutexLock::native).
  std::mutex& native() LNET_RETURN_CAPABILITY(this) { return m_; }

 private:
  std::mutex m_;
};

class LNET_CAPABILITY("mutex") SharedMutex {
 public:
  void lock() LNET_ACQUIRE() { m_.lock(); }
  void unlock() LNET_RELEASE() { m_.unlock(); }
  void lock_shared() LNET_ACQUIRE_SHARED() { m_.lock_shared(); }
  void unlock_shared() LNET_RELEASE_SHARED() { m_.unlock_shared(); }

 private:
  std::shared_mutex m_;
};

// Holds a Mutex from construction to destruction (or unlock()); waits on condition
// variables with it.
class LNET_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& m) LNET_ACQUIRE(m) : lk_(m.native()) {}
  ~MutexLock() LNET_RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() LNET_RELEASE() { lk_.unlock(); }
  void lock() LNET_ACQUIRE() { lk_.lock(); }

  // The predicate runs with the lock held: write it as a loop around wait() where it
  // reads guarded members (the analysis does not see into lambdas).
  void wait(std::condition_variable& cv) { cv.wait(lk_); }
  template <class Clock, class Duration>
  std::cv_status wait_until(std::condition_variable& cv, std::chrono::time_point<Clock, Duration> deadline) {
    return cv.wait_until(lk_, deadline);
  }
  template <class Rep, class Period>
  std::cv_status wait_for(std::condition_variable& cv, std::chrono::duration<Rep, Period> d) {
    return cv.wait_for(lk_, d);
  }
  // The standard lock underneath, for calls that take one (wait_with_progress).
  std::unique_lock<std::mutex>& native() { return lk_; }

 private:
  std::unique_lock<std::mutex> lk_;
};

class LNET_SCOPED_CAPABILITY WriteLock {
 public:
  explicit WriteLock(SharedMutex& m) LNET_ACQUIRE(m) : m_(m) { m_.lock(); }
  ~WriteLock() LNET_RELEASE() { m_.unlock(); }
  WriteLock(const WriteLock&) = delete;
  WriteLock& operator=(const WriteLock&) = delete;

 private:
  SharedMutex& m_;
};

class LNET_SCOPED_CAPABILITY ReadLock {
 public:
  explicit ReadLock(SharedMutex& m) LNET_ACQUIRE_SHARED(m) : m_(m) { m_.lock_shared(); }
  ~ReadLock() LNET_RELEASE() { m_.unlock_shared(); }
  ReadLock(const ReadLock&) = delete;
  ReadLock& operator=(const ReadLock&) = delete;

 private:
  SharedMutex& m_;
};

}  // namespace lnet
