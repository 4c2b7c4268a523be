package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	deepinfer "github.com/deepinfer/deepinfer/bindings/go"
)

// The tests serve the demo model (DEEPINFER_MODEL, else the repository's models/demo) from one
// engine, as the command does.

var (
	testEngine *deepinfer.Engine
	testServer *httptest.Server
)

func TestMain(m *testing.M) {
	dir := os.Getenv("DEEPINFER_MODEL")
	if dir == "" {
		dir, _ = filepath.Abs(filepath.Join("..", "..", "..", "..", "models", "demo"))
	}
	var err error
	// The CPU: its results do not depend on the batch, which the tests compare.
	if testEngine, err = deepinfer.Open(dir, deepinfer.WithDevice(deepinfer.DeviceCPU)); err != nil {
		fmt.Fprintln(os.Stderr, "cannot open the demo model:", err)
		os.Exit(1)
	}
	srv, err := newServer(testEngine, "demo")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testServer = httptest.NewServer(srv.routes()) // a loopback port
	code := m.Run()
	testServer.Close()
	testEngine.Close()
	os.Exit(code)
}

func post(t *testing.T, path, body string) (int, map[string]any) {
	t.Helper()
	res, err := http.Post(testServer.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatalf("%s: the body is not JSON: %v", path, err)
	}
	return res.StatusCode, out
}

func TestBadRequestsGetOpenAIErrors(t *testing.T) {
	for _, c := range []struct {
		name, path, body string
		status           int
		param            string
	}{
		{"invalid JSON", "/v1/chat/completions", `{"model": "demo", "messages": [`, 400, ""},
		{"two JSON values", "/v1/chat/completions", `{} {}`, 400, ""},
		{"no model", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "x"}]}`, 400, "model"},
		{"unknown model", "/v1/chat/completions", `{"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}`, 404, ""},
		{"max_tokens -1", "/v1/chat/completions", `{"model": "demo", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}`, 400, "max_tokens"},
		{"max_tokens 0", "/v1/completions", `{"model": "demo", "prompt": "x", "max_tokens": 0}`, 400, "max_tokens"},
		{"n not a number", "/v1/chat/completions", `{"model": "demo", "messages": [{"role": "user", "content": "x"}], "n": "two"}`, 400, "n"},
		{"n too large", "/v1/completions", `{"model": "demo", "prompt": "x", "n": 500}`, 400, "n"},
		{"top_p", "/v1/chat/completions", `{"model": "demo", "messages": [{"role": "user", "content": "x"}], "top_p": 3}`, 400, "top_p"},
		{"no messages", "/v1/chat/completions", `{"model": "demo", "messages": []}`, 400, "messages"},
		{"role", "/v1/chat/completions", `{"model": "demo", "messages": [{"role": "bot", "content": "x"}]}`, 400, "messages"},
		{"image part", "/v1/chat/completions", `{"model": "demo", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400, "messages"},
		{"stop", "/v1/chat/completions", `{"model": "demo", "messages": [{"role": "user", "content": "x"}], "stop": 5}`, 400, "stop"},
		{"logit_bias key", "/v1/completions", `{"model": "demo", "prompt": "x", "logit_bias": {"abc": 1}}`, 400, "logit_bias"},
		{"top_logprobs alone", "/v1/chat/completions", `{"model": "demo", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}`, 400, "top_logprobs"},
		{"completion logprobs", "/v1/completions", `{"model": "demo", "prompt": "x", "logprobs": 9}`, 400, "logprobs"},
		{"prompt", "/v1/completions", `{"model": "demo", "prompt": {"a": 1}}`, 400, "prompt"},
		{"token out of range", "/v1/completions", `{"model": "demo", "prompt": [1, 2, 99999]}`, 400, ""},
		{"schema", "/v1/chat/completions", `{"model": "demo", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 7}}}}`, 400, "response_format"},
		{"format type", "/v1/chat/completions", `{"model": "demo", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}}`, 400, "response_format"},
		{"tool choice without tools", "/v1/chat/completions", `{"model": "demo", "messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}`, 400, "tool_choice"},
		{"unknown tool", "/v1/chat/completions", `{"model": "demo", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}}`, 400, "tool_choice"},
		{"context too long", "/v1/completions", `{"model": "demo", "prompt": "` + strings.Repeat("word ", 3000) + `"}`, 400, ""},
	} {
		status, body := post(t, c.path, c.body)
		e, _ := body["error"].(map[string]any)
		if status != c.status || e == nil || e["message"] == "" || e["type"] != "invalid_request_error" {
			t.Errorf("%s: %d %v, want %d with an error object", c.name, status, body, c.status)
			continue
		}
		if param, _ := e["param"].(string); param != c.param {
			t.Errorf("%s: param %q, want %q (%v)", c.name, param, c.param, e["message"])
		}
	}
	for path, method := range map[string]string{"/v1/chat/completions": http.MethodGet, "/v1/models": http.MethodPost} {
		req, _ := http.NewRequest(method, testServer.URL+path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d", method, path, res.StatusCode)
		}
	}
	if res, err := http.Get(testServer.URL + "/v1/models/other"); err != nil || res.StatusCode != 404 {
		t.Errorf("an unknown model card: %v %v", res, err)
	}
}

