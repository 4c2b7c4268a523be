#include "sample/stop_string_matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace deepinfer {
namespace {

struct Outcome {
  std::string text;                      // everything emitted, flush included
  std::optional<StopStringMatch> match;
};

// Feeds `pieces` in order and collects the emitted text (flushing when no stop string matched).
Outcome run(StopStringMatcher matcher, const std::vector<std::string>& pieces) {
  Outcome out;
  for (const std::string& piece : pieces) {
    StopStringFeed feed = matcher.feed(piece);
    out.text += feed.text;
    if (feed.match) {
      out.match = feed.match;
      return out;
    }
  }
  out.text += matcher.finish();
  return out;
}

TEST(StopStringMatcher, HoldsBackAPossibleStartAndReleasesIt) {
  StopStringMatcher m({"</end>"}, false);
  EXPECT_EQ(m.feed("Hello </").text, "Hello ");
  EXPECT_EQ(m.feed("b").text, "</b");
  EXPECT_EQ(m.feed(" ok <").text, " ok ");
  EXPECT_EQ(m.finish(), "<");
  EXPECT_FALSE(m.stopped());
}

TEST(StopStringMatcher, MatchSplitAcrossPiecesIsCutFromTheOutput) {
  StopStringMatcher m({"STOP"}, false);
  EXPECT_EQ(m.feed("abc ST").text, "abc ");
  StopStringFeed feed = m.feed("OP and more");
  EXPECT_EQ(feed.text, "");
  ASSERT_TRUE(feed.match);
  EXPECT_EQ(feed.match->stop_index, 0u);
  EXPECT_EQ(feed.match->offset, 4u);
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.feed("later").text, "");
  EXPECT_EQ(m.finish(), "");
}

TEST(StopStringMatcher, IncludeStopStringEmitsItAndHoldsNothing) {
  StopStringMatcher m({"STOP"}, true);
  EXPECT_EQ(m.feed("abc ST").text, "abc ST");
  StopStringFeed feed = m.feed("OP and more");
  EXPECT_EQ(feed.text, "OP");
  ASSERT_TRUE(feed.match);
  EXPECT_EQ(feed.match->offset, 4u);
}

TEST(StopStringMatcher, EarliestEndWinsThenTheLongest) {
  // "bc" completes before "abcd" could.
  auto a = run(StopStringMatcher({"abcd", "bc"}, false), {"xabcd"});
  ASSERT_TRUE(a.match);
  EXPECT_EQ(a.match->stop_index, 1u);
  EXPECT_EQ(a.text, "xa");
  // Both end at the same byte: the longer one cuts more.
  auto b = run(StopStringMatcher({"b", "ab"}, false), {"xab"});
  ASSERT_TRUE(b.match);
  EXPECT_EQ(b.match->stop_index, 1u);
  EXPECT_EQ(b.text, "x");
}

TEST(StopStringMatcher, SelfOverlappingPattern) {
  auto r = run(StopStringMatcher({"aab"}, false), {"a", "a", "a", "a", "b", "c"});
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.text, "aa");
  EXPECT_EQ(r.match->offset, 2u);
}

TEST(StopStringMatcher, MultibyteStopStringSplitInsideACodePoint) {
  // "終わり" is 9 bytes; the pieces split its first code point.
  const std::string stop = "終わり";
  auto r = run(StopStringMatcher({stop}, false),
               {"これで", stop.substr(0, 1), stop.substr(1, 4), stop.substr(5), "です"});
  ASSERT_TRUE(r.match);
  EXPECT_EQ(r.text, "これで");
  EXPECT_EQ(r.match->offset, std::string("これで").size());

  StopStringMatcher m({stop}, false);
  EXPECT_EQ(m.feed("これで終わ").text, "これで");  // the held part ends on a code point boundary
  EXPECT_EQ(m.feed("った").text, "終わった");
}

