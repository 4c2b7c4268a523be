#include "grammar/compile_budget.h"

namespace deepinfer::grammar {
namespace {

struct State {
  bool active = false;
  uint64_t limit = 0;
  uint64_t used = 0;
};

thread_local State state;  // per-thread: the budget of the compile running on this thread (Scope)

}  // namespace

CompileBudget::Scope::Scope(uint64_t steps) {
  if (state.active) return;
  state = State{true, steps, 0};
  owner_ = true;
}

CompileBudget::Scope::~Scope() {
  if (owner_) state = State{};
}

void CompileBudget::charge(uint64_t steps) {
  if (state.active) state.used += steps;
}

Result<void> CompileBudget::check() {
  if (state.active && state.used > state.limit) {
    return make_error(Code::kGrammar, "grammar too complex to compile (more than {} steps of work)", state.limit);
  }
  return ok();
}

uint64_t CompileBudget::used() { return state.used; }

}  // namespace deepinfer::grammar
