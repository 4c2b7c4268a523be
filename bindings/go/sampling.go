package deepinfer

// #include "helpers.h"
import "C"

import (
	"math"
	"runtime"
	"sort"
	"unsafe"
)

// Sampling holds a generation's parameters as plain Go fields, converted to the library's form
// each time a generation starts (the library checks every value; ErrInvalidArgument names the
// field). The zero value is usable: greedy decoding with the library's defaults otherwise. Where
// zero is outside a field's range it stands for the library's default, as noted. A nil *Sampling
// means the model's defaults (Engine.SamplingDefaults). Only Grammar is shared, not copied.
type Sampling struct {
	Temperature       float32 // [0, 1e6]; 0 = greedy
	TopK              int     // 0 or -1 = off
	TopP              float32 // (0, 1]; 1 = off; 0 = the default (off)
	MinP              float32 // [0, 1]; 0 = off
	RepetitionPenalty float32 // [0.01, 100]; 1 = off; 0 = the default (off)
	PresencePenalty   float32 // [-2, 2]
	FrequencyPenalty  float32 // [-2, 2]
	MaxTokens         int     // >= 1; 0 = the default (256)
	MinTokens         int     // stop tokens and EOS are masked until this many
	N                 int     // completions per generation, [1, 128]; 0 = 1
	// Seed makes the output repeat exactly (nil: drawn from the engine; each FINISHED event
	// reports the seed used). Ptr(uint64(42)) writes one inline.
	Seed *uint64
	// FirstCompletion: completion i draws from random stream FirstCompletion+i, so a single
	// completion can replay completion i of an earlier generation with the same seed.
	FirstCompletion   int
	IgnoreEOS         bool
	Logprobs          bool // each token's logprob and rank
	TopLogprobs       int  // with Logprobs: this many alternatives per token, [0, 20]
	PromptLogprobs    bool // an EventPromptLogprobs event with the prompt tokens' logprobs
	PromptTopLogprobs int
	LogitBias         map[int32]float32 // added to the logits of these ids, each in [-100, 100]
	AllowedTokens     []int32           // only these ids may be sampled (empty: any)
	StopTokens        []int32           // ids that end a completion (besides EOS)
	StopStrings       []string          // texts that end a completion (at most 64)
	IncludeStopString bool              // keep the stop string in the output
	KeepSpecialTokens bool              // special tokens' text stays in event text
	Grammar           *Grammar          // constrains the output (nil: none)
}

// Ptr returns a pointer to v, for optional fields such as Sampling.Seed.
func Ptr[T any](v T) *T { return &v }

// cSampling builds the library's parameters for s (nil: the engine's defaults); the caller frees
// them.
func cSampling(e *Engine, s *Sampling) (*C.di_sampling, error) {
	var sp *C.di_sampling
	if s == nil {
		err := check(C.di_engine_sampling_defaults(e.h, &sp))
		runtime.KeepAlive(e)
		return sp, err
	}
	if err := check(C.di_sampling_create(&sp)); err != nil {
		return nil, err
	}
	if err := s.apply(sp); err != nil {
		C.di_sampling_free(sp)
		return nil, err
	}
	return sp, nil
}

func int32Field(name string, v int) (C.int32_t, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, newError(CodeInvalidArgument, "%s %d is out of range", name, v)
	}
	return C.int32_t(v), nil
}

