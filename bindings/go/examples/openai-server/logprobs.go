package main

import deepinfer "github.com/deepinfer/deepinfer/bindings/go"

// chatLogprobs is a choice's "logprobs" in chat completions.
type chatLogprobs struct {
	Content []chatTokenLogprob `json:"content"`
}

type chatTokenLogprob struct {
	Token       string           `json:"token"`
	Logprob     float32          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []chatTopLogprob `json:"top_logprobs"`
}

type chatTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func textBytes(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}

func (s *server) chatLogprobs(lps []deepinfer.Logprob) []chatTokenLogprob {
	out := make([]chatTokenLogprob, len(lps))
	for i, lp := range lps {
		t := s.tokenText(lp.Token)
		out[i] = chatTokenLogprob{Token: t, Logprob: lp.Logprob, Bytes: textBytes(t), TopLogprobs: []chatTopLogprob{}}
		for _, top := range lp.Top {
			tt := s.tokenText(top.Token)
			out[i].TopLogprobs = append(out[i].TopLogprobs, chatTopLogprob{Token: tt, Logprob: top.Logprob, Bytes: textBytes(tt)})
		}
	}
	return out
}

// completionLogprobs is a choice's "logprobs" in (legacy) completions.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// add appends an event's tokens; offset is the length of the choice's text before them.
func (c *completionLogprobs) add(s *server, lps []deepinfer.Logprob, offset int) {
	for _, lp := range lps {
		t := s.tokenText(lp.Token)
		top := make(map[string]float32, len(lp.Top))
		for _, alt := range lp.Top {
			top[s.tokenText(alt.Token)] = alt.Logprob
		}
		c.Tokens = append(c.Tokens, t)
		c.TokenLogprobs = append(c.TokenLogprobs, lp.Logprob)
		c.TopLogprobs = append(c.TopLogprobs, top)
		c.TextOffset = append(c.TextOffset, offset)
		offset += len(t)
	}
}