TEST(StopStringMatcher, DisarmedPiecesPassStopStringsThrough) {
  StopStringMatcher m({"ab"}, false);
  EXPECT_EQ(m.feed("xaby", /*can_stop=*/false).text, "xaby");
  EXPECT_EQ(m.feed("a", false).text, "");  // still a possible start
  StopStringFeed armed = m.feed("b");
  ASSERT_TRUE(armed.match);
  EXPECT_EQ(armed.text, "");
  EXPECT_EQ(armed.match->offset, 4u);
}

TEST(StopStringMatcher, DisarmedMatchStillHoldsALongerCandidate) {
  // "ab" completes while disarmed; "abab" may still complete later.
  StopStringMatcher m({"ab", "abab"}, false);
  EXPECT_EQ(m.feed("ab", false).text, "");
  StopStringFeed feed = m.feed("ab");
  ASSERT_TRUE(feed.match);
  EXPECT_EQ(feed.match->stop_index, 1u);
  EXPECT_EQ(feed.match->offset, 0u);
}

TEST(StopStringMatcher, FinishReleasesTheTailOnlyWithoutAStop) {
  StopStringMatcher open({"xy"}, false);
  EXPECT_EQ(open.feed("ab x").text, "ab ");
  EXPECT_EQ(open.finish("\uFFFD"), "x\uFFFD");  // the held "x", then the tail
  StopStringMatcher stopped({" "}, false);
  EXPECT_TRUE(stopped.feed("a b").match.has_value());
  EXPECT_EQ(stopped.finish("\uFFFD"), "") << "text after the stop string leaked";
  StopStringMatcher tail_completes({"x\uFFFD"}, false);
  EXPECT_EQ(tail_completes.feed("x").text, "");
  EXPECT_EQ(tail_completes.finish("\uFFFD"), "x\uFFFD");  // the tail is fed disarmed: no match at the end
}

TEST(StopStringMatcher, NoStopStringsPassesEverything) {
  StopStringMatcher m({}, false);
  EXPECT_EQ(m.feed("anything").text, "anything");
  EXPECT_EQ(m.finish(), "");
}

// Brute force over the whole text: the first end position where a stop string ends, longest first.
Outcome reference(const std::vector<std::string>& stops, bool include, const std::string& text) {
  for (size_t end = 1; end <= text.size(); ++end) {
    std::optional<size_t> best;
    for (size_t s = 0; s < stops.size(); ++s) {
      const size_t n = stops[s].size();
      if (n <= end && text.compare(end - n, n, stops[s]) == 0 &&
          (!best || n > stops[*best].size())) {
        best = s;
      }
    }
    if (best) {
      const size_t begin = end - stops[*best].size();
      return {text.substr(0, include ? end : begin), StopStringMatch{*best, begin}};
    }
  }
  return {text, std::nullopt};
}

TEST(StopStringMatcher, MatchesABruteForceReferenceHoweverTheTextIsSplit) {
  const std::vector<std::string> stops = {"\n\n", "User:", "aXa", "Xa"};
  const std::string alphabet = "aXUser:\n ";
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 500; ++trial) {
    std::string text;
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    for (bool include : {false, true}) {
      const Outcome whole = reference(stops, include, text);
      std::vector<std::string> pieces;
      for (size_t at = 0; at < text.size();) {
        const size_t n = 1 + rng() % 4;
        pieces.push_back(text.substr(at, n));
        at += n;
      }
      const Outcome split = run(StopStringMatcher(stops, include), pieces);
      ASSERT_EQ(whole.text, split.text) << text;
      ASSERT_EQ(whole.match.has_value(), split.match.has_value()) << text;
      if (whole.match) {
        EXPECT_EQ(whole.match->stop_index, split.match->stop_index) << text;
        EXPECT_EQ(whole.match->offset, split.match->offset) << text;
      }
      const Outcome in_one_piece = run(StopStringMatcher(stops, include), {text});
      EXPECT_EQ(in_one_piece.text, whole.text) << text;
    }
  }
}

}  // namespace
}  // namespace deepinfer