func (s *Sampling) apply(sp *C.di_sampling) error {
	set := []func() *C.di_error{
		func() *C.di_error { return C.di_sampling_set_temperature(sp, C.float(s.Temperature)) },
		func() *C.di_error { return C.di_sampling_set_min_p(sp, C.float(s.MinP)) },
		func() *C.di_error { return C.di_sampling_set_presence_penalty(sp, C.float(s.PresencePenalty)) },
		func() *C.di_error { return C.di_sampling_set_frequency_penalty(sp, C.float(s.FrequencyPenalty)) },
		func() *C.di_error { return C.di_sampling_set_ignore_eos(sp, cbool(s.IgnoreEOS)) },
		func() *C.di_error { return C.di_sampling_set_include_stop_string(sp, cbool(s.IncludeStopString)) },
		func() *C.di_error { return C.di_sampling_set_skip_special_tokens(sp, cbool(!s.KeepSpecialTokens)) },
	}
	if s.TopP != 0 {
		set = append(set, func() *C.di_error { return C.di_sampling_set_top_p(sp, C.float(s.TopP)) })
	}
	if s.RepetitionPenalty != 0 {
		set = append(set, func() *C.di_error { return C.di_sampling_set_repetition_penalty(sp, C.float(s.RepetitionPenalty)) })
	}
	if s.Seed != nil {
		seed := *s.Seed
		set = append(set, func() *C.di_error { return C.di_sampling_set_seed(sp, C.uint64_t(seed)) })
	}
	for _, f := range []struct {
		name   string
		v      int
		skip   bool
		setter func(*C.di_sampling, C.int32_t) *C.di_error
	}{
		{"top_k", s.TopK, false, func(p *C.di_sampling, v C.int32_t) *C.di_error { return C.di_sampling_set_top_k(p, v) }},
		{"max_tokens", s.MaxTokens, s.MaxTokens == 0, func(p *C.di_sampling, v C.int32_t) *C.di_error { return C.di_sampling_set_max_tokens(p, v) }},
		{"min_tokens", s.MinTokens, false, func(p *C.di_sampling, v C.int32_t) *C.di_error { return C.di_sampling_set_min_tokens(p, v) }},
		{"n", s.N, s.N == 0, func(p *C.di_sampling, v C.int32_t) *C.di_error { return C.di_sampling_set_n(p, v) }},
		{"first_completion", s.FirstCompletion, false, func(p *C.di_sampling, v C.int32_t) *C.di_error {
			return C.di_sampling_set_first_completion(p, v)
		}},
		{"logprobs", s.TopLogprobs, !s.Logprobs, func(p *C.di_sampling, v C.int32_t) *C.di_error { return C.di_sampling_set_logprobs(p, v) }},
		{"prompt_logprobs", s.PromptTopLogprobs, !s.PromptLogprobs, func(p *C.di_sampling, v C.int32_t) *C.di_error {
			return C.di_sampling_set_prompt_logprobs(p, v)
		}},
	} {
		if f.skip {
			continue
		}
		v, err := int32Field(f.name, f.v)
		if err != nil {
			return err
		}
		setter := f.setter
		set = append(set, func() *C.di_error { return setter(sp, v) })
	}
	for _, f := range set {
		if err := check(f()); err != nil {
			return err
		}
	}
	return s.applyLists(sp)
}

func (s *Sampling) applyLists(sp *C.di_sampling) error {
	if len(s.LogitBias) > 0 {
		ids := make([]int32, 0, len(s.LogitBias))
		for id := range s.LogitBias {
			ids = append(ids, id)
		}
		sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
		bias := make([]float32, len(ids))
		for i, id := range ids {
			bias[i] = s.LogitBias[id]
		}
		p, n := cids(ids)
		if err := check(C.di_sampling_set_logit_bias(sp, p, (*C.float)(unsafe.Pointer(&bias[0])), n)); err != nil {
			return err
		}
	}
	if len(s.AllowedTokens) > 0 {
		p, n := cids(s.AllowedTokens)
		if err := check(C.di_sampling_set_allowed_tokens(sp, p, n)); err != nil {
			return err
		}
	}
	if len(s.StopTokens) > 0 {
		p, n := cids(s.StopTokens)
		if err := check(C.di_sampling_set_stop_tokens(sp, p, n)); err != nil {
			return err
		}
	}
	for _, stop := range s.StopStrings {
		p, n := cstr(stop)
		if err := check(C.di_sampling_add_stop_string(sp, p, n)); err != nil {
			return err
		}
	}
	if s.Grammar != nil {
		if s.Grammar.closed.Load() {
			return closedError("grammar")
		}
		err := check(C.di_sampling_set_grammar(sp, s.Grammar.h))
		runtime.KeepAlive(s.Grammar)
		return err
	}
	return nil
}

