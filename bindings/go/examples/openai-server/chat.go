package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	deepinfer "github.com/deepinfer/deepinfer/bindings/go"
)

func (s *server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	plan, e := planTools(&req)
	if e != nil {
		writeError(w, e)
		return
	}
	msgs, e := chatMessages(req.Messages, plan)
	if e != nil {
		writeError(w, e)
		return
	}
	maxTokens := req.MaxCompletionTokens
	if maxTokens == nil {
		maxTokens = req.MaxTokens
	}
	sp, e := req.sampling(s.defaults, maxTokens)
	if e != nil {
		writeError(w, e)
		return
	}
	if req.TopLogprobs != nil && !req.Logprobs {
		writeError(w, badRequest("top_logprobs", "top_logprobs needs logprobs set to true"))
		return
	}
	if req.Logprobs {
		sp.Logprobs = true
		if req.TopLogprobs != nil {
			sp.TopLogprobs = *req.TopLogprobs
		}
	}
	// The tool-call markup is made of special tokens: keep them in the text to parse it.
	sp.KeepSpecialTokens = plan.mode == toolsAuto
	g, e := s.chatGrammar(req.ResponseFormat, plan)
	if e != nil {
		writeError(w, e)
		return
	}
	if g != nil {
		sp.Grammar = g
		defer g.Close() // the generation keeps its own reference
	}
	// The request's context ends when the client goes away, which cancels the generation.
	st, err := s.eng.Generate(r.Context(), msgs, &sp)
	if err != nil {
		writeError(w, fromEngine(err))
		return
	}
	defer st.Close()
	c := chatCall{s: s, req: &req, plan: plan, id: newID("chatcmpl-"), created: time.Now().Unix()}
	if req.Stream {
		c.stream(w, st)
	} else {
		c.complete(r.Context(), w, st)
	}
}

// chatMessages turns OpenAI messages into the session's chat, with the tool definitions when the
// model may call them (the library describes them to the model).
func chatMessages(in []chatMessage, plan toolPlan) (deepinfer.Chat, *apiError) {
	if len(in) == 0 {
		return deepinfer.Chat{}, badRequest("messages", "messages must hold at least one message")
	}
	out := make(deepinfer.Messages, 0, len(in)+1)
	for i, m := range in {
		content, e := messageText(m.Content, i)
		if e != nil {
			return deepinfer.Chat{}, e
		}
		msg := deepinfer.Message{Content: content}
		switch m.Role {
		case "system", "developer":
			msg.Role = deepinfer.RoleSystem
		case "user":
			msg.Role = deepinfer.RoleUser
		case "assistant":
			msg.Role = deepinfer.RoleAssistant
			for _, c := range m.ToolCalls {
				msg.ToolCalls = append(msg.ToolCalls, deepinfer.ToolCall{Name: c.Function.Name, Arguments: c.Function.Arguments})
			}
		case "tool":
			msg.Role = deepinfer.RoleTool
		default:
			return deepinfer.Chat{}, badRequest("messages", "messages[%d].role %q is not system, developer, user, assistant or tool", i, m.Role)
		}
		out = append(out, msg)
	}
	chat := deepinfer.Chat{Messages: out}
	if plan.mode != toolsNone {
		chat.Tools = plan.definitions()
	}
	return chat, nil
}

