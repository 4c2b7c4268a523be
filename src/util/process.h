// Process-wide facts the library must respect, never settings: whether this process is the child of
// a fork() made after an engine started (the engine's threads do not exist there), and whether the
// process is exiting (no callback may run then).
#pragma once

#include <cstdint>

namespace deepinfer {

// Increases in the child at every fork(); an object records it when made and is "forked" when it
// differs later.
uint64_t fork_generation();

// Set once by the library's exit handler; never cleared.
void set_process_exiting();
bool process_exiting();

}  // namespace deepinfer
