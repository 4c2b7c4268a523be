// Completion queues: events of many sessions in one place with their tags, a file descriptor readable
// exactly while events wait, and the rules around attaching, freeing and misuse.
#include "abi_helpers.h"

#include <poll.h>

#include <chrono>
#include <map>
#include <thread>

namespace {

using namespace abitest;

struct QueueFree {
  void operator()(di_queue* q) const { di_queue_free(q); }
};
using Queue = std::unique_ptr<di_queue, QueueFree>;

Queue make_queue() {
  di_queue* q = nullptr;
  EXPECT_DI_OK(di_queue_create(&q));
  return Queue(q);
}

bool readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

class Queues : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = open_engine(DI_DEMO_MODEL_DIR).release(); }
  static void TearDownTestSuite() {
    di_engine_free(engine_);
    engine_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(engine_, nullptr); }
  static di_engine* engine() { return engine_; }
  static di_engine* engine_;
};
di_engine* Queues::engine_ = nullptr;

// Events of several sessions arrive with their tags, each session's in order, each ending with
// DONE; the outputs equal those of polling each session.
TEST_F(Queues, ManySessionsOneQueueSameOutputsAsPolling) {
  constexpr int kSessions = 6;
  Queue q = make_queue();
  int32_t fd = -1;
  ASSERT_DI_OK(di_queue_fd(q.get(), &fd));
  std::vector<Session> sessions;
  std::vector<std::vector<int32_t>> prompts;
  Sampling sp = seeded(17, 12, 2);
  for (int i = 0; i < kSessions; ++i) {
    sessions.push_back(make_session(engine()));
    prompts.push_back(tokenize(engine(), std::string("def f") + std::to_string(i) + "(x):"));
    ASSERT_DI_OK(di_session_add_tokens(sessions[i].get(), prompts[i].data(), prompts[i].size()));
    ASSERT_DI_OK(di_session_set_queue(sessions[i].get(), q.get(), 100 + i));
    ASSERT_DI_OK(di_session_generate(sessions[i].get(), sp.get()));
  }
  std::map<uint64_t, Output> outs;
  for (int i = 0; i < kSessions; ++i) outs[100 + i].completions.resize(2);
  int done = 0;
  while (done < kSessions) {
    ASSERT_TRUE(readable(fd, 60000)) << "the queue's fd did not become readable";
    for (;;) {
      di_event* raw = nullptr;
      uint64_t tag = 0;
      ASSERT_DI_OK(di_queue_poll(q.get(), 0, &raw, &tag));
      if (!raw) break;
      Event ev(raw);
      ASSERT_TRUE(outs.count(tag)) << "unknown tag " << tag;
      collect(raw, outs[tag], false);
      di_event_type kind = 0;
      ASSERT_DI_OK(di_event_kind(raw, &kind));
      done += kind == DI_EVENT_DONE;
    }
  }
  EXPECT_FALSE(readable(fd, 0)) << "readable with no event left";
  for (int i = 0; i < kSessions; ++i) {
    EXPECT_EQ(outs[100 + i].done_events, 1);
    ASSERT_DI_OK(di_session_set_queue(sessions[i].get(), nullptr, 0));  // back to polling
    Output polled = run_prompt(engine(), prompts[i], sp.get(), 2);
    for (int c = 0; c < 2; ++c) EXPECT_EQ(outs[100 + i].completions[c].tokens, polled.completions[c].tokens);
  }
}

