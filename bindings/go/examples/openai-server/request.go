package main

import (
	"bytes"
	"encoding/json"
	"strconv"

	deepinfer "github.com/deepinfer/deepinfer/bindings/go"
)

// samplingRequest holds the fields that /v1/completions and /v1/chat/completions share.
type samplingRequest struct {
	Model            string             `json:"model"`
	Temperature      *float32           `json:"temperature"`
	TopP             *float32           `json:"top_p"`
	N                *int               `json:"n"`
	MaxTokens        *int               `json:"max_tokens"`
	Stop             stopList           `json:"stop"`
	Seed             *int64             `json:"seed"`
	PresencePenalty  *float32           `json:"presence_penalty"`
	FrequencyPenalty *float32           `json:"frequency_penalty"`
	LogitBias        map[string]float32 `json:"logit_bias"`
	Stream           bool               `json:"stream"`
	StreamOptions    *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	// Extensions that vLLM's OpenAI server takes too.
	TopK              *int     `json:"top_k"`
	MinP              *float32 `json:"min_p"`
	RepetitionPenalty *float32 `json:"repetition_penalty"`
	MinTokens         *int     `json:"min_tokens"`
	IgnoreEOS         bool     `json:"ignore_eos"`
}

// stopList is OpenAI's "stop": a string, an array of strings or null.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		*s = nil
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = stopList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return badRequest("stop", "stop must be a string or an array of strings")
	}
	*s = many
	return nil
}

func (r *samplingRequest) includeUsage() bool {
	return r.StreamOptions != nil && r.StreamOptions.IncludeUsage
}

// sampling applies the request to the model's defaults (generation_config.json), as vLLM does.
// The library checks every value when the generation starts; only zero needs a word here, since
// a zero field of deepinfer.Sampling means "the default" where zero is out of range.
func (r *samplingRequest) sampling(base deepinfer.Sampling, maxTokens *int) (deepinfer.Sampling, *apiError) {
	s := base
	for _, f := range []struct {
		name string
		zero bool
	}{
		{"max_tokens", maxTokens != nil && *maxTokens == 0}, {"n", r.N != nil && *r.N == 0},
		{"top_p", r.TopP != nil && *r.TopP == 0}, {"repetition_penalty", r.RepetitionPenalty != nil && *r.RepetitionPenalty == 0},
	} {
		if f.zero {
			return s, badRequest(f.name, "%s must be greater than 0", f.name)
		}
	}
	setFloat := func(dst *float32, v *float32) {
		if v != nil {
			*dst = *v
		}
	}
	setInt := func(dst *int, v *int) {
		if v != nil {
			*dst = *v
		}
	}
	setFloat(&s.Temperature, r.Temperature)
	setFloat(&s.TopP, r.TopP)
	setFloat(&s.MinP, r.MinP)
	setFloat(&s.RepetitionPenalty, r.RepetitionPenalty)
	setFloat(&s.PresencePenalty, r.PresencePenalty)
	setFloat(&s.FrequencyPenalty, r.FrequencyPenalty)
	setInt(&s.MaxTokens, maxTokens)
	setInt(&s.N, r.N)
	setInt(&s.TopK, r.TopK)
	setInt(&s.MinTokens, r.MinTokens)
	if r.Seed != nil {
		s.Seed = deepinfer.Ptr(uint64(*r.Seed))
	}
	s.StopStrings = r.Stop
	s.IgnoreEOS = r.IgnoreEOS
	if len(r.LogitBias) > 0 {
		s.LogitBias = make(map[int32]float32, len(r.LogitBias))
		for k, v := range r.LogitBias {
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil {
				return s, badRequest("logit_bias", "logit_bias keys must be token ids, not %q", k)
			}
			s.LogitBias[int32(id)] = v
		}
	}
	return s, nil
}

// chatRequest is the body of POST /v1/chat/completions.
type chatRequest struct {
	samplingRequest
	Messages            []chatMessage   `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Logprobs            bool            `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	ResponseFormat      *responseFormat `json:"response_format"`
	Tools               []tool          `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"` // a string, null or an array of text parts
	ToolCalls  []toolCall      `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
}

type toolCall struct {
	Index    *int   `json:"index,omitempty"` // streamed deltas only
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// completionRequest is the body of POST /v1/completions.
type completionRequest struct {
	samplingRequest
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int            `json:"logprobs"`
	Echo     bool            `json:"echo"`
	Suffix   *string         `json:"suffix"`
	BestOf   *int            `json:"best_of"`
}

// prompts reads "prompt": a string, an array of strings, an array of token ids or an array of
// arrays of token ids.
func (r *completionRequest) prompts() ([]deepinfer.Input, *apiError) {
	var one string
	if err := json.Unmarshal(r.Prompt, &one); err == nil {
		return []deepinfer.Input{deepinfer.Text(one)}, nil
	}
	var texts []string
	if err := json.Unmarshal(r.Prompt, &texts); err == nil && len(texts) > 0 {
		out := make([]deepinfer.Input, len(texts))
		for i, t := range texts {
			out[i] = deepinfer.Text(t)
		}
		return out, nil
	}
	var ids []int32
	if err := json.Unmarshal(r.Prompt, &ids); err == nil && len(ids) > 0 {
		return []deepinfer.Input{deepinfer.Tokens(ids)}, nil
	}
	var batches [][]int32
	if err := json.Unmarshal(r.Prompt, &batches); err == nil && len(batches) > 0 {
		out := make([]deepinfer.Input, len(batches))
		for i, b := range batches {
			out[i] = deepinfer.Tokens(b)
		}
		return out, nil
	}
	return nil, badRequest("prompt", "prompt must be a string, an array of strings, an array of token ids or an array of arrays of token ids")
}
