package deepinfer

// #include "helpers.h"
import "C"

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// Role is a chat message's author.
type Role int32

// Roles.
const (
	RoleSystem    Role = 0
	RoleUser      Role = 1
	RoleAssistant Role = 2
	RoleTool      Role = 3
)

// ToolCall is a call of a function by the assistant, with its arguments as JSON text.
type ToolCall struct {
	Name      string
	Arguments string
}

// Message is a chat message. An assistant message with no Content and some ToolCalls is a message
// made only of tool calls.
type Message struct {
	Role      Role
	Content   string
	ToolCalls []ToolCall
}

// Input is what a session's context grows by before a generation: Text, SpecialText, Tokens,
// Messages or Chat. A session holds either chat messages or raw text and tokens, never both.
type Input interface {
	addTo(h *C.di_session) error
}

// Text is plain text: control-token lookalikes in it become ordinary tokens.
type Text string

// SpecialText is text in which added tokens written out are recognised as those tokens.
type SpecialText string

// Tokens are token ids.
type Tokens []int32

// Messages are chat messages, encoded in the model's chat format (message text can never become
// control tokens). The assistant prompt is added when the generation starts.
type Messages []Message

// Chat is a conversation with tool definitions: Tools is an OpenAI-style JSON array
// ([{"type": "function", "function": {"name", "description", "parameters"}}]), which the library
// describes to the model after the conversation's system messages ("" for none).
type Chat struct {
	Messages Messages
	Tools    string
}

func (c Chat) addTo(h *C.di_session) error {
	if err := c.Messages.addTo(h); err != nil {
		return err
	}
	if c.Tools == "" {
		return nil
	}
	p, n := cstr(c.Tools)
	return check(C.di_session_set_tools(h, p, n))
}

func (t Text) addTo(h *C.di_session) error {
	p, n := cstr(string(t))
	return check(C.di_session_add_text(h, p, n, C.DI_TEXT_PLAIN))
}

func (t SpecialText) addTo(h *C.di_session) error {
	p, n := cstr(string(t))
	return check(C.di_session_add_text(h, p, n, C.DI_TEXT_SPECIAL))
}

func (t Tokens) addTo(h *C.di_session) error {
	p, n := cids(t)
	return check(C.di_session_add_tokens(h, p, n))
}

func (ms Messages) addTo(h *C.di_session) error {
	for _, m := range ms {
		if m.Role != RoleAssistant || m.Content != "" || len(m.ToolCalls) == 0 {
			p, n := cstr(m.Content)
			if err := check(C.di_session_add_message(h, C.di_role(m.Role), p, n)); err != nil {
				return err
			}
		}
		for _, c := range m.ToolCalls {
			np, nn := cstr(c.Name)
			ap, an := cstr(c.Arguments)
			if err := check(C.di_session_add_tool_call(h, np, nn, ap, an)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Session is a conversation or a sequence of generations over one growing context, whose model
// state the engine keeps between generations (a follow-up turn only processes its new tokens).
// When a generation ends, completion 0's output joins the context. Its methods may be called
// from several goroutines (they take turns); Close, and the Cancel and Close of its streams, never
// wait for a generation.
type Session struct {
	e         *Engine
	h         *C.di_session
	mu        sync.Mutex  // the library's session calls are one thread at a time
	active    *generation // the last generation started
	closed    atomic.Bool
	closeOnce sync.Once
}

// NewSession opens an empty session.
func (e *Engine) NewSession() (*Session, error) {
	if err := e.alive(); err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(e)
	var h *C.di_session
	if err := check(C.di_session_create(e.h, &h)); err != nil {
		return nil, err
	}
	s := &Session{e: e, h: h}
	runtime.SetFinalizer(s, (*Session).Close)
	return s, nil
}

// lock takes the session for one library call sequence.
func (s *Session) lock() error {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return closedError("session")
	}
	if err := s.e.alive(); err != nil {
		s.mu.Unlock()
		return err
	}
	return nil
}

// Append adds input to the context without generating.
func (s *Session) Append(in Input) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return in.addTo(s.h)
}

// Generate adds prompt (nil: nothing) to the context and starts generating with the given
// parameters (nil: the model's defaults). It returns at once; the output comes through the
// Stream. (Input added before a failure stays in the context.) When ctx ends first, the generation is cancelled. A session runs one generation at a
// time: ErrState while the last one still runs, unless it was cancelled or closed (then Generate
// waits for its end).
func (s *Session) Generate(ctx context.Context, prompt Input, sampling *Sampling) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	if a := s.active; a != nil && a.cancelRequested() {
		select {
		case <-a.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	g := newGeneration(s, false, newPipe(1), 0)
	if err := s.start(ctx, g, prompt, sampling, nil); err != nil {
		return nil, err
	}
	return newStream(g), nil
}

// start runs one generation on the locked session; sp is the library's parameters when the
// caller built them already (a batch shares one set), else they are built from sampling.
func (s *Session) start(ctx context.Context, g *generation, prompt Input, sampling *Sampling, sp *C.di_sampling) error {
	if sp == nil {
		var err error
		if sp, err = cSampling(s.e, sampling); err != nil {
			return err
		}
		defer C.di_sampling_free(sp)
	}
	if prompt != nil {
		if err := prompt.addTo(s.h); err != nil {
			return err
		}
	}
	if err := s.e.d.register(g); err != nil {
		return err
	}
	err := check(C.di_session_set_queue(s.h, s.e.d.q, C.uint64_t(g.tag)))
	if err == nil {
		err = check(C.di_session_generate(s.h, sp))
	}
	runtime.KeepAlive(s.e)
	if err != nil {
		s.e.d.unregister(g)
		return err
	}
	s.active = g
	g.watch(ctx)
	return nil
}

// cancelGeneration: di_session_cancel is safe from any thread, without the session's lock; after
// Close the handle is freed and the call fails harmlessly.
func (s *Session) cancelGeneration() {
	C.di_error_free(C.di_session_cancel(s.h))
}

// ContextLength is the number of tokens in the context.
func (s *Session) ContextLength() (int, error) {
	if err := s.lock(); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	var n C.int64_t
	if err := check(C.di_session_context_length(s.h, &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// ContextTokens returns the context's token ids.
func (s *Session) ContextTokens() ([]int32, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return readInts(256, func(buf *C.int32_t, cap C.size_t, n *C.size_t) *C.di_error {
		return C.di_session_context_tokens(s.h, buf, cap, n)
	})
}

// Reset empties the context (and the chat transcript) and releases the state. Not while
// generating (ErrState).
func (s *Session) Reset() error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return check(C.di_session_reset(s.h))
}

// SetKeepCancelledOutput says whether the output of a cancelled generation joins the context
// (completion 0's output up to the cancel, like a chat's stop button); by default it does not.
func (s *Session) SetKeepCancelledOutput(keep bool) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	return check(C.di_session_set_keep_cancelled_output(s.h, cbool(keep)))
}

// Close cancels a running generation (its stream's Next returns ErrClosed) and releases the
// session. Idempotent and safe from any goroutine.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.mu.Lock()
		if a := s.active; a != nil {
			select {
			case <-a.done:
			default:
				// A one-shot session's stream or batch decides about its own pipe.
				if !a.ownsSession {
					a.out.close(closedError("session"))
				}
				a.cancel(closedError("session"))
			}
		}
		C.di_session_free(s.h)
		s.mu.Unlock()
		runtime.SetFinalizer(s, nil)
	})
	return nil
}
