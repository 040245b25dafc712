// The one intrusive FIFO: objects queue through their own `next` pointer, so queueing
// allocates nothing. An object has one link, so it is in at most one Fifo at a time.
#pragma once

#include <cstddef>

namespace lnet {

// A link for objects that layers queue without knowing their full type: the layer
// queues Fifo<FifoLink>, the owner of the derived type casts back what it pops.
struct FifoLink {
  FifoLink* next = nullptr;
};

// T has a member `next` that is a T* or a pointer to a base of T (a FifoLink).
template <class T>
class Fifo {
 public:
  bool empty() const { return head_ == nullptr; }
  std::size_t size() const { return count_; }
  T* front() const { return head_; }
  // The element after `x` (walks: for (T* x = q.front(); x; x = Fifo<T>::next(x))).
  static T* next(const T* x) { return static_cast<T*>(x->next); }

  void push_back(T* x) {
    x->next = nullptr;
    if (tail_)
      tail_->next = x;
    else
      head_ = x;
    tail_ = x;
    ++count_;
  }
  void push_front(T* x) {
    x->next = head_;
    head_ = x;
    if (!tail_) tail_ = x;
    ++count_;
  }
  T* pop_front() {
    T* x = head_;
    if (x) {
      head_ = next(x);
      if (!head_) tail_ = nullptr;
      x->next = nullptr;
      --count_;
    }
    return x;
  }
  // Moves every element of `other` to the back of this one, in order.
  void splice(Fifo& other) {
    if (other.empty()) return;
    if (tail_)
      tail_->next = other.head_;
    else
      head_ = other.head_;
    tail_ = other.tail_;
    count_ += other.count_;
    other = Fifo();
  }

 private:
  T* head_ = nullptr;
  T* tail_ = nullptr;
  std::size_t count_ = 0;
};

}  // namespace lnet