// messageText reads a message's content: a string, null, or an array of text parts.
func messageText(raw json.RawMessage, i int) (string, *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", badRequest("messages", "messages[%d].content must be a string or an array of content parts", i)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", badRequest("messages", "messages[%d]: content parts of type %q are not supported (text only)", i, p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// chatGrammar compiles what constrains the output: the tool-call schema under tool_choice
// "required" or a named function, else the response_format's.
func (s *server) chatGrammar(rf *responseFormat, plan toolPlan) (*deepinfer.Grammar, *apiError) {
	var schema, param string
	// A whitespace run longer than this is a model looping on whitespace, not formatting.
	opts := &deepinfer.GrammarOptions{MaxWhitespaceRun: 16}
	switch {
	case plan.mode == toolsRequired || plan.mode == toolsNamed:
		schema, param = plan.schema(), "tools"
		opts = &deepinfer.GrammarOptions{CompactWhitespace: true} // arguments are compact JSON by custom
	case rf == nil || rf.Type == "" || rf.Type == "text":
		return nil, nil
	case rf.Type == "json_object":
		schema, param = `{"type": "object"}`, "response_format"
	case rf.Type == "json_schema":
		if rf.JSONSchema == nil || len(bytes.TrimSpace(rf.JSONSchema.Schema)) == 0 {
			return nil, badRequest("response_format", "response_format.json_schema.schema is required")
		}
		schema, param = string(rf.JSONSchema.Schema), "response_format"
	default:
		return nil, badRequest("response_format", "response_format.type %q is not text, json_object or json_schema", rf.Type)
	}
	g, err := s.eng.CompileGrammar(deepinfer.GrammarJSONSchema, schema, opts)
	if err != nil {
		e := fromEngine(err)
		e.Param = strPtr(param)
		return nil, e
	}
	return g, nil
}

// chatCall is one chat completion request on its way out.
type chatCall struct {
	s       *server
	req     *chatRequest
	plan    toolPlan
	id      string
	created int64
}

// choiceState follows one completion's output.
type choiceState struct {
	text     strings.Builder // everything the completion wrote
	split    contentSplitter // toolsAuto: content until the tool-call markup
	started  bool            // streaming: the role was sent
	logprobs []chatTokenLogprob
}

// result is a finished completion as OpenAI shows it: content, tool calls and finish reason.
func (c *chatCall) result(st *choiceState, reason deepinfer.FinishReason) (*string, []toolCall, string) {
	text := st.text.String()
	finish := finishReason(reason)
	var calls []parsedCall
	switch c.plan.mode {
	case toolsAuto:
		text, calls = parseToolCalls(text)
	case toolsRequired, toolsNamed:
		if parsed, ok := c.plan.parseConstrained(text); ok {
			text, calls = "", parsed
		}
	}
	if len(calls) == 0 {
		return &text, nil, finish
	}
	out := make([]toolCall, len(calls))
	for i, pc := range calls {
		out[i].ID, out[i].Type = newID("call_"), "function"
		out[i].Function.Name, out[i].Function.Arguments = pc.name, pc.arguments
	}
	var content *string
	if text != "" {
		content = &text
	}
	return content, out, "tool_calls"
}

type chatMessageOut struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
	Refusal   *string    `json:"refusal"`
}

type chatChoiceOut struct {
	Index        int            `json:"index"`
	Message      chatMessageOut `json:"message"`
	Logprobs     *chatLogprobs  `json:"logprobs"`
	FinishReason string         `json:"finish_reason"`
}

func (c *chatCall) complete(ctx context.Context, w http.ResponseWriter, st *deepinfer.Stream) {
	var states []*choiceState
	var choices []chatChoiceOut
	var u usage
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() == nil { // else the client left: nobody to answer
				writeError(w, fromEngine(err))
			}
			return
		}
		for len(states) <= ev.Completion {
			states = append(states, &choiceState{})
		}
		cs := states[ev.Completion]
		cs.text.WriteString(ev.Text)
		if c.req.Logprobs {
			cs.logprobs = append(cs.logprobs, c.s.chatLogprobs(ev.Logprobs)...)
		}
		if ev.Kind != deepinfer.EventFinished {
			continue
		}
		if ev.FinishReason == deepinfer.FinishError {
			writeError(w, fromEngine(ev.Err))
			return
		}
		u.add(ev)
		content, calls, finish := c.result(cs, ev.FinishReason)
		choice := chatChoiceOut{Index: ev.Completion, FinishReason: finish,
			Message: chatMessageOut{Role: "assistant", Content: content, ToolCalls: calls}}
		if c.req.Logprobs {
			choice.Logprobs = &chatLogprobs{Content: cs.logprobs}
		}
		choices = append(choices, choice)
	}
	sortChoices(choices, func(c chatChoiceOut) int { return c.Index })
	writeJSON(w, struct {
		ID      string          `json:"id"`
		Object  string          `json:"object"`
		Created int64           `json:"created"`
		Model   string          `json:"model"`
		Choices []chatChoiceOut `json:"choices"`
		Usage   usage           `json:"usage"`
	}{c.id, "chat.completion", c.created, c.s.model, choices, u})
}

