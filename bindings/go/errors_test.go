package deepinfer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// expectErr checks that err matches sentinel through errors.Is, is an *Error with the library's
// message, and mentions what.
func expectErr(t *testing.T, name string, err, sentinel error, what string) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: got %v, want %v", name, err, sentinel)
		return
	}
	var e *Error
	if !errors.As(err, &e) || e.Message == "" {
		t.Errorf("%s: %v is not an *Error with a message", name, err)
		return
	}
	if !strings.Contains(err.Error(), what) {
		t.Errorf("%s: %q does not mention %q", name, err.Error(), what)
	}
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "missing"))
	expectErr(t, "missing model", err, ErrNotFound, "missing")
	_, err = Open(modelDir(), WithOption("no_such_option", "1"))
	expectErr(t, "unknown option", err, ErrInvalidArgument, "no_such_option")
	_, err = Open(modelDir(), WithThreads(-3))
	expectErr(t, "threads", err, ErrInvalidArgument, "-3")
	_, err = Open(modelDir(), WithStateMemoryFraction(2))
	expectErr(t, "state memory fraction", err, ErrInvalidArgument, "2")
	_, err = Open(modelDir(), WithProgress(func(done, total uint64) bool { return false }))
	expectErr(t, "progress abort", err, ErrCancelled, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Open(modelDir(), WithContext(ctx))
	expectErr(t, "cancelled context", err, ErrCancelled, "context canceled")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("load aborted by a context: %v is not context.Canceled", err)
	}
	// CUDA where the machine has none is ErrUnsupported naming what is missing.
	if e, err := Open(modelDir(), WithDevice(DeviceCUDA)); err == nil {
		e.Close()
	} else {
		expectErr(t, "CUDA", err, ErrUnsupported, "")
	}
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "config.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(bad)
	expectErr(t, "malformed config.json", err, ErrModelFormat, "config.json")

	var calls int
	e, err := Open(modelDir(), WithProgress(func(done, total uint64) bool { calls++; return true }),
		WithContext(context.Background()), WithMaxSequences(4), WithDevice(DeviceCPU))
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if calls == 0 {
		t.Error("the progress callback was never called")
	}
}

func TestSamplingErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		s    Sampling
		what string
	}{
		{"max_tokens", Sampling{MaxTokens: -1}, "max_tokens"},
		{"temperature", Sampling{Temperature: -1}, "temperature"},
		{"top_p", Sampling{TopP: 1.5}, "top_p"},
		{"n", Sampling{N: 1000}, "1000"},
		{"n out of int32", Sampling{N: 1 << 40}, "n"},
		{"logprobs", Sampling{Logprobs: true, TopLogprobs: 21}, "21"},
		{"logit bias", Sampling{LogitBias: map[int32]float32{3: 500}}, "500"},
		{"stop string", Sampling{StopStrings: []string{""}}, "stop"},
		{"token id", Sampling{AllowedTokens: []int32{1 << 20}}, "1048576"},
	} {
		_, err := shared.Generate(context.Background(), Text("x"), &c.s)
		expectErr(t, c.name, err, ErrInvalidArgument, c.what)
	}
}

