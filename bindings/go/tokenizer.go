package deepinfer

// #include "helpers.h"
import "C"

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// TextFlags say how text is tokenized.
type TextFlags uint32

// Text flags.
const (
	// TextPlain: control-token lookalikes in the text become ordinary tokens.
	TextPlain TextFlags = 0
	// TextSpecial: added tokens written in the text are recognised (as HF tokenizers do).
	TextSpecial TextFlags = 1
)

// DetokFlags say how ids become text.
type DetokFlags uint32

// Detokenizing flags.
const (
	DetokSkipSpecial DetokFlags = 1
)

// Tokenizer is a model's tokenizer on its own (tooling and tests) or an engine's. Safe for
// concurrent use.
type Tokenizer struct {
	h         *C.di_tokenizer
	closed    atomic.Bool
	closeOnce sync.Once
}

func newTokenizer(h *C.di_tokenizer) *Tokenizer {
	t := &Tokenizer{h: h}
	runtime.SetFinalizer(t, (*Tokenizer).Close)
	return t
}

// NewTokenizer loads a tokenizer.json, or the one in a model directory.
func NewTokenizer(path string) (*Tokenizer, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	p, n := cstr(path)
	var h *C.di_tokenizer
	if err := check(C.di_tokenizer_create(p, n, &h)); err != nil {
		return nil, err
	}
	return newTokenizer(h), nil
}

// Tokenizer returns the engine's tokenizer (ErrUnsupported when the model has none).
func (e *Engine) Tokenizer() (*Tokenizer, error) {
	if err := e.alive(); err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(e)
	var h *C.di_tokenizer
	if err := check(C.di_engine_tokenizer(e.h, &h)); err != nil {
		return nil, err
	}
	return newTokenizer(h), nil
}

func (t *Tokenizer) alive() error {
	if t.closed.Load() {
		return closedError("tokenizer")
	}
	return nil
}

// VocabSize is the largest token id + 1.
func (t *Tokenizer) VocabSize() (int, error) {
	if err := t.alive(); err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(t)
	var n C.int32_t
	if err := check(C.di_tokenizer_vocab_size(t.h, &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// Encode tokenizes UTF-8 text (invalid UTF-8 is ErrInvalidArgument).
func (t *Tokenizer) Encode(text string, flags TextFlags) ([]int32, error) {
	if err := t.alive(); err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(t)
	p, n := cstr(text)
	return readInts(len(text)/2+8, func(buf *C.int32_t, cap C.size_t, out *C.size_t) *C.di_error {
		return C.di_tokenizer_encode(t.h, p, n, C.di_text_flags(flags), buf, cap, out)
	})
}

// Decode returns the text of ids (an id outside the vocabulary is ErrInvalidArgument).
func (t *Tokenizer) Decode(ids []int32, flags DetokFlags) (string, error) {
	if err := t.alive(); err != nil {
		return "", err
	}
	defer runtime.KeepAlive(t)
	p, n := cids(ids)
	return readText(len(ids)*4+16, func(buf *C.char, cap C.size_t, out *C.size_t) *C.di_error {
		return C.di_tokenizer_decode(t.h, p, n, C.di_detok_flags(flags), buf, cap, out)
	})
}

// CompileGrammar compiles a grammar for this tokenizer alone: masks are vocabSize wide (0: the
// tokenizer's size) and eos ids are allowed exactly when the output is complete.
func (t *Tokenizer) CompileGrammar(vocabSize int, eos []int32, kind GrammarKind, spec string,
	opts *GrammarOptions) (*Grammar, error) {
	if err := t.alive(); err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(t)
	v, err := int32Field("vocab_size", vocabSize)
	if err != nil {
		return nil, err
	}
	ep, en := cids(eos)
	sp, sn := cstr(spec)
	flags, run := opts.flags()
	var g *C.di_grammar
	if err := check(C.di_grammar_compile_for_tokenizer(t.h, v, ep, en, C.di_grammar_kind(kind), sp, sn, flags, run,
		&g)); err != nil {
		return nil, err
	}
	return newGrammar(g), nil
}

// Close releases the tokenizer. Idempotent and safe from any goroutine.
func (t *Tokenizer) Close() error {
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		C.di_tokenizer_free(t.h)
		runtime.SetFinalizer(t, nil)
	})
	return nil
}
