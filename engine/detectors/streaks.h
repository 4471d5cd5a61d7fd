// streaks — how many consecutive windows a finding held, per job and key, so
// that a detector reports a window-local finding only once it persists (a
// job's first window, with its start-up steps, or one noisy window is not a
// slowdown).
//
//   Streaks::Window held = streaks_.Begin(job.job());
//   for (...) if (finding && held.Hold(key) >= persist) Report(...);
//
// A key not held in a window starts over; the window's counts replace the
// last window's when the Window object goes out of scope. Not thread-safe: a
// detector is never called concurrently (detector.h).
#ifndef XPU_ENGINE_DETECTORS_STREAKS_H_
#define XPU_ENGINE_DETECTORS_STREAKS_H_

#include <map>
#include <string>
#include <utility>

namespace xpu::engine {

class Streaks {
 public:
  class Window {
   public:
    Window(const Window&) = delete;
    Window& operator=(const Window&) = delete;
    ~Window() { *slot_ = std::move(now_); }

    // Consecutive windows `key` held, this one included (holding a key twice
    // in one window counts once).
    int Hold(const std::string& key) {
      int& n = now_[key];
      if (n == 0) {
        auto it = before_.find(key);
        n = (it == before_.end() ? 0 : it->second) + 1;
      }
      return n;
    }

   private:
    friend class Streaks;
    explicit Window(std::map<std::string, int>* slot) : slot_(slot), before_(std::move(*slot)) {}
    std::map<std::string, int>* slot_;
    std::map<std::string, int> before_, now_;
  };

  Window Begin(const std::string& job) { return Window(&by_job_[job]); }

 private:
  std::map<std::string, std::map<std::string, int>> by_job_;
};

}  // namespace xpu::engine

#endif  // XPU_ENGINE_DETECTORS_STREAKS_H_