func TestSessionErrors(t *testing.T) {
	s := mustSession(t, shared)
	st, err := s.Generate(context.Background(), Text("busy"), long)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Generate(context.Background(), nil, nil)
	expectErr(t, "generate while generating", err, ErrState, "")
	expectErr(t, "reset while generating", s.Reset(), ErrState, "")
	st.Cancel()
	drain(st)

	expectErr(t, "invalid UTF-8", s.Append(Text("\xff\xfe")), ErrInvalidArgument, "UTF-8")
	expectErr(t, "token id", s.Append(Tokens{-5}), ErrInvalidArgument, "-5")
	expectErr(t, "role", mustSession(t, shared).Append(Messages{{Role: 42, Content: "x"}}), ErrInvalidArgument, "42")
	chat := mustSession(t, shared)
	if err := chat.Append(Messages{{Role: RoleUser, Content: "hi"}}); err != nil {
		t.Fatal(err)
	}
	expectErr(t, "raw text in a chat", chat.Append(Text("raw")), ErrState, "")

	small, err := Open(modelDir(), WithMaxContext(32))
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	_, err = small.Generate(context.Background(), Text(strings.Repeat("long prompt ", 40)), nil)
	expectErr(t, "context too long", err, ErrCapacity, "")

	_, err = shared.GenerateBatch(context.Background(), nil, nil)
	expectErr(t, "empty batch", err, ErrInvalidArgument, "prompt")
	_, err = shared.GenerateBatch(context.Background(), []Input{Text("ok"), Tokens{-1}}, nil)
	expectErr(t, "bad prompt in a batch", err, ErrInvalidArgument, "-1")

	closed := mustSession(t, shared)
	closed.Close()
	_, err = closed.Generate(context.Background(), Text("x"), nil)
	expectErr(t, "generate on a closed session", err, ErrClosed, "session")
	_, err = closed.ContextLength()
	expectErr(t, "context of a closed session", err, ErrClosed, "session")
}

func TestEngineAndTokenizerErrors(t *testing.T) {
	_, err := shared.Tokenize("\xc3\x28", TextPlain)
	expectErr(t, "tokenize invalid UTF-8", err, ErrInvalidArgument, "UTF-8")
	_, err = shared.Detokenize([]int32{99999}, 0)
	expectErr(t, "detokenize an unknown id", err, ErrInvalidArgument, "99999")
	_, err = shared.ModelInfo(9999)
	expectErr(t, "model info key", err, ErrInvalidArgument, "9999")
	_, err = NewTokenizer(filepath.Join(t.TempDir(), "none.json"))
	if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrIO) {
		t.Errorf("missing tokenizer: %v", err)
	}
	tok, err := shared.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	_, err = tok.Decode([]int32{-1}, 0)
	expectErr(t, "tokenizer decode", err, ErrInvalidArgument, "-1")
	tok.Close()
	tok.Close()
	_, err = tok.Encode("x", TextPlain)
	expectErr(t, "closed tokenizer", err, ErrClosed, "tokenizer")
}

