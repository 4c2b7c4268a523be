package deepinfer

// #include "helpers.h"
import "C"

import (
	"errors"
	"runtime"
	"runtime/cgo"
	"sync"
	"sync/atomic"
)

// Engine is a loaded model with its step thread. It is safe for concurrent use: any number of
// goroutines may open sessions and generate at once (the engine batches them). Close it when done.
type Engine struct {
	h         *C.di_engine // never changes; a freed handle makes calls fail, never crash
	d         *dispatcher
	closed    atomic.Bool
	closeOnce sync.Once
}

// Open loads a model directory (config.json, *.safetensors, tokenizer.json, ...).
func Open(model string, opts ...Option) (*Engine, error) {
	if versionErr != nil {
		return nil, versionErr
	}
	var cfg *C.di_engine_config
	if err := check(C.di_engine_config_create(&cfg)); err != nil {
		return nil, err
	}
	defer C.di_engine_config_free(cfg)
	p, n := cstr(model)
	if err := check(C.di_engine_config_set_model_path(cfg, p, n)); err != nil {
		return nil, err
	}
	o := openConfig{cfg: cfg}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.progress != nil || (o.ctx != nil && o.ctx.Done() != nil) {
		h := cgo.NewHandle(&o)
		defer h.Delete()
		if err := check(C.digo_set_progress(cfg, C.uintptr_t(h))); err != nil {
			return nil, err
		}
	}
	var h *C.di_engine
	if err := check(C.di_engine_create(cfg, &h)); err != nil {
		if o.ctx != nil && o.ctx.Err() != nil && errors.Is(err, ErrCancelled) {
			return nil, &causeError{err: err, cause: o.ctx.Err()}
		}
		return nil, err
	}
	d, err := newDispatcher()
	if err != nil {
		C.di_engine_free(h)
		return nil, err
	}
	e := &Engine{h: h, d: d}
	// A leak safety net only: di_engine_free joins the engine's threads, so it never runs on the
	// finalizer goroutine itself.
	runtime.SetFinalizer(e, func(e *Engine) { go e.Close() })
	return e, nil
}

// progress is called by the library while the model loads (see helpers.c).
func (o *openConfig) report(done, total uint64) bool {
	if o.ctx != nil && o.ctx.Err() != nil {
		return false
	}
	return o.progress == nil || o.progress(done, total)
}

// Close cancels every running generation (their streams end with ErrClosed), stops the engine
// and releases the model. It is idempotent and safe from any goroutine; it returns once the
// engine's threads have stopped. Sessions stay valid objects whose calls return ErrClosed.
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		e.closed.Store(true)
		e.d.cancelAll(closedError("engine"))
		C.di_engine_free(e.h)
		e.d.stop()
		runtime.SetFinalizer(e, nil)
	})
	return nil
}

func (e *Engine) alive() error {
	if e.closed.Load() {
		return closedError("engine")
	}
	return nil
}

// Info describes the loaded model and the engine's limits.
type Info struct {
	Device          Device
	HasTokenizer    bool
	VocabSize       int     // width of the logits
	MaxContext      int64   // longest context of one sequence, in tokens
	CapacityTokens  int64   // tokens of context the state memory holds in total
	EOSTokens       []int32 // end-of-sequence ids
	WeightDType     string  // how weights are held on the device, e.g. "bf16"
	Layers          int64
	HiddenSize      int64
	AttentionHeads  int64
	RoutedExperts   int64 // per MoE layer
	ExpertsPerToken int64
	MaxPosition     int64 // the model's longest context
	Parameters      int64
	WeightBytes     int64
}

// Info reads the engine's and model's facts.
func (e *Engine) Info() (Info, error) {
	var info Info
	if err := e.alive(); err != nil {
		return info, err
	}
	defer runtime.KeepAlive(e)
	var dev C.di_device
	var hasTok, vocab C.int32_t
	var maxCtx, capTok C.int64_t
	for _, err := range []*C.di_error{
		C.di_engine_device(e.h, &dev),
		C.di_engine_has_tokenizer(e.h, &hasTok),
		C.di_engine_vocab_size(e.h, &vocab),
		C.di_engine_max_context(e.h, &maxCtx),
		C.di_engine_capacity_tokens(e.h, &capTok),
	} {
		if err := check(err); err != nil {
			return info, err
		}
	}
	info.Device, info.HasTokenizer, info.VocabSize = Device(dev), hasTok != 0, int(vocab)
	info.MaxContext, info.CapacityTokens = int64(maxCtx), int64(capTok)
	var err error
	info.EOSTokens, err = readInts(4, func(buf *C.int32_t, cap C.size_t, n *C.size_t) *C.di_error {
		return C.di_engine_eos_tokens(e.h, buf, cap, n)
	})
	if err != nil {
		return info, err
	}
	info.WeightDType, err = readText(16, func(buf *C.char, cap C.size_t, n *C.size_t) *C.di_error {
		return C.di_engine_weight_dtype(e.h, buf, cap, n)
	})
	if err != nil {
		return info, err
	}
	for _, f := range []struct {
		key ModelInfoKey
		dst *int64
	}{
		{ModelLayers, &info.Layers}, {ModelHiddenSize, &info.HiddenSize},
		{ModelAttentionHeads, &info.AttentionHeads}, {ModelRoutedExperts, &info.RoutedExperts},
		{ModelExpertsPerToken, &info.ExpertsPerToken}, {ModelMaxPosition, &info.MaxPosition},
		{ModelParameters, &info.Parameters}, {ModelWeightBytes, &info.WeightBytes},
	} {
		if *f.dst, err = e.ModelInfo(f.key); err != nil {
			return info, err
		}
	}
	return info, nil
}

