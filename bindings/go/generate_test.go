package deepinfer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// cliGenerate runs `deepinfer generate --json` and returns the output's ids and text.
func cliGenerate(t *testing.T, prompt string, maxTokens int) ([]int32, string) {
	t.Helper()
	cli := os.Getenv("DEEPINFER_CLI")
	if cli == "" {
		var err error
		if cli, err = exec.LookPath("deepinfer"); err != nil {
			t.Skip("set DEEPINFER_CLI to the deepinfer command to compare with it")
		}
	}
	cmd := exec.Command(cli, "generate", "--model", modelDir(), "--device", "cpu", "--prompt", prompt, "--temperature", "0",
		"--max-tokens", strconv.Itoa(maxTokens), "--no-echo", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s", cmd, err, stderr.String())
	}
	var ids []int32
	var text strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var ev struct {
			Event  string  `json:"event"`
			Text   string  `json:"text"`
			Tokens []int32 `json:"tokens"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("cannot read %q: %v", sc.Text(), err)
		}
		if ev.Event == "tokens" {
			ids = append(ids, ev.Tokens...)
			text.WriteString(ev.Text)
		}
	}
	return ids, text.String()
}

func TestGreedyEqualsCLI(t *testing.T) {
	for _, prompt := range []string{"Hello, world", "def main():\n    "} {
		wantIDs, wantText := cliGenerate(t, prompt, 24)
		got := collect(t, Text(prompt), &Sampling{MaxTokens: 24})
		if len(got) != 1 || !reflect.DeepEqual(got[0].Tokens, wantIDs) || got[0].Text != wantText {
			t.Errorf("prompt %q: got %v %q, deepinfer generate gave %v %q", prompt, got[0].Tokens, got[0].Text, wantIDs, wantText)
		}
		if len(wantIDs) == 0 {
			t.Errorf("prompt %q: no output to compare", prompt)
		}
	}
}

func TestSeededSamplingRepeats(t *testing.T) {
	s := &Sampling{Temperature: 1, MaxTokens: 16, N: 3, Seed: Ptr(uint64(1234)), IgnoreEOS: true}
	a := collect(t, Text("Once upon a time"), s)
	b := collect(t, Text("Once upon a time"), s)
	if len(a) != 3 || !reflect.DeepEqual(a, b) {
		t.Fatalf("same seed, different outputs:\n%+v\n%+v", a, b)
	}
	for i, c := range a {
		if c.Seed != 1234 || c.FinishReason != FinishLength || c.Usage.CompletionTokens != 16 {
			t.Errorf("completion %d: seed %d, finish %v, usage %+v", i, c.Seed, c.FinishReason, c.Usage)
		}
	}
	if reflect.DeepEqual(a[0].Tokens, a[1].Tokens) && reflect.DeepEqual(a[1].Tokens, a[2].Tokens) {
		t.Errorf("three completions of one seed are identical: %v", a[0].Tokens)
	}
	// Completion 2 alone, replayed through its stream index.
	one := *s
	one.N, one.FirstCompletion = 1, 2
	c := collect(t, Text("Once upon a time"), &one)
	if !reflect.DeepEqual(c[0].Tokens, a[2].Tokens) {
		t.Errorf("FirstCompletion 2 gave %v, completion 2 was %v", c[0].Tokens, a[2].Tokens)
	}
	// An unseeded generation reports the seed it drew; setting it replays the output.
	free := collect(t, Text("Once upon a time"), &Sampling{Temperature: 1, MaxTokens: 12, IgnoreEOS: true})
	replay := collect(t, Text("Once upon a time"),
		&Sampling{Temperature: 1, MaxTokens: 12, IgnoreEOS: true, Seed: Ptr(free[0].Seed)})
	if !reflect.DeepEqual(free[0].Tokens, replay[0].Tokens) {
		t.Errorf("replaying seed %d gave %v, first run %v", free[0].Seed, replay[0].Tokens, free[0].Tokens)
	}
}

func TestStreaming(t *testing.T) {
	st, err := shared.Generate(context.Background(), Text("Streaming test:"), &Sampling{MaxTokens: 20, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	var tokenEvents, finished int
	var text strings.Builder
	var ids []int32
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch ev.Kind {
		case EventTokens:
			if finished > 0 {
				t.Error("tokens after the FINISHED event")
			}
			tokenEvents++
			text.WriteString(ev.Text)
			ids = append(ids, ev.Tokens...)
		case EventFinished:
			finished++
			if ev.FinishReason != FinishLength || ev.Usage.CompletionTokens != 20 || ev.Usage.PromptTokens == 0 {
				t.Errorf("FINISHED: %v %+v", ev.FinishReason, ev.Usage)
			}
		}
	}
	if tokenEvents < 2 || finished != 1 || len(ids) != 20 {
		t.Errorf("%d token events, %d finished, %d ids", tokenEvents, finished, len(ids))
	}
	// After the end, Next keeps returning io.EOF.
	if _, err := st.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("Next after the end: %v", err)
	}
	want, _ := shared.Detokenize(ids, DetokSkipSpecial)
	if text.String() != want {
		t.Errorf("streamed text %q, ids decode to %q", text.String(), want)
	}
}

func TestLogprobs(t *testing.T) {
	c := collect(t, Text("Logprobs"), &Sampling{MaxTokens: 6, IgnoreEOS: true, Logprobs: true, TopLogprobs: 3})
	if len(c[0].Logprobs) != 6 {
		t.Fatalf("%d logprobs for %d tokens", len(c[0].Logprobs), len(c[0].Tokens))
	}
	for i, lp := range c[0].Logprobs {
		// Greedy: each token is the most likely one.
		if lp.Token != c[0].Tokens[i] || lp.Rank != 1 || len(lp.Top) != 3 || lp.Top[0].Token != lp.Token ||
			lp.Logprob > 0 || lp.Top[0].Logprob < lp.Top[1].Logprob {
			t.Errorf("token %d: %+v", i, lp)
		}
	}
	st, err := shared.Generate(context.Background(), Text("Prompt logprobs here"),
		&Sampling{MaxTokens: 1, PromptLogprobs: true, PromptTopLogprobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.Next()
	if err != nil || ev.Kind != EventPromptLogprobs || len(ev.Logprobs) == 0 || len(ev.Logprobs[0].Top) != 2 {
		t.Errorf("first event %+v, %v", ev, err)
	}
	st.Close()
}

func TestStopStrings(t *testing.T) {
	full := collect(t, Text("Hello, world"), &Sampling{MaxTokens: 24})[0].Text
	i := strings.Index(full, "world")
	if i < 0 {
		t.Fatalf("no 'world' in %q", full)
	}
	got := collect(t, Text("Hello, world"), &Sampling{MaxTokens: 24, StopStrings: []string{"world"}})[0]
	if got.Text != full[:i] || got.FinishReason != FinishStop {
		t.Errorf("stop at %q: %q (%v), full %q", "world", got.Text, got.FinishReason, full)
	}
	got = collect(t, Text("Hello, world"), &Sampling{MaxTokens: 24, StopStrings: []string{"world"}, IncludeStopString: true})[0]
	if got.Text != full[:i+5] {
		t.Errorf("with the stop string: %q", got.Text)
	}
}

func TestChatSessionTurns(t *testing.T) {
	s := mustSession(t, shared)
	ctx := context.Background()
	turn := func(in Input) Completion {
		st, err := s.Generate(ctx, in, &Sampling{MaxTokens: 8})
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.Collect()
		if err != nil {
			t.Fatal(err)
		}
		return c[0]
	}
	first := turn(Messages{{Role: RoleSystem, Content: "Be brief."}, {Role: RoleUser, Content: "Hi"}})
	n1, _ := s.ContextLength()
	second := turn(Messages{{Role: RoleUser, Content: "And then?"}})
	n2, _ := s.ContextLength()
	if n2 <= n1 || first.Usage.CachedTokens != 0 || second.Usage.CachedTokens == 0 {
		t.Errorf("context %d then %d; cached tokens %d then %d", n1, n2, first.Usage.CachedTokens, second.Usage.CachedTokens)
	}
	// Tool calls and their results go in through the chat format.
	third := turn(Messages{
		{Role: RoleAssistant, ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}},
		{Role: RoleTool, Content: `{"temperature":21}`},
	})
	ids, err := s.ContextTokens()
	if err != nil || len(ids) <= n2 || third.Usage.PromptTokens <= n2 {
		t.Errorf("after the tool turn: %d ids (%v), usage %+v", len(ids), err, third.Usage)
	}
	rendered, _ := shared.Detokenize(ids, 0)
	for _, want := range []string{"<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather", `{"temperature":21}`} {
		if !strings.Contains(rendered, want) {
			t.Errorf("context lacks %q: %q", want, rendered)
		}
	}
	// A chat session takes no raw text.
	if err := s.Append(Text("raw")); err == nil {
		t.Error("raw text in a chat session was accepted")
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.ContextLength(); n != 0 {
		t.Errorf("context after Reset: %d", n)
	}
}

func TestSessionContinuesContext(t *testing.T) {
	// Two greedy turns of 8 tokens continue each other: together they equal one of 16.
	s := mustSession(t, shared)
	var got []int32
	for i, in := range []Input{Text("Counting: one two"), nil} {
		st, err := s.Generate(context.Background(), in, &Sampling{MaxTokens: 8, IgnoreEOS: true})
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		c, err := st.Collect()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, c[0].Tokens...)
	}
	want := collect(t, Text("Counting: one two"), &Sampling{MaxTokens: 16, IgnoreEOS: true})[0].Tokens
	if !reflect.DeepEqual(got, want) {
		t.Errorf("two turns %v, one generation %v", got, want)
	}
}

func TestSixtyFourGoroutinesShareEngine(t *testing.T) {
	prompts := []string{"alpha", "beta gamma", "def f(x):", "1, 2, 3,"}
	want := make([][]int32, len(prompts))
	for i, p := range prompts {
		want[i] = collect(t, Text(p), &Sampling{MaxTokens: 8})[0].Tokens
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			i := g % len(prompts)
			s, err := shared.NewSession()
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			st, err := s.Generate(context.Background(), Text(prompts[i]), &Sampling{MaxTokens: 8})
			if err != nil {
				errs <- err
				return
			}
			c, err := st.Collect()
			if err != nil {
				errs <- err
				return
			}
			if !reflect.DeepEqual(c[0].Tokens, want[i]) {
				errs <- errors.New("goroutine output differs from the same prompt alone: " + prompts[i])
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestGenerateBatch(t *testing.T) {
	prompts := []Input{Text("alpha"), Text("beta gamma"), Tokens{5, 6, 7}, Messages{{Role: RoleUser, Content: "hi"}}}
	s := &Sampling{MaxTokens: 6, N: 2, Temperature: 0.9, Seed: Ptr(uint64(5))}
	b, err := shared.GenerateBatch(context.Background(), prompts, s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Collect()
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range prompts {
		alone := collect(t, p, s)
		if !reflect.DeepEqual(got[i], alone) {
			t.Errorf("prompt %d: batch %+v, alone %+v", i, got[i], alone)
		}
	}
	if _, err := b.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("Next after the end: %v", err)
	}
	b.Close()
}
