package deepinfer

// #include "helpers.h"
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// GrammarKind is the language of a grammar's spec.
type GrammarKind int32

// Grammar kinds.
const (
	GrammarRegex      GrammarKind = 1
	GrammarJSONSchema GrammarKind = 2 // draft 2020-12
	GrammarEBNF       GrammarKind = 3 // GBNF dialect, start rule `root`
)

// GrammarOptions tune how a grammar compiles; the zero value is the library's default.
type GrammarOptions struct {
	CompactWhitespace bool   // JSON Schema: no whitespace between JSON tokens
	MaxWhitespaceRun  uint32 // the longest whitespace run between JSON tokens (0: unbounded)
}

func (o *GrammarOptions) flags() (C.di_grammar_flags, C.uint32_t) {
	if o == nil {
		return 0, 0
	}
	var f C.di_grammar_flags
	if o.CompactWhitespace {
		f |= C.DI_GRAMMAR_COMPACT_WHITESPACE
	}
	return f, C.uint32_t(o.MaxWhitespaceRun)
}

// Grammar is a compiled constraint on a generation's output: only tokens that keep the output a
// prefix of a match may be sampled. Immutable and safe for concurrent use; attach it through
// Sampling.Grammar. A feature that cannot be enforced is a compile error (ErrGrammar), never a
// looser constraint.
type Grammar struct {
	h         *C.di_grammar
	closed    atomic.Bool
	closeOnce sync.Once
}

func newGrammar(h *C.di_grammar) *Grammar {
	g := &Grammar{h: h}
	runtime.SetFinalizer(g, (*Grammar).Close)
	return g
}

// CompileGrammar compiles a grammar for the engine's tokenizer (opts nil: defaults).
func (e *Engine) CompileGrammar(kind GrammarKind, spec string, opts *GrammarOptions) (*Grammar, error) {
	if err := e.alive(); err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(e)
	p, n := cstr(spec)
	flags, run := opts.flags()
	var g *C.di_grammar
	if err := check(C.di_grammar_compile_options(e.h, C.di_grammar_kind(kind), p, n, flags, run, &g)); err != nil {
		return nil, err
	}
	return newGrammar(g), nil
}

// ValidateGrammar reports the error a spec would give when compiled (nil: valid), without a
// tokenizer.
func ValidateGrammar(kind GrammarKind, spec string, opts *GrammarOptions) error {
	if versionErr != nil {
		return versionErr
	}
	p, n := cstr(spec)
	flags, run := opts.flags()
	return check(C.di_grammar_validate(C.di_grammar_kind(kind), p, n, flags, run))
}

// Close releases the grammar; sampling parameters and generations that use it keep it alive in
// the library. Idempotent and safe from any goroutine.
func (g *Grammar) Close() error {
	g.closeOnce.Do(func() {
		g.closed.Store(true)
		C.di_grammar_free(g.h)
		runtime.SetFinalizer(g, nil)
	})
	return nil
}

// Matcher follows one output through a grammar, token by token (tooling and tests; the engine
// applies grammars itself). One goroutine at a time.
type Matcher struct {
	h         *C.di_matcher
	closed    atomic.Bool
	closeOnce sync.Once
}

// NewMatcher starts a matcher at the grammar's beginning.
func (g *Grammar) NewMatcher() (*Matcher, error) {
	if g.closed.Load() {
		return nil, closedError("grammar")
	}
	defer runtime.KeepAlive(g)
	var h *C.di_matcher
	if err := check(C.di_matcher_create(g.h, &h)); err != nil {
		return nil, err
	}
	m := &Matcher{h: h}
	runtime.SetFinalizer(m, (*Matcher).Close)
	return m, nil
}

func (m *Matcher) call(f func() *C.di_error) error {
	if m.closed.Load() {
		return closedError("matcher")
	}
	err := check(f())
	runtime.KeepAlive(m)
	return err
}

// AcceptToken consumes a token; ErrInvalidArgument (state unchanged) when not allowed here.
func (m *Matcher) AcceptToken(id int32) error {
	return m.call(func() *C.di_error { return C.di_matcher_accept_token(m.h, C.int32_t(id)) })
}

// AcceptString consumes text as one step; ErrInvalidArgument (state unchanged) when not allowed.
func (m *Matcher) AcceptString(s string) error {
	p, n := cstr(s)
	return m.call(func() *C.di_error { return C.di_matcher_accept_string(m.h, p, n) })
}

// Rollback undoes the last n accept steps.
func (m *Matcher) Rollback(n int) error {
	return m.call(func() *C.di_error { return C.di_matcher_rollback(m.h, C.size_t(n)) })
}

// Reset goes back to the grammar's beginning.
func (m *Matcher) Reset() error {
	return m.call(func() *C.di_error { return C.di_matcher_reset(m.h) })
}

// Mask returns the allowed-token bitmask for the next step: bit i%32 of word i/32 is token i.
func (m *Matcher) Mask() ([]uint32, error) {
	var words []uint32
	err := m.call(func() *C.di_error {
		var n C.size_t
		if e := C.di_matcher_fill_mask(m.h, nil, 0, &n); e != nil && C.di_error_code(e) != C.DI_ERR_BUFFER_TOO_SMALL {
			return e
		} else if e != nil {
			C.di_error_free(e)
		}
		words = make([]uint32, n)
		if n == 0 {
			return nil
		}
		return C.di_matcher_fill_mask(m.h, (*C.uint32_t)(unsafe.Pointer(&words[0])), n, &n)
	})
	return words, err
}

// CanEnd reports whether the output so far is a complete match.
func (m *Matcher) CanEnd() (bool, error) {
	var v C.int32_t
	err := m.call(func() *C.di_error { return C.di_matcher_can_end(m.h, &v) })
	return v != 0, err
}

// Terminated reports whether an end-of-sequence token was accepted.
func (m *Matcher) Terminated() (bool, error) {
	var v C.int32_t
	err := m.call(func() *C.di_error { return C.di_matcher_is_terminated(m.h, &v) })
	return v != 0, err
}

// Close releases the matcher. Idempotent and safe from any goroutine.
func (m *Matcher) Close() error {
	m.closeOnce.Do(func() {
		m.closed.Store(true)
		C.di_matcher_free(m.h)
		runtime.SetFinalizer(m, nil)
	})
	return nil
}
