package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	deepinfer "github.com/deepinfer/deepinfer/bindings/go"
)

// server answers OpenAI's API from one engine, shared by every request (the engine batches them).
type server struct {
	eng      *deepinfer.Engine
	model    string             // the name clients ask for
	defaults deepinfer.Sampling // the model's generation_config.json
	created  int64
	maxBody  int64
	tokens   sync.Map // token id -> its text, for logprobs
}

func newServer(eng *deepinfer.Engine, model string) (*server, error) {
	defaults, err := eng.SamplingDefaults()
	if err != nil {
		return nil, err
	}
	return &server{eng: eng, model: model, defaults: defaults, created: time.Now().Unix(), maxBody: 16 << 20}, nil
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", s.method(http.MethodGet, s.handleModels))
	mux.HandleFunc("/v1/models/", s.method(http.MethodGet, s.handleModel))
	mux.HandleFunc("/v1/completions", s.method(http.MethodPost, s.handleCompletions))
	mux.HandleFunc("/v1/chat/completions", s.method(http.MethodPost, s.handleChat))
	mux.HandleFunc("/metrics", s.method(http.MethodGet, s.handleMetrics))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notFound("", "no route %s %s", r.Method, r.URL.Path))
	})
	return mux
}

func (s *server) method(m string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != m {
			w.Header().Set("Allow", m)
			writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
				Message: fmt.Sprintf("%s takes %s, not %s", r.URL.Path, m, r.Method)})
			return
		}
		h(w, r)
	}
}

type modelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *server) card() modelCard {
	return modelCard{ID: s.model, Object: "model", Created: s.created, OwnedBy: "deepinfer"}
}

func (s *server) handleModels(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, struct {
		Object string      `json:"object"`
		Data   []modelCard `json:"data"`
	}{"list", []modelCard{s.card()}})
}

func (s *server) handleModel(w http.ResponseWriter, r *http.Request) {
	if id := strings.TrimPrefix(r.URL.Path, "/v1/models/"); id != s.model {
		writeError(w, s.unknownModel(id))
		return
	}
	writeJSON(w, s.card())
}

func (s *server) unknownModel(id string) *apiError {
	return notFound("model_not_found", "The model `%s` does not exist; this server serves `%s`.", id, s.model)
}

// handleMetrics shows the engine's counters in Prometheus' text format.
func (s *server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	st, err := s.eng.Stats()
	if err != nil {
		writeError(w, fromEngine(err))
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	for _, m := range []struct {
		name string
		v    uint64
	}{
		{"running_generations", st.RunningGenerations}, {"running_sequences", st.RunningSequences},
		{"waiting_sequences", st.WaitingSequences}, {"resident_sessions", st.ResidentSessions},
		{"state_bytes_used", st.StateBytesUsed}, {"state_bytes_total", st.StateBytesTotal},
		{"prompt_tokens_total", st.PromptTokens}, {"generated_tokens_total", st.GeneratedTokens},
		{"steps_total", st.Steps}, {"preemptions_total", st.Preemptions},
	} {
		fmt.Fprintf(w, "deepinfer_%s %d\n", m.name, m.v)
	}
}

// decode reads a JSON body and checks the model it names.
func (s *server) decode(w http.ResponseWriter, r *http.Request, v interface{ modelName() string }) *apiError {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return badRequest("", "the request body holds more than one JSON value")
	}
	switch name := v.modelName(); name {
	case s.model:
		return nil
	case "":
		return badRequest("model", "model is required")
	default:
		return s.unknownModel(name)
	}
}

func (r *samplingRequest) modelName() string { return r.Model }

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// tokenText is a token's text, for logprobs (cached: the vocabulary is fixed).
func (s *server) tokenText(id int32) string {
	if t, ok := s.tokens.Load(id); ok {
		return t.(string)
	}
	t, err := s.eng.Detokenize([]int32{id}, 0)
	if err != nil {
		return ""
	}
	s.tokens.Store(id, t)
	return t
}

func finishReason(r deepinfer.FinishReason) string {
	switch r {
	case deepinfer.FinishStop, deepinfer.FinishCancelled:
		return "stop"
	case deepinfer.FinishLength:
		return "length"
	}
	return r.String()
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// add counts one completion; every completion of a prompt reports the prompt, so it counts once.
func (u *usage) add(ev deepinfer.Event) {
	if ev.Completion == 0 {
		u.PromptTokens += ev.Usage.PromptTokens
	}
	u.CompletionTokens += ev.Usage.CompletionTokens
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
}

// sse writes server-sent events; the first failed write ends the stream (the client left, and
// the request's context then cancels the generation).
type sse struct {
	w   http.ResponseWriter
	f   http.Flusher
	err error
}

func startSSE(w http.ResponseWriter) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	s := &sse{w: w, f: f}
	s.flush()
	return s
}

func (s *sse) flush() {
	if s.f != nil {
		s.f.Flush()
	}
}

func (s *sse) send(v any) error {
	if s.err != nil {
		return s.err
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.err = err
		return err
	}
	if _, s.err = fmt.Fprintf(s.w, "data: %s\n\n", b); s.err == nil {
		s.flush()
	}
	return s.err
}

func (s *sse) done() {
	if s.err == nil {
		_, s.err = fmt.Fprint(s.w, "data: [DONE]\n\n")
		s.flush()
	}
}

// streamError reports a failure after the stream began, as OpenAI's API does: an error object as
// an event.
func (s *sse) streamError(e *apiError) {
	s.send(struct {
		Error *apiError `json:"error"`
	}{e})
}
