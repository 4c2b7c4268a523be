#include "handles.h"

#include "util/process.h"

#include <pthread.h>

#include <cmath>
#include <cstdlib>
#include <limits>

namespace deepinfer::capi {

// Never destroyed: at process exit, static destructors run in an order the library does not
// control, and an engine thread (or a callback a binding delivers late) may still reach a table.
ConfigTable& configs() { static auto* t = new ConfigTable; return *t; }
EngineTable& engines() { static auto* t = new EngineTable; return *t; }
SamplingTable& samplings() { static auto* t = new SamplingTable; return *t; }
SessionTable& sessions() { static auto* t = new SessionTable; return *t; }
EventTable& events() { static auto* t = new EventTable; return *t; }
GrammarTable& grammars() { static auto* t = new GrammarTable; return *t; }
TokenizerTable& tokenizers() { static auto* t = new TokenizerTable; return *t; }
MatcherTable& matchers() { static auto* t = new MatcherTable; return *t; }
QueueTable& queues() { static auto* t = new QueueTable; return *t; }
StatsTable& stats_snapshots() { static auto* t = new StatsTable; return *t; }

EventData::EventData(Event&& e) : event(std::move(e)) {
  if (!event.has_logprobs) return;
  for (const Logprobs& lp : event.logprobs) top_k = std::max(top_k, lp.top.size());
  const size_t n = event.logprobs.size();
  logprobs.reserve(n);
  ranks.reserve(n);
  top_ids.assign(n * top_k, -1);
  top_logprobs.assign(n * top_k, -std::numeric_limits<float>::infinity());
  for (size_t i = 0; i < n; ++i) {
    const Logprobs& lp = event.logprobs[i];
    logprobs.push_back(lp.logprob);
    ranks.push_back(lp.rank);
    for (size_t j = 0; j < lp.top.size(); ++j) {
      top_ids[i * top_k + j] = lp.top[j].token;
      top_logprobs[i * top_k + j] = lp.top[j].logprob;
    }
  }
}

di_event* event_handle(Event&& e) { return events().add<di_event>(std::make_shared<const EventData>(std::move(e))); }

namespace {

// fork(): the child must find every table unlocked, although another thread may hold a lock at the
// moment of the fork. Holding all of them across fork() makes that so.
template <class F>
void each_table(F&& f) {
  f(configs()), f(engines()), f(samplings()), f(sessions()), f(events()), f(grammars()), f(tokenizers()), f(matchers()),
      f(queues()), f(stats_snapshots());
}
void before_fork() { each_table([](auto& t) { t.lock_for_fork(); }); }
void after_fork() { each_table([](auto& t) { t.unlock_after_fork(); }); }

[[maybe_unused]] const bool fork_handlers = [] {
  pthread_atfork(before_fork, after_fork, after_fork);
  return true;
}();

void stop_all_engines() {
  set_process_exiting();
  for (const auto& e : engines().all()) e->stop_at_exit();
}

}  // namespace

void keep_until_exit(std::shared_ptr<const void> object) {
  static std::mutex mu;  // process-wide: guards `kept`
  static auto* kept = new std::vector<std::shared_ptr<const void>>;  // process-wide: objects kept until exit, by contract
  std::lock_guard lock(mu);
  kept->push_back(std::move(object));
}

void stop_engines_at_exit() {
  // Registered after each engine is made, so that it runs before the exit handlers of whatever that
  // engine started (the CUDA runtime's among them). Cheap to run more than once.
  std::atexit(stop_all_engines);
}

}  // namespace deepinfer::capi
