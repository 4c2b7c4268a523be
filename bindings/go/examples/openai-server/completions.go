package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sort"
	"strings"
	"time"

	deepinfer "github.com/deepinfer/deepinfer/bindings/go"
)

// OpenAI's completions take at most 5 alternatives per token.
const maxCompletionLogprobs = 5

func (s *server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	prompts, e := req.prompts()
	if e != nil {
		writeError(w, e)
		return
	}
	switch {
	case req.Suffix != nil && *req.Suffix != "":
		e = badRequest("suffix", "suffix is not supported")
	case req.BestOf != nil && (req.N == nil && *req.BestOf != 1 || req.N != nil && *req.BestOf != *req.N):
		e = badRequest("best_of", "best_of other than n is not supported")
	case req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > maxCompletionLogprobs):
		e = badRequest("logprobs", "logprobs must be between 0 and %d", maxCompletionLogprobs)
	}
	if e != nil {
		writeError(w, e)
		return
	}
	// OpenAI's default for completions; chat completions take the model's.
	maxTokens := req.MaxTokens
	if maxTokens == nil {
		maxTokens = deepinfer.Ptr(16)
	}
	sp, e := req.sampling(s.defaults, maxTokens)
	if e != nil {
		writeError(w, e)
		return
	}
	if req.Logprobs != nil {
		sp.Logprobs, sp.TopLogprobs = true, *req.Logprobs
	}
	echoes := make([]string, len(prompts))
	if req.Echo {
		for i, p := range prompts {
			if echoes[i], e = s.promptText(p); e != nil {
				writeError(w, e)
				return
			}
		}
	}
	b, err := s.eng.GenerateBatch(r.Context(), prompts, &sp)
	if err != nil {
		writeError(w, fromEngine(err))
		return
	}
	defer b.Close()
	c := completionCall{s: s, req: &req, n: max1(sp.N), echoes: echoes, id: newID("cmpl-"), created: time.Now().Unix()}
	if req.Stream {
		c.stream(w, b)
	} else {
		c.complete(r.Context(), w, b)
	}
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

func (s *server) promptText(p deepinfer.Input) (string, *apiError) {
	switch p := p.(type) {
	case deepinfer.Text:
		return string(p), nil
	case deepinfer.Tokens:
		t, err := s.eng.Detokenize(p, 0)
		if err != nil {
			e := fromEngine(err)
			e.Param = strPtr("prompt")
			return "", e
		}
		return t, nil
	}
	return "", nil
}

type completionCall struct {
	s       *server
	req     *completionRequest
	n       int      // completions per prompt
	echoes  []string // each prompt's text when echo is on
	id      string
	created int64
}

type completionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

type completionBody struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
}

func (c *completionCall) body(choices []completionChoice) completionBody {
	if choices == nil {
		choices = []completionChoice{}
	}
	return completionBody{ID: c.id, Object: "text_completion", Created: c.created, Model: c.s.model, Choices: choices}
}

// index numbers the choices prompt by prompt, as OpenAI does.
func (c *completionCall) index(ev deepinfer.BatchEvent) int { return ev.Prompt*c.n + ev.Completion }

func (c *completionCall) complete(ctx context.Context, w http.ResponseWriter, b *deepinfer.Batch) {
	texts := map[int]*strings.Builder{}
	lps := map[int]*completionLogprobs{}
	var choices []completionChoice
	var u usage
	for {
		ev, err := b.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() == nil {
				writeError(w, fromEngine(err))
			}
			return
		}
		i := c.index(ev)
		if texts[i] == nil {
			texts[i] = &strings.Builder{}
			texts[i].WriteString(c.echoes[ev.Prompt])
			if c.req.Logprobs != nil {
				lps[i] = &completionLogprobs{}
			}
		}
		if lps[i] != nil {
			lps[i].add(c.s, ev.Logprobs, texts[i].Len())
		}
		texts[i].WriteString(ev.Text)
		if ev.Kind != deepinfer.EventFinished {
			continue
		}
		if ev.FinishReason == deepinfer.FinishError {
			writeError(w, fromEngine(ev.Err))
			return
		}
		u.add(ev.Event)
		finish := finishReason(ev.FinishReason)
		choices = append(choices, completionChoice{Index: i, Text: texts[i].String(), Logprobs: lps[i], FinishReason: &finish})
	}
	sortChoices(choices, func(c completionChoice) int { return c.Index })
	body := c.body(choices)
	body.Usage = &u
	writeJSON(w, body)
}

func (c *completionCall) stream(w http.ResponseWriter, b *deepinfer.Batch) {
	out := startSSE(w)
	offsets := map[int]int{}
	started := map[int]bool{}
	var u usage
	for {
		ev, err := b.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			out.streamError(fromEngine(err))
			return
		}
		if ev.Kind == deepinfer.EventFinished && ev.FinishReason == deepinfer.FinishError {
			out.streamError(fromEngine(ev.Err))
			return
		}
		i := c.index(ev)
		choice := completionChoice{Index: i, Text: ev.Text}
		if !started[i] {
			started[i] = true
			choice.Text = c.echoes[ev.Prompt] + ev.Text
			offsets[i] = len(c.echoes[ev.Prompt])
		}
		if c.req.Logprobs != nil {
			choice.Logprobs = &completionLogprobs{}
			choice.Logprobs.add(c.s, ev.Logprobs, offsets[i])
		}
		offsets[i] += len(ev.Text)
		if ev.Kind == deepinfer.EventFinished {
			u.add(ev.Event)
			finish := finishReason(ev.FinishReason)
			choice.FinishReason = &finish
		}
		if choice.Text == "" && choice.FinishReason == nil && len(ev.Logprobs) == 0 {
			continue
		}
		if out.send(c.body([]completionChoice{choice})) != nil {
			return // the client left; closing the batch cancels the generation
		}
	}
	if c.req.includeUsage() {
		body := c.body(nil)
		body.Usage = &u
		out.send(body)
	}
	out.done()
}

func sortChoices[T any](choices []T, index func(T) int) {
	sort.Slice(choices, func(i, j int) bool { return index(choices[i]) < index(choices[j]) })
}
