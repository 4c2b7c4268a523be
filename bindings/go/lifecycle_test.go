package deepinfer

import (
	"context"
	"errors"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// long is a generation that runs until something stops it.
var long = &Sampling{MaxTokens: 1500, IgnoreEOS: true}

// firstEvent waits for the first event, so that the generation is known to be running.
func firstEvent(t *testing.T, st *Stream) {
	t.Helper()
	if _, err := st.Next(); err != nil {
		t.Fatalf("first event: %v", err)
	}
}

// drain reads a stream to its end and returns the last error and the finish reason seen.
func drain(st *Stream) (FinishReason, error) {
	reason := FinishNone
	for {
		ev, err := st.Next()
		if err != nil {
			return reason, err
		}
		if ev.Kind == EventFinished {
			reason = ev.FinishReason
		}
	}
}

func TestContextCancelStopsGeneration(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	st, err := shared.Generate(ctx, Text("cancel me"), long)
	if err != nil {
		t.Fatal(err)
	}
	firstEvent(t, st)
	cancel()
	reason, err := drain(st)
	if reason != FinishCancelled || !errors.Is(err, context.Canceled) {
		t.Errorf("after cancel: finish %v, end %v", reason, err)
	}
	// A context that already ended starts nothing.
	if _, err := shared.Generate(ctx, Text("x"), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("Generate with a cancelled context: %v", err)
	}
}

func TestContextDeadlineStopsGeneration(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s := mustSession(t, shared)
	st, err := s.Generate(ctx, Text("deadline"), long)
	if err != nil {
		t.Fatal(err)
	}
	reason, err := drain(st)
	if reason != FinishCancelled || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("after the deadline: finish %v, end %v", reason, err)
	}
	// The session serves the next generation (the cancelled output did not join the context).
	st, err = s.Generate(context.Background(), Text(" more"), &Sampling{MaxTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Collect(); err != nil {
		t.Fatal(err)
	}
}

func TestStreamCancelEndsWithEOF(t *testing.T) {
	st, err := shared.Generate(context.Background(), Text("stop button"), long)
	if err != nil {
		t.Fatal(err)
	}
	firstEvent(t, st)
	st.Cancel()
	if reason, err := drain(st); reason != FinishCancelled || !errors.Is(err, io.EOF) {
		t.Errorf("after Cancel: finish %v, end %v", reason, err)
	}
}

func TestCloseWhileStreaming(t *testing.T) {
	for _, which := range []string{"stream", "session", "batch"} {
		t.Run(which, func(t *testing.T) {
			var next func() error
			var closer io.Closer
			switch which {
			case "stream":
				st, err := shared.Generate(context.Background(), Text("close me"), long)
				if err != nil {
					t.Fatal(err)
				}
				firstEvent(t, st)
				next = func() error { _, err := st.Next(); return err }
				closer = st
			case "session":
				s := mustSession(t, shared)
				st, err := s.Generate(context.Background(), Text("close me"), long)
				if err != nil {
					t.Fatal(err)
				}
				firstEvent(t, st)
				next = func() error { _, err := st.Next(); return err }
				closer = s
			case "batch":
				b, err := shared.GenerateBatch(context.Background(), []Input{Text("a"), Text("b")}, long)
				if err != nil {
					t.Fatal(err)
				}
				next = func() error { _, err := b.Next(); return err }
				closer = b
			}
			ended := make(chan error, 1)
			go func() {
				for {
					if err := next(); err != nil {
						ended <- err
						return
					}
				}
			}()
			time.Sleep(20 * time.Millisecond)
			var wg sync.WaitGroup
			for i := 0; i < 4; i++ { // idempotent, from several goroutines at once
				wg.Add(1)
				go func() { defer wg.Done(); closer.Close() }()
			}
			wg.Wait()
			select {
			case err := <-ended:
				if !errors.Is(err, ErrClosed) {
					t.Errorf("Next after Close: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not unblock Next")
			}
			if err := next(); !errors.Is(err, ErrClosed) {
				t.Errorf("Next after Close, again: %v", err)
			}
		})
	}
	waitIdle(t, shared)
}

func TestEngineCloseWhileStreaming(t *testing.T) {
	e, err := Open(modelDir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Generate(context.Background(), Text("engine goes away"), long)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.GenerateBatch(context.Background(), []Input{Text("a"), Text("b")}, long)
	if err != nil {
		t.Fatal(err)
	}
	firstEvent(t, st)
	ended := make(chan error, 2)
	go func() { _, err := drain(st); ended <- err }()
	go func() {
		for {
			if _, err := b.Next(); err != nil {
				ended <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); e.Close() }()
	}
	wg.Wait()
	for i := 0; i < 2; i++ {
		select {
		case err := <-ended:
			if !errors.Is(err, ErrClosed) {
				t.Errorf("stream end after the engine closed: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("closing the engine did not end its streams")
		}
	}
	// Everything of a closed engine says so.
	if _, err := s.Generate(context.Background(), Text("x"), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Generate after the engine closed: %v", err)
	}
	if _, err := e.NewSession(); !errors.Is(err, ErrClosed) {
		t.Errorf("NewSession after Close: %v", err)
	}
	if _, err := e.Info(); !errors.Is(err, ErrClosed) {
		t.Errorf("Info after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

// waitIdle waits until the engine runs nothing and keeps no session state (closed sessions
// release theirs on the engine's next step).
func waitIdle(t testing.TB, e *Engine) Stats {
	t.Helper()
	var st Stats
	for i := 0; i < 500; i++ {
		var err error
		if st, err = e.Stats(); err != nil {
			t.Fatal(err)
		}
		e.d.mu.Lock()
		routed := len(e.d.gens)
		e.d.mu.Unlock()
		if st.RunningGenerations == 0 && st.ResidentSessions == 0 && st.RunningSequences == 0 && routed == 0 {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the engine does not become idle: %+v", st)
	return st
}

func openFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(entries)
}

func TestNoLeakAfterThousandCycles(t *testing.T) {
	waitIdle(t, shared)
	runtime.GC()
	goroutines, fds := runtime.NumGoroutine(), openFDs(t)
	const workers, cycles = 8, 1000
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < cycles; i += workers {
				if err := leakCycle(i); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	stats := waitIdle(t, shared)
	if stats.StateBytesUsed != 0 {
		t.Errorf("state memory still used: %+v", stats)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines before, %d after:\n%s", goroutines, n, buf[:runtime.Stack(buf, true)])
	}
	if n := openFDs(t); n != fds {
		t.Errorf("%d open descriptors before, %d after", fds, n)
	}
}

// leakCycle runs one short generation through a different path each time: a session, a one-shot
// stream, a batch, a cancelled context, a stream closed early.
func leakCycle(i int) error {
	ctx := context.Background()
	s := &Sampling{MaxTokens: 2}
	switch i % 5 {
	case 0:
		sess, err := shared.NewSession()
		if err != nil {
			return err
		}
		defer sess.Close()
		st, err := sess.Generate(ctx, Text("leak "+strconv.Itoa(i)), s)
		if err != nil {
			return err
		}
		_, err = st.Collect()
		return err
	case 1:
		st, err := shared.Generate(ctx, Text("leak"), s)
		if err != nil {
			return err
		}
		_, err = st.Collect()
		return err
	case 2:
		b, err := shared.GenerateBatch(ctx, []Input{Text("a"), Text("b")}, s)
		if err != nil {
			return err
		}
		_, err = b.Collect()
		return err
	case 3:
		ctx, cancel := context.WithCancel(ctx)
		st, err := shared.Generate(ctx, Text("leak"), long)
		if err != nil {
			cancel()
			return err
		}
		cancel()
		if _, err := st.Collect(); !errors.Is(err, context.Canceled) {
			return errors.New("cancelled cycle ended with " + errString(err))
		}
		return nil
	default:
		st, err := shared.Generate(ctx, Text("leak"), long)
		if err != nil {
			return err
		}
		return st.Close()
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

func TestManyStreamsFewThreads(t *testing.T) {
	const streams = 256
	threads := pprof.Lookup("threadcreate")
	before, osBefore := threads.Count(), osThreads()
	var all []*Stream
	for i := 0; i < streams; i++ {
		st, err := shared.Generate(context.Background(), Text("thread "+strconv.Itoa(i)), &Sampling{MaxTokens: 4})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, st)
	}
	var wg sync.WaitGroup
	var failed sync.Once
	for _, st := range all {
		wg.Add(1)
		go func(st *Stream) {
			defer wg.Done()
			if _, err := st.Collect(); err != nil {
				failed.Do(func() { t.Error(err) })
			}
		}(st)
	}
	wg.Wait()
	created := threads.Count() - before
	t.Logf("%d concurrent streams: %d OS threads created by Go (%d -> %d threads in the process)",
		streams, created, osBefore, osThreads())
	if created >= 32 {
		t.Errorf("%d streams created %d threads: some wait on a thread each", streams, created)
	}
}

func osThreads() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Threads:") {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "Threads:")))
			return n
		}
	}
	return -1
}

func TestFinalizerReleasesUnreachableEngine(t *testing.T) {
	fds := openFDs(t)
	func() {
		e, err := Open(modelDir())
		if err != nil {
			t.Fatal(err)
		}
		st, err := e.Generate(context.Background(), Text("x"), &Sampling{MaxTokens: 2})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Collect(); err != nil {
			t.Fatal(err)
		}
	}()
	// The finalizer hands the engine to a goroutine of its own, which frees it (and its queue).
	deadline := time.Now().Add(10 * time.Second)
	for openFDs(t) > fds && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	if n := openFDs(t); n > fds {
		t.Errorf("%d descriptors before, %d after the engine became unreachable", fds, n)
	}
}

func TestGenerateRightAfterClosingTheLastStream(t *testing.T) {
	s := mustSession(t, shared)
	for i := 0; i < 5; i++ {
		st, err := s.Generate(context.Background(), Text(" again"), long)
		if err != nil {
			t.Fatalf("turn %d: %v", i, err)
		}
		firstEvent(t, st)
		st.Close() // the next Generate waits for this generation's end
	}
	st, err := s.Generate(context.Background(), Text(" last"), &Sampling{MaxTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Collect(); err != nil {
		t.Fatal(err)
	}
}