type chatDelta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

type chatChunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDelta     `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatChunk struct {
	ID      string            `json:"id"`
	Object  string            `json:"object"`
	Created int64             `json:"created"`
	Model   string            `json:"model"`
	Choices []chatChunkChoice `json:"choices"`
	Usage   *usage            `json:"usage,omitempty"`
}

func (c *chatCall) chunk(choices ...chatChunkChoice) chatChunk {
	if choices == nil {
		choices = []chatChunkChoice{}
	}
	return chatChunk{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.s.model, Choices: choices}
}

func (c *chatCall) stream(w http.ResponseWriter, st *deepinfer.Stream) {
	out := startSSE(w)
	states := map[int]*choiceState{}
	var u usage
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			out.streamError(fromEngine(err))
			return
		}
		cs := states[ev.Completion]
		if cs == nil {
			cs = &choiceState{}
			states[ev.Completion] = cs
		}
		if ev.Kind == deepinfer.EventFinished && ev.FinishReason == deepinfer.FinishError {
			out.streamError(fromEngine(ev.Err))
			return
		}
		for _, ch := range c.streamEvent(cs, ev, &u) {
			if out.send(ch) != nil {
				return // the client left; closing the stream cancels the generation
			}
		}
	}
	if c.req.includeUsage() {
		ch := c.chunk()
		ch.Usage = &u
		out.send(ch)
	}
	out.done()
}

// streamEvent turns one event into the chunks it makes.
func (c *chatCall) streamEvent(cs *choiceState, ev deepinfer.Event, u *usage) []any {
	var chunks []any
	if !cs.started {
		cs.started = true
		empty := ""
		chunks = append(chunks, c.chunk(chatChunkChoice{Index: ev.Completion, Delta: chatDelta{Role: "assistant", Content: &empty}}))
	}
	cs.text.WriteString(ev.Text)
	delta := ev.Text
	switch c.plan.mode {
	case toolsAuto:
		delta = cs.split.add(ev.Text)
		if ev.Kind == deepinfer.EventFinished {
			delta += cs.split.flush()
		}
	case toolsRequired, toolsNamed:
		delta = "" // the calls go out whole at the end
	}
	if delta != "" || len(ev.Logprobs) > 0 {
		ch := chatChunkChoice{Index: ev.Completion, Delta: chatDelta{Content: &delta}}
		if c.req.Logprobs {
			ch.Logprobs = &chatLogprobs{Content: c.s.chatLogprobs(ev.Logprobs)}
		}
		chunks = append(chunks, c.chunk(ch))
	}
	if ev.Kind != deepinfer.EventFinished {
		return chunks
	}
	u.add(ev)
	content, calls, finish := c.result(cs, ev.FinishReason)
	for i := range calls {
		index := i
		calls[i].Index = &index
	}
	switch {
	case len(calls) > 0:
		chunks = append(chunks, c.chunk(chatChunkChoice{Index: ev.Completion, Delta: chatDelta{ToolCalls: calls}}))
	case (c.plan.mode == toolsRequired || c.plan.mode == toolsNamed) && content != nil && *content != "":
		// The constrained output did not complete (max_tokens): it goes out as it is.
		chunks = append(chunks, c.chunk(chatChunkChoice{Index: ev.Completion, Delta: chatDelta{Content: content}}))
	}
	return append(chunks, c.chunk(chatChunkChoice{Index: ev.Completion, FinishReason: &finish}))
}