TEST_F(Queues, BlockingPollFromSeveralThreadsGetsEachEventOnce) {
  Queue q = make_queue();
  Session s = make_session(engine());
  const auto p = tokenize(engine(), "import os");
  ASSERT_DI_OK(di_session_add_tokens(s.get(), p.data(), p.size()));
  ASSERT_DI_OK(di_session_set_queue(s.get(), q.get(), 7));
  Sampling sp = seeded(3, 40);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  ASSERT_DI_OK(di_session_generate(s.get(), sp.get()));
  std::atomic<int> tokens{0}, dones{0};
  std::vector<std::thread> pollers;
  for (int t = 0; t < 4; ++t)
    pollers.emplace_back([&] {
      while (dones.load() == 0) {
        di_event* raw = nullptr;
        uint64_t tag = 0;
        EXPECT_DI_OK(di_queue_poll(q.get(), 50, &raw, &tag));
        if (!raw) continue;
        Event ev(raw);
        EXPECT_EQ(tag, 7u);
        di_event_type kind = 0;
        EXPECT_DI_OK(di_event_kind(raw, &kind));
        const int32_t* ids = nullptr;
        size_t n = 0;
        EXPECT_DI_OK(di_event_tokens_view(raw, &ids, &n));
        if (kind == DI_EVENT_TOKENS) tokens += static_cast<int>(n);
        if (kind == DI_EVENT_DONE) ++dones;
      }
    });
  for (auto& t : pollers) t.join();
  EXPECT_EQ(tokens.load(), 40);
  EXPECT_EQ(dones.load(), 1);
}

TEST_F(Queues, Misuse) {
  Queue q = make_queue();
  di_event* ev = nullptr;
  uint64_t tag = 0;
  int32_t fd = 0;
  EXPECT_DI_CODE(di_queue_create(nullptr), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_queue_poll(q.get(), 0, nullptr, &tag), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_queue_poll(q.get(), 0, &ev, nullptr), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_queue_fd(q.get(), nullptr), DI_ERR_INVALID_ARGUMENT);
  EXPECT_DI_CODE(di_queue_poll(nullptr, 0, &ev, &tag), DI_ERR_INVALID_HANDLE);
  EXPECT_DI_CODE(di_queue_fd(nullptr, &fd), DI_ERR_INVALID_HANDLE);
  // Nothing attached: a poll with a timeout returns no event.
  ASSERT_DI_OK(di_queue_poll(q.get(), 10, &ev, &tag));
  EXPECT_EQ(ev, nullptr);
  // A session handle is not a queue handle.
  Session s = make_session(engine());
  EXPECT_DI_CODE(di_session_set_queue(s.get(), reinterpret_cast<di_queue*>(s.get()), 1), DI_ERR_INVALID_HANDLE);
  // Attached: polling the session is a state error; not while generating.
  const auto p = tokenize(engine(), "x = 1");
  ASSERT_DI_OK(di_session_add_tokens(s.get(), p.data(), p.size()));
  ASSERT_DI_OK(di_session_set_queue(s.get(), q.get(), 1));
  EXPECT_DI_CODE(di_session_poll(s.get(), 0, &ev), DI_ERR_STATE);
  Sampling sp = seeded(1, 200);
  ASSERT_DI_OK(di_sampling_set_ignore_eos(sp.get(), 1));
  ASSERT_DI_OK(di_session_generate(s.get(), sp.get()));
  EXPECT_DI_CODE(di_session_set_queue(s.get(), nullptr, 0), DI_ERR_STATE);
  EXPECT_DI_CODE(di_session_set_callback(s.get(), nullptr, nullptr), DI_ERR_STATE);
  ASSERT_DI_OK(di_session_cancel(s.get()));
  // Freeing the queue while its session runs: a blocked poller is released (the handle is gone),
  // and the session goes back to polling: its last events are there.
  di_queue* raw_q = q.release();
  std::thread poller([&] {
    for (;;) {
      di_event* e = nullptr;
      uint64_t t = 0;
      di_error* err = di_queue_poll(raw_q, -1, &e, &t);
      if (err) {
        const di_code code = di_error_code(err);
        EXPECT_TRUE(code == DI_ERR_CLOSED || code == DI_ERR_INVALID_HANDLE) << di_error_message(err);
        di_error_free(err);
        return;
      }
      di_event_free(e);
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  di_queue_free(raw_q);
  poller.join();
  EXPECT_DI_CODE(di_queue_poll(raw_q, 0, &ev, &tag), DI_ERR_INVALID_HANDLE);
  for (int i = 0; i < 6000; ++i) {  // the generation ends (cancelled); its DONE may have gone to the queue
    di_error* err = di_session_generate(s.get(), sp.get());
    if (!err) break;
    EXPECT_EQ(status(err).code, DI_ERR_STATE);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_DI_OK(di_session_cancel(s.get()));
  discard(s.get());  // polling works again on the session whose queue was freed
}

}  // namespace