// ModelInfoKey names one fact about the model (di_model_info; newer libraries add keys).
type ModelInfoKey int32

// The facts of deepinfer.h.
const (
	ModelLayers          ModelInfoKey = 1
	ModelHiddenSize      ModelInfoKey = 2
	ModelAttentionHeads  ModelInfoKey = 3
	ModelRoutedExperts   ModelInfoKey = 4
	ModelExpertsPerToken ModelInfoKey = 5
	ModelVocabSize       ModelInfoKey = 6
	ModelMaxPosition     ModelInfoKey = 7
	ModelParameters      ModelInfoKey = 8
	ModelWeightBytes     ModelInfoKey = 9
)

// ModelInfo reads one fact by key (ErrInvalidArgument for a key the library does not know).
func (e *Engine) ModelInfo(key ModelInfoKey) (int64, error) {
	if err := e.alive(); err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(e)
	var v C.int64_t
	if err := check(C.di_engine_model_info(e.h, C.di_model_info(key), &v)); err != nil {
		return 0, err
	}
	return int64(v), nil
}

// Stats is a snapshot of the engine's bookkeeping.
type Stats struct {
	RunningSequences   uint64 // completions with model state, being computed
	WaitingSequences   uint64 // completions submitted and not yet started (or preempted)
	RunningGenerations uint64 // generations submitted and not finished
	ResidentSessions   uint64 // idle sessions whose state is kept for their next turn
	StateBytesUsed     uint64
	StateBytesTotal    uint64
	PromptTokens       uint64 // context tokens processed since the engine started
	GeneratedTokens    uint64 // tokens sampled since the engine started
	Steps              uint64 // engine steps (forwards)
	Preemptions        uint64 // sequences whose state was given up to make room
	StepMicroseconds   uint64 // time spent in steps
}

// Stats takes a snapshot of the engine's counters.
func (e *Engine) Stats() (Stats, error) {
	var s Stats
	if err := e.alive(); err != nil {
		return s, err
	}
	defer runtime.KeepAlive(e)
	var st *C.di_stats
	if err := check(C.di_engine_stats(e.h, &st)); err != nil {
		return s, err
	}
	defer C.di_stats_free(st)
	for _, f := range []struct {
		key C.di_stat
		dst *uint64
	}{
		{C.DI_STAT_RUNNING_SEQUENCES, &s.RunningSequences}, {C.DI_STAT_WAITING_SEQUENCES, &s.WaitingSequences},
		{C.DI_STAT_RUNNING_GENERATIONS, &s.RunningGenerations}, {C.DI_STAT_RESIDENT_SESSIONS, &s.ResidentSessions},
		{C.DI_STAT_STATE_BYTES_USED, &s.StateBytesUsed}, {C.DI_STAT_STATE_BYTES_TOTAL, &s.StateBytesTotal},
		{C.DI_STAT_PROMPT_TOKENS, &s.PromptTokens}, {C.DI_STAT_GENERATED_TOKENS, &s.GeneratedTokens},
		{C.DI_STAT_STEPS, &s.Steps}, {C.DI_STAT_PREEMPTIONS, &s.Preemptions},
		{C.DI_STAT_STEP_MICROSECONDS, &s.StepMicroseconds},
	} {
		var v C.uint64_t
		if err := check(C.di_stats_get(st, f.key, &v)); err != nil {
			return s, err
		}
		*f.dst = uint64(v)
	}
	return s, nil
}

// Tokenize encodes text with the model's tokenizer.
func (e *Engine) Tokenize(text string, flags TextFlags) ([]int32, error) {
	if err := e.alive(); err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(e)
	p, n := cstr(text)
	return readInts(len(text)/2+8, func(buf *C.int32_t, cap C.size_t, out *C.size_t) *C.di_error {
		return C.di_engine_tokenize(e.h, p, n, C.di_text_flags(flags), buf, cap, out)
	})
}

// Detokenize decodes ids to text.
func (e *Engine) Detokenize(ids []int32, flags DetokFlags) (string, error) {
	if err := e.alive(); err != nil {
		return "", err
	}
	defer runtime.KeepAlive(e)
	p, n := cids(ids)
	return readText(len(ids)*4+16, func(buf *C.char, cap C.size_t, out *C.size_t) *C.di_error {
		return C.di_engine_detokenize(e.h, p, n, C.di_detok_flags(flags), buf, cap, out)
	})
}

// SamplingDefaults returns the library's defaults overridden by the model's
// generation_config.json: what a nil *Sampling means to Generate.
func (e *Engine) SamplingDefaults() (Sampling, error) { return e.ResolveSampling(nil) }

// ResolveSampling checks s as a generation would and returns it as the library holds it: zero
// fields that stand for defaults replaced by them (nil: the model's defaults). An invalid field
// is an ErrInvalidArgument naming it, so a server can refuse a request before streaming.
func (e *Engine) ResolveSampling(s *Sampling) (Sampling, error) {
	if err := e.alive(); err != nil {
		return Sampling{}, err
	}
	sp, err := cSampling(e, s)
	if err != nil {
		return Sampling{}, err
	}
	defer C.di_sampling_free(sp)
	return samplingFromC(sp)
}

// causeError is a library error whose cause is known on the Go side (a context that ended):
// errors.Is matches both.
type causeError struct {
	err   error
	cause error
}

func (c *causeError) Error() string        { return c.err.Error() + " (" + c.cause.Error() + ")" }
func (c *causeError) Unwrap() error        { return c.err }
func (c *causeError) Is(target error) bool { return errors.Is(c.cause, target) }