func TestGrammarErrors(t *testing.T) {
	_, err := shared.CompileGrammar(GrammarJSONSchema, `{"type": "object", "properties": {`, nil)
	expectErr(t, "malformed schema", err, ErrGrammar, "")
	_, err = shared.CompileGrammar(GrammarRegex, `a(b`, nil)
	expectErr(t, "bad regex", err, ErrGrammar, "")
	_, err = shared.CompileGrammar(GrammarEBNF, `root ::= undefined_rule`, nil)
	expectErr(t, "undefined rule", err, ErrGrammar, "undefined_rule")
	expectErr(t, "validate", ValidateGrammar(GrammarJSONSchema, `{"type": 5}`, nil), ErrGrammar, "")
	if err := ValidateGrammar(GrammarRegex, `[a-z]+`, nil); err != nil {
		t.Errorf("a valid regex: %v", err)
	}
	_, err = shared.CompileGrammar(GrammarKind(77), `x`, nil)
	expectErr(t, "grammar kind", err, ErrInvalidArgument, "77")

	g, err := shared.CompileGrammar(GrammarRegex, `yes|no`, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := g.NewMatcher()
	if err != nil {
		t.Fatal(err)
	}
	expectErr(t, "matcher rejects", m.AcceptString("maybe"), ErrInvalidArgument, "")
	m.Close()
	expectErr(t, "closed matcher", m.AcceptString("yes"), ErrClosed, "matcher")
	g.Close()
	_, err = shared.Generate(context.Background(), Text("x"), &Sampling{Grammar: g})
	expectErr(t, "closed grammar", err, ErrClosed, "grammar")
	_, err = g.NewMatcher()
	expectErr(t, "matcher of a closed grammar", err, ErrClosed, "grammar")
}

func TestErrorValues(t *testing.T) {
	for code, sentinel := range sentinels {
		err := error(&Error{Code: code, Message: "m"})
		if !errors.Is(err, sentinel) || code.String() == "unknown" {
			t.Errorf("code %d (%v) does not unwrap to %v", code, code, sentinel)
		}
		for other, s := range sentinels {
			if other != code && errors.Is(err, s) {
				t.Errorf("code %v matches %v too", code, s)
			}
		}
	}
	// A code from a newer library is still an error, of no known kind.
	unknown := &Error{Code: 4242, Message: "new"}
	if unknown.Unwrap() != nil || unknown.Code.String() != "unknown" || !strings.Contains(unknown.Error(), "new") {
		t.Errorf("unknown code: %v", unknown)
	}
	if s := FinishReason(9).String(); s != "finish_reason(9)" {
		t.Errorf("unknown finish reason shows as %q", s)
	}
	if s := EventKind(9).String(); s != "event(9)" {
		t.Errorf("unknown event kind shows as %q", s)
	}
}

func TestVersionCheck(t *testing.T) {
	if err := CheckVersion(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(Version(), "0.") || ABIVersion() != 0 || VersionNumber() < headerVersionNumber {
		t.Errorf("library %s (%#x), ABI %d", Version(), VersionNumber(), ABIVersion())
	}
	if HeaderVersion != "0.2.0" || headerVersionNumber != 0x000200 {
		t.Errorf("HeaderVersion %s disagrees with deepinfer.h %#x", HeaderVersion, headerVersionNumber)
	}
	expectErr(t, "other ABI", checkVersion(1, 0x010000, "1.0.0"), ErrUnsupported, "ABI 1")
	expectErr(t, "older library", checkVersion(0, 0x000100, "0.1.0"), ErrUnsupported, "0.1.0 is older")
	if err := checkVersion(0, 0x000301, "0.3.1"); err != nil {
		t.Errorf("a newer library of the same ABI: %v", err)
	}
}

func TestLogFunc(t *testing.T) {
	var mu = make(chan struct{}, 1)
	var messages []string
	SetLogFunc(func(level LogLevel, msg string) {
		mu <- struct{}{}
		messages = append(messages, msg)
		<-mu
	})
	if err := SetLogLevel(LogInfo); err != nil {
		t.Fatal(err)
	}
	e, err := Open(modelDir())
	SetLogFunc(nil)
	SetLogLevel(LogWarn)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	mu <- struct{}{}
	defer func() { <-mu }()
	if len(messages) == 0 || !strings.Contains(strings.Join(messages, "\n"), "demo") {
		t.Errorf("log messages while loading: %q", messages)
	}
	expectErr(t, "log level", SetLogLevel(17), ErrInvalidArgument, "17")
}

// A model directory without tokenizer.json: ids in and out only.
func TestModelWithoutTokenizer(t *testing.T) {
	dir := t.TempDir()
	entries, err := os.ReadDir(modelDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if !strings.HasPrefix(en.Name(), "tokenizer") {
			if err := os.Symlink(filepath.Join(modelDir(), en.Name()), filepath.Join(dir, en.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	e, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if info, err := e.Info(); err != nil || info.HasTokenizer {
		t.Errorf("HasTokenizer %v (%v)", info.HasTokenizer, err)
	}
	_, err = e.Tokenize("x", TextPlain)
	expectErr(t, "tokenize", err, ErrUnsupported, "")
	_, err = e.Tokenizer()
	expectErr(t, "tokenizer", err, ErrUnsupported, "")
	_, err = e.Generate(context.Background(), Text("x"), nil)
	expectErr(t, "text prompt", err, ErrUnsupported, "")
	_, err = e.Generate(context.Background(), Tokens{5, 6}, &Sampling{MaxTokens: 2, StopStrings: []string{"x"}})
	expectErr(t, "stop strings", err, ErrUnsupported, "")
	// Ids still work, and events carry ids without text.
	st, err := e.Generate(context.Background(), Tokens{5, 6, 7}, &Sampling{MaxTokens: 3, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Collect()
	if err != nil || len(c[0].Tokens) != 3 {
		t.Errorf("%+v %v", c, err)
	}
}