func TestChatWithToolHistory(t *testing.T) {
	status, body := post(t, "/v1/chat/completions", `{"model": "demo", "max_tokens": 4, "messages": [
		{"role": "user", "content": "Weather in Paris?"},
		{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
		{"role": "tool", "tool_call_id": "c1", "content": "{\"temperature\": 21}"}],
		"tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]}`)
	if status != 200 {
		t.Fatalf("%d %v", status, body)
	}
}

// waitNoGeneration waits until the engine runs nothing.
func waitNoGeneration(t *testing.T) {
	t.Helper()
	for i := 0; i < 200; i++ {
		st, err := testEngine.Stats()
		if err != nil {
			t.Fatal(err)
		}
		if st.RunningGenerations == 0 {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatal("a generation still runs")
}

func TestDisconnectCancelsGeneration(t *testing.T) {
	for _, stream := range []bool{true, false} {
		waitNoGeneration(t)
		before, _ := testEngine.Stats()
		ctx, cancel := context.WithCancel(context.Background())
		body := fmt.Sprintf(`{"model": "demo", "prompt": "x", "max_tokens": 1900, "ignore_eos": true, "stream": %v}`, stream)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, testServer.URL+"/v1/completions", strings.NewReader(body))
		done := make(chan struct{})
		go func() {
			defer close(done)
			res, err := http.DefaultClient.Do(req)
			if err == nil {
				if stream {
					bufio.NewReader(res.Body).ReadString('\n') // the first event
					cancel()
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}()
		// Wait until the generation runs, then leave.
		for i := 0; i < 200; i++ {
			if st, _ := testEngine.Stats(); st.RunningGenerations > 0 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		<-done
		waitNoGeneration(t)
		// Had it run to its end, the generation would have made 1900 tokens.
		if after, _ := testEngine.Stats(); after.GeneratedTokens-before.GeneratedTokens >= 1000 {
			t.Errorf("stream %v: %d tokens generated for a client that left", stream, after.GeneratedTokens-before.GeneratedTokens)
		}
	}
}

func TestConcurrentRequestsShareTheEngine(t *testing.T) {
	var wg sync.WaitGroup
	texts := make([]string, 16)
	for i := range texts {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			status, body := post(t, "/v1/completions", fmt.Sprintf(`{"model": "demo", "prompt": "n%d", "max_tokens": 6, "temperature": 0}`, i%2))
			if status != 200 {
				t.Errorf("%d %v", status, body)
				return
			}
			texts[i] = body["choices"].([]any)[0].(map[string]any)["text"].(string)
		}(i)
	}
	wg.Wait()
	for i := range texts {
		if texts[i] != texts[i%2] {
			t.Errorf("request %d: %q, the same prompt gave %q", i, texts[i], texts[i%2])
		}
	}
}

// TestOpenAIClient runs e2e/openai.test.mjs, the official OpenAI client against this server. It
// needs Node.js and `npm ci` in e2e/ (scripts/setup.sh does it); DEEPINFER_REQUIRE_E2E=1 makes
// their absence a failure instead of a skip.
func TestOpenAIClient(t *testing.T) {
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join("e2e", "node_modules", "openai", "package.json"))
	if err != nil || modErr != nil {
		if os.Getenv("DEEPINFER_REQUIRE_E2E") != "" {
			t.Fatalf("node (%v) and e2e/node_modules (%v) are needed: run npm ci in e2e/", err, modErr)
		}
		t.Skip("needs node and `npm ci` in e2e/")
	}
	host, port, _ := net.SplitHostPort(testServer.Listener.Addr().String())
	cmd := exec.Command(node, "--test", "--test-reporter=spec", "openai.test.mjs")
	cmd.Dir = "e2e"
	cmd.Env = append(os.Environ(), "OPENAI_BASE_URL=http://"+net.JoinHostPort(host, port)+"/v1",
		"DEEPINFER_SERVED_MODEL=demo")
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("the OpenAI client tests failed: %v", err)
	}
}
