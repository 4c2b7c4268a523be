// Where the engine sends the events of a generation, and whom it asks whether to stop it: the
// engine's step thread knows its requesters (sessions) only through this interface.
#pragma once

#include "engine/event.h"

#include <string>
#include <vector>

namespace deepinfer {

class EventSink {
 public:
  virtual ~EventSink() = default;

  // Whether the generation is to be cancelled (asked once per step, any thread may set it).
  virtual bool cancel_requested() const = 0;
  // Whether completion 0's output of a cancelled generation joins the context (and its state stays).
  virtual bool keep_cancelled_output() const = 0;
  // Hands over the events of one step. `ended` marks the end of the generation (the events end with
  // its DONE event, and the engine's statistics no longer count it); `output` and `output_text`
  // (completion 0's tokens and text, null when they do not join the context) join the context
  // first. Called on the engine's step thread, never concurrently for one sink.
  virtual void deliver(std::vector<Event>&& events, bool ended, const std::vector<int32_t>* output,
                       const std::string* output_text) = 0;
};

}  // namespace deepinfer
