// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html) and
// the annotated mutex they are checked against. Under clang with -Wthread-safety every access to
// a GNOMON_GUARDED_BY field and every call of a GNOMON_REQUIRES function is checked against the
// locks held (`make check-thread-safety`); under gcc the macros expand to nothing.
//
// Use gnomon::Mutex for a lock that guards fields, gnomon::MutexLock to hold it for a scope. A
// condition wait goes through the scoped lock's native() std::unique_lock (Clock::WaitUntil and
// std::condition_variable take one); the analysis treats the lock as held across the wait, which
// it is on return.
//
// Thread safety: Mutex and MutexLock are as std::mutex and std::unique_lock.
#ifndef GNOMON_SRC_BASE_THREAD_ANNOTATIONS_H_
#define GNOMON_SRC_BASE_THREAD_ANNOTATIONS_H_

#include <mutex>

#if defined(__clang__)
#define GNOMON_THREAD_ANNOTATION_(x) __attribute__((x))
#else
#define GNOMON_THREAD_ANNOTATION_(x)
#endif

#define GNOMON_CAPABILITY(x) GNOMON_THREAD_ANNOTATION_(capability(x))
#define GNOMON_SCOPED_CAPABILITY GNOMON_THREAD_ANNOTATION_(scoped_lockable)
#define GNOMON_GUARDED_BY(x) GNOMON_THREAD_ANNOTATION_(guarded_by(x))
#define GNOMON_PT_GUARDED_BY(x) GNOMON_THREAD_ANNOTATION_(pt_guarded_by(x))
#define GNOMON_ACQUIRED_BEFORE(...) GNOMON_THREAD_ANNOTATION_(acquired_before(__VA_ARGS__))
#define GNOMON_ACQUIRED_AFTER(...) GNOMON_THREAD_ANNOTATION_(acquired_after(__VA_ARGS__))
#define GNOMON_REQUIRES(...) GNOMON_THREAD_ANNOTATION_(requires_capability(__VA_ARGS__))
#define GNOMON_ACQUIRE(...) GNOMON_THREAD_ANNOTATION_(acquire_capability(__VA_ARGS__))
#define GNOMON_TRY_ACQUIRE(...) GNOMON_THREAD_ANNOTATION_(try_acquire_capability(__VA_ARGS__))
#define GNOMON_RELEASE(...) GNOMON_THREAD_ANNOTATION_(release_capability(__VA_ARGS__))
#define GNOMON_EXCLUDES(...) GNOMON_THREAD_ANNOTATION_(locks_excluded(__VA_ARGS__))
#define GNOMON_ASSERT_CAPABILITY(x) GNOMON_THREAD_ANNOTATION_(assert_capability(x))
#define GNOMON_RETURN_CAPABILITY(x) GNOMON_THREAD_ANNOTATION_(lock_returned(x))
#define GNOMON_NO_THREAD_SAFETY_ANALYSIS GNOMON_THREAD_ANNOTATION_(no_thread_safety_analysis)

namespace gnomon {

// A std::mutex the analysis knows as a capability.
class GNOMON_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() GNOMON_ACQUIRE() { mu_.lock(); }
  void Unlock() GNOMON_RELEASE() { mu_.unlock(); }
  bool TryLock() GNOMON_TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // Tells the analysis the lock is held here (a condition-wait predicate, which runs under the
  // lock but is analysed as a function of its own). No check at run time.
  void AssertHeld() const GNOMON_ASSERT_CAPABILITY(this) {}

  // The wrapped mutex, for MutexLock.
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds a Mutex for a scope (std::unique_lock underneath: it may be let go and taken again).
class GNOMON_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) GNOMON_ACQUIRE(mu) : lock_(mu.native()) {}
  ~MutexLock() GNOMON_RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void Unlock() GNOMON_RELEASE() { lock_.unlock(); }
  void Lock() GNOMON_ACQUIRE() { lock_.lock(); }

  // For condition waits (Clock::WaitUntil, std::condition_variable::wait). REQUIRES: held.
  std::unique_lock<std::mutex>& native() { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace gnomon

#endif  // GNOMON_SRC_BASE_THREAD_ANNOTATIONS_H_
