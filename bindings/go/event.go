package deepinfer

// #include "helpers.h"
import "C"

import (
	"strconv"
	"unsafe"
)

// EventKind says what an Event carries. Newer libraries may add kinds; events of kinds this
// package does not know are skipped.
type EventKind int32

// Event kinds. The end of a generation (the library's DONE event) is not an Event: Next returns
// io.EOF instead.
const (
	EventTokens         EventKind = 1 // new output of one completion
	EventFinished       EventKind = 2 // one completion ended
	EventPromptLogprobs EventKind = 3 // the prompt tokens' logprobs, before any output

	eventDone EventKind = 4
)

func (k EventKind) String() string {
	switch k {
	case EventTokens:
		return "tokens"
	case EventFinished:
		return "finished"
	case EventPromptLogprobs:
		return "prompt_logprobs"
	}
	return "event(" + strconv.Itoa(int(k)) + ")"
}

// FinishReason says why a completion ended. Newer libraries may add reasons; String shows an
// unknown one as finish_reason(N).
type FinishReason int32

// Finish reasons.
const (
	FinishNone      FinishReason = 0 // not a FINISHED event
	FinishStop      FinishReason = 1 // EOS, a stop token or a stop string
	FinishLength    FinishReason = 2 // max_tokens or the context limit
	FinishCancelled FinishReason = 3
	FinishError     FinishReason = 4 // see Event.Err
)

func (r FinishReason) String() string {
	switch r {
	case FinishNone:
		return "none"
	case FinishStop:
		return "stop"
	case FinishLength:
		return "length"
	case FinishCancelled:
		return "cancelled"
	case FinishError:
		return "error"
	}
	return "finish_reason(" + strconv.Itoa(int(r)) + ")"
}

// Usage counts a completion's tokens.
type Usage struct {
	PromptTokens     int // prompt tokens processed for this generation
	CompletionTokens int // tokens generated
	CachedTokens     int // prompt tokens whose state was reused from earlier turns
}

// TopLogprob is one alternative at a position.
type TopLogprob struct {
	Token   int32
	Logprob float32
}

// Logprob describes one token of an event.
type Logprob struct {
	Token   int32
	Logprob float32
	Rank    int          // 1-based rank of the token in the distribution
	Top     []TopLogprob // the most likely tokens, most likely first
}

// Event is one piece of a generation's output. Its data is copied out of the library: it may be
// kept and shared freely.
type Event struct {
	Kind       EventKind
	Completion int     // which completion (0 .. n-1)
	Tokens     []int32 // new output ids, or the prompt ids of EventPromptLogprobs
	// Text those tokens complete (a character is never split; text that may still become a stop
	// string is held back, so an event may carry tokens without text and the last one text
	// without tokens).
	Text         string
	Logprobs     []Logprob    // one per token, when requested
	FinishReason FinishReason // EventFinished
	Usage        Usage        // EventFinished
	Seed         uint64       // EventFinished: the seed used (set it to replay the output)
	Err          error        // EventFinished with FinishError
}

// eventFromC copies an event read by digo_queue_drain.
func eventFromC(o *C.digo_event) (Event, error) {
	if o.read_error != nil {
		// digo_events_free frees it: copy the message only.
		return Event{}, &Error{Code: Code(C.di_error_code(o.read_error)), Message: C.GoString(C.di_error_message(o.read_error))}
	}
	ev := Event{
		Kind:         EventKind(o.kind),
		Completion:   int(o.completion),
		FinishReason: FinishReason(o.finish),
		Usage: Usage{PromptTokens: int(o.prompt_tokens), CompletionTokens: int(o.completion_tokens),
			CachedTokens: int(o.cached_tokens)},
		Seed: uint64(o.seed),
	}
	if o.n_tokens > 0 {
		ev.Tokens = append([]int32(nil), unsafe.Slice((*int32)(unsafe.Pointer(o.tokens)), int(o.n_tokens))...)
	}
	if o.text_len > 0 {
		ev.Text = C.GoStringN(o.text, C.int(o.text_len))
	}
	if o.event_error != nil {
		ev.Err = &Error{Code: Code(C.di_error_code(o.event_error)), Message: C.GoString(C.di_error_message(o.event_error))}
	}
	if o.has_logprobs != 0 && o.logprobs_n > 0 {
		ev.Logprobs = logprobsFromC(o, ev.Tokens)
	}
	return ev, nil
}

func logprobsFromC(o *C.digo_event, tokens []int32) []Logprob {
	n, k := int(o.logprobs_n), int(o.logprobs_k)
	lps := unsafe.Slice((*float32)(unsafe.Pointer(o.logprobs)), n)
	ranks := unsafe.Slice((*int32)(unsafe.Pointer(o.ranks)), n)
	var topIDs []int32
	var topLps []float32
	if k > 0 {
		topIDs = unsafe.Slice((*int32)(unsafe.Pointer(o.top_ids)), n*k)
		topLps = unsafe.Slice((*float32)(unsafe.Pointer(o.top_logprobs)), n*k)
	}
	out := make([]Logprob, n)
	for i := range out {
		out[i] = Logprob{Logprob: lps[i], Rank: int(ranks[i])}
		if i < len(tokens) {
			out[i].Token = tokens[i]
		}
		for j := 0; j < k; j++ {
			if id := topIDs[i*k+j]; id >= 0 { // -1 fills a row with fewer than k
				out[i].Top = append(out[i].Top, TopLogprob{Token: id, Logprob: topLps[i*k+j]})
			}
		}
	}
	return out
}