// samplingFromC reads parameters back through the library's getters.
func samplingFromC(sp *C.di_sampling) (Sampling, error) {
	var s Sampling
	var temperature, topP, minP, rep, presence, frequency C.float
	var topK, maxTokens, minTokens, n, first, ignoreEOS, logprobs, promptLogprobs, includeStop, skipSpecial C.int32_t
	var seed C.uint64_t
	var hasSeed C.int32_t
	for _, err := range []*C.di_error{
		C.di_sampling_get_temperature(sp, &temperature), C.di_sampling_get_top_k(sp, &topK),
		C.di_sampling_get_top_p(sp, &topP), C.di_sampling_get_min_p(sp, &minP),
		C.di_sampling_get_repetition_penalty(sp, &rep), C.di_sampling_get_presence_penalty(sp, &presence),
		C.di_sampling_get_frequency_penalty(sp, &frequency), C.di_sampling_get_max_tokens(sp, &maxTokens),
		C.di_sampling_get_min_tokens(sp, &minTokens), C.di_sampling_get_n(sp, &n),
		C.di_sampling_get_seed(sp, &seed, &hasSeed), C.di_sampling_get_first_completion(sp, &first),
		C.di_sampling_get_ignore_eos(sp, &ignoreEOS), C.di_sampling_get_logprobs(sp, &logprobs),
		C.di_sampling_get_prompt_logprobs(sp, &promptLogprobs),
		C.di_sampling_get_include_stop_string(sp, &includeStop),
		C.di_sampling_get_skip_special_tokens(sp, &skipSpecial),
	} {
		if err := check(err); err != nil {
			return s, err
		}
	}
	s = Sampling{
		Temperature: float32(temperature), TopK: int(topK), TopP: float32(topP), MinP: float32(minP),
		RepetitionPenalty: float32(rep), PresencePenalty: float32(presence), FrequencyPenalty: float32(frequency),
		MaxTokens: int(maxTokens), MinTokens: int(minTokens), N: int(n), FirstCompletion: int(first),
		IgnoreEOS: ignoreEOS != 0, Logprobs: logprobs >= 0, PromptLogprobs: promptLogprobs >= 0,
		IncludeStopString: includeStop != 0, KeepSpecialTokens: skipSpecial == 0,
	}
	if s.Logprobs {
		s.TopLogprobs = int(logprobs)
	}
	if s.PromptLogprobs {
		s.PromptTopLogprobs = int(promptLogprobs)
	}
	if hasSeed != 0 {
		s.Seed = Ptr(uint64(seed))
	}
	return s, samplingListsFromC(sp, &s)
}

func samplingListsFromC(sp *C.di_sampling, s *Sampling) error {
	var err error
	if s.AllowedTokens, err = readInts(0, func(buf *C.int32_t, cap C.size_t, n *C.size_t) *C.di_error {
		return C.di_sampling_get_allowed_tokens(sp, buf, cap, n)
	}); err != nil {
		return err
	}
	if s.StopTokens, err = readInts(0, func(buf *C.int32_t, cap C.size_t, n *C.size_t) *C.di_error {
		return C.di_sampling_get_stop_tokens(sp, buf, cap, n)
	}); err != nil {
		return err
	}
	var nBias C.size_t
	if e := C.di_sampling_get_logit_bias(sp, nil, nil, 0, &nBias); e != nil {
		if C.di_error_code(e) != C.DI_ERR_BUFFER_TOO_SMALL {
			return check(e)
		}
		C.di_error_free(e)
	}
	if nBias > 0 {
		ids := make([]int32, nBias)
		bias := make([]float32, nBias)
		if err := check(C.di_sampling_get_logit_bias(sp, (*C.int32_t)(unsafe.Pointer(&ids[0])),
			(*C.float)(unsafe.Pointer(&bias[0])), nBias, &nBias)); err != nil {
			return err
		}
		s.LogitBias = make(map[int32]float32, len(ids))
		for i, id := range ids {
			s.LogitBias[id] = bias[i]
		}
	}
	var count C.size_t
	if err := check(C.di_sampling_stop_string_count(sp, &count)); err != nil {
		return err
	}
	for i := C.size_t(0); i < count; i++ {
		stop, err := readText(64, func(buf *C.char, cap C.size_t, n *C.size_t) *C.di_error {
			return C.di_sampling_get_stop_string(sp, i, buf, cap, n)
		})
		if err != nil {
			return err
		}
		s.StopStrings = append(s.StopStrings, stop)
	}
	var g *C.di_grammar
	if err := check(C.di_sampling_get_grammar(sp, &g)); err != nil {
		return err
	}
	if g != nil {
		s.Grammar = newGrammar(g)
	}
	return nil
}
