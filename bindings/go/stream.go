package deepinfer

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
)

// generation is one running generation of one session: the dispatcher routes its events (by
// tag) to its pipe until the library's DONE event.
type generation struct {
	tag         uint64
	sess        *Session
	ownsSession bool // a one-shot session, closed when the generation ends
	out         *pipe
	index       int // the prompt's index in a batch

	mu        sync.Mutex
	cause     error // why it was cancelled: the reader's last error instead of io.EOF
	failure   error // an event could not be read: the reader's last error in any case
	cancelled bool

	sawCancel  bool // a completion finished cancelled (dispatcher goroutine only)
	done       chan struct{}
	finishOnce sync.Once
}

func newGeneration(sess *Session, owns bool, out *pipe, index int) *generation {
	return &generation{sess: sess, ownsSession: owns, out: out, index: index, done: make(chan struct{})}
}

func (g *generation) setCause(err error) {
	g.mu.Lock()
	if g.cause == nil {
		g.cause = err
	}
	g.mu.Unlock()
}

func (g *generation) cancelRequested() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cancelled
}

// cancel asks the library to end the generation (every unfinished completion finishes
// cancelled); cause, when not nil, is what the reader gets after the last event.
func (g *generation) cancel(cause error) {
	g.mu.Lock()
	if g.cause == nil {
		g.cause = cause
	}
	g.cancelled = true
	g.mu.Unlock()
	select {
	case <-g.done:
	default:
		g.sess.cancelGeneration()
	}
}

// watch cancels the generation when ctx ends first.
func (g *generation) watch(ctx context.Context) {
	done := ctx.Done()
	if done == nil {
		return
	}
	go func() {
		select {
		case <-done:
			g.cancel(ctx.Err())
		case <-g.done:
		}
	}()
}

func (g *generation) fail(err error) {
	g.mu.Lock()
	if g.failure == nil {
		g.failure = err
	}
	g.mu.Unlock()
	g.cancel(nil)
}

// finish ends the generation: atDone when its DONE event came, false when the engine stopped
// without one.
func (g *generation) finish(atDone bool) {
	g.finishOnce.Do(func() {
		g.mu.Lock()
		end := g.failure
		if end == nil && g.cause != nil && (g.sawCancel || !atDone) {
			end = g.cause
		}
		g.mu.Unlock()
		g.out.end(end)
		close(g.done)
		if g.ownsSession {
			g.sess.Close()
		}
	})
}

// Stream is the output of one generation. Next returns its events in order and io.EOF at the
// end. A Stream may be read by one goroutine while others call Cancel or Close.
type Stream struct {
	g *generation
}

func newStream(g *generation) *Stream {
	s := &Stream{g: g}
	// Nobody can read a stream that became unreachable: stop its generation.
	runtime.SetFinalizer(s, (*Stream).Close)
	return s
}

// Next returns the next event; io.EOF once the generation ended and every event was read. A
// generation that a context ended finishes its completions with FinishCancelled, then Next
// returns the context's error; after Close, or when the engine closed, ErrClosed.
func (s *Stream) Next() (Event, error) {
	it, err := s.g.out.next()
	return it.ev, err
}

// Cancel ends the generation early: its unfinished completions finish with FinishCancelled and
// Next then returns io.EOF. Safe from any goroutine; no effect once the generation ended.
func (s *Stream) Cancel() error {
	s.g.cancel(nil)
	return nil
}

// Close cancels the generation if it still runs and drops the events not read yet: a pending
// and every later Next returns ErrClosed. Idempotent and safe from any goroutine.
func (s *Stream) Close() error {
	s.g.out.close(closedError("stream"))
	s.g.cancel(closedError("stream"))
	runtime.SetFinalizer(s, nil)
	return nil
}

// Completion is one completion of a generation, gathered by Collect.
type Completion struct {
	Text         string
	Tokens       []int32
	Logprobs     []Logprob // when requested
	FinishReason FinishReason
	Usage        Usage
	Seed         uint64
	Err          error // FinishError: what went wrong
}

// Collect reads the stream to its end and gathers each completion; the error is nil when the
// generation ended normally (io.EOF), else what Next returned, with what was gathered so far.
func (s *Stream) Collect() ([]Completion, error) {
	var out []Completion
	for {
		ev, err := s.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return out, err
		}
		out = gather(out, ev)
	}
}

func gather(out []Completion, ev Event) []Completion {
	if ev.Kind != EventTokens && ev.Kind != EventFinished {
		return out
	}
	for len(out) <= ev.Completion {
		out = append(out, Completion{})
	}
	c := &out[ev.Completion]
	c.Text += ev.Text
	c.Tokens = append(c.Tokens, ev.Tokens...)
	c.Logprobs = append(c.Logprobs, ev.Logprobs...)
	if ev.Kind == EventFinished {
		c.FinishReason, c.Usage, c.Seed, c.Err = ev.FinishReason, ev.Usage, ev.Seed, ev.Err
	}
	return out
}
