package deepinfer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The tests run on the demo model: DEEPINFER_MODEL names it (the repository's models/demo when
// unset); DEEPINFER_CLI names the deepinfer command for the comparison with `deepinfer generate`.

var shared *Engine

func modelDir() string {
	if m := os.Getenv("DEEPINFER_MODEL"); m != "" {
		return m
	}
	dir, _ := filepath.Abs(filepath.Join("..", "..", "models", "demo"))
	return dir
}

func TestMain(m *testing.M) {
	os.Setenv("DEEPINFER_MODEL", modelDir()) // the examples read it
	var err error
	// The CPU: its results do not depend on the batch, which several tests compare.
	if shared, err = Open(modelDir(), WithSeed(1), WithDevice(DeviceCPU)); err != nil {
		fmt.Fprintln(os.Stderr, "cannot open the demo model:", err)
		os.Exit(1)
	}
	code := m.Run()
	shared.Close()
	os.Exit(code)
}

// collect runs one generation to its end on the shared engine.
func collect(t testing.TB, prompt Input, s *Sampling) []Completion {
	t.Helper()
	st, err := shared.Generate(context.Background(), prompt, s)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	out, err := st.Collect()
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return out
}

func mustSession(t testing.TB, e *Engine) *Session {
	t.Helper()
	s, err := e.NewSession()
	if err != nil {
		t.Fatalf("NewSession: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
