// A deterministic bound on the work of one grammar compile. build_grammar() opens a scope; the
// automaton constructions and the front ends charge steps to it (roughly one per state, edge or
// symbol they create), and fail with kGrammar "too complex" once it is spent. Counting steps
// instead of time keeps the outcome the same on every machine and under any load.
#pragma once

#include "util/result.h"

#include <cstdint>

namespace deepinfer::grammar {

class CompileBudget {
 public:
  // About a few seconds of work on one core; legitimate specs use well under 1%.
  static constexpr uint64_t kDefaultSteps = 400'000'000;

  // Installs a budget for the calling thread until destroyed (nested scopes share the outer one).
  class Scope {
   public:
    explicit Scope(uint64_t steps = kDefaultSteps);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    bool owner_ = false;
  };

  // Adds work; without a scope nothing is counted.
  static void charge(uint64_t steps);
  // kGrammar once the budget is spent.
  static Result<void> check();
  // charge() then check().
  static Result<void> spend(uint64_t steps) {
    charge(steps);
    return check();
  }
  static uint64_t used();
};

}  // namespace deepinfer::grammar
