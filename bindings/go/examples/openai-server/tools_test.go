package main

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	deepinfer "github.com/deepinfer/deepinfer/bindings/go"
)

// A reply in DeepSeek's tool-call markup, as its chat template writes calls.
const markupReply = "Let me check." + callsBegin +
	callBegin + "function" + callSep + "get_weather\n```json\n{\"city\": \"Paris\"}\n```" + callEnd + "\n" +
	callBegin + "function" + callSep + "get_time\n```json\n{\"zone\": \"CET\"}\n```" + callEnd +
	callsEnd + endOfText

func TestParseToolCalls(t *testing.T) {
	for _, c := range []struct {
		name, text, content string
		calls               []parsedCall
	}{
		{"two calls", markupReply, "Let me check.",
			[]parsedCall{{"get_weather", `{"city": "Paris"}`}, {"get_time", `{"zone": "CET"}`}}},
		{"no markup", "Just text." + endOfText, "Just text.", nil},
		{"no fences, no closing markers", callsBegin + callBegin + "function" + callSep + "f\n{\"a\": 1}", "",
			[]parsedCall{{"f", `{"a": 1}`}}},
		{"a call without a name is left out", callsBegin + callBegin + "function" + callSep + "\n{}" + callEnd +
			callBegin + "function" + callSep + "g\n```json\n{}\n```" + callEnd, "", []parsedCall{{"g", "{}"}}},
		{"markup cut short", "Hm" + callsBegin + callBegin + "funct", "Hm", nil},
	} {
		content, calls := parseToolCalls(c.text)
		if content != c.content || !reflect.DeepEqual(calls, c.calls) {
			t.Errorf("%s: %q %+v, want %q %+v", c.name, content, calls, c.content, c.calls)
		}
	}
}

func TestContentSplitterHoldsBackMarkup(t *testing.T) {
	// The reply arrives cut at every byte: the content streams, the markup never does.
	for _, step := range []int{1, 3, 7, len(markupReply)} {
		var s contentSplitter
		var out strings.Builder
		for i := 0; i < len(markupReply); i += step {
			out.WriteString(s.add(markupReply[i:min(i+step, len(markupReply))]))
		}
		out.WriteString(s.flush())
		if out.String() != "Let me check." {
			t.Errorf("step %d: streamed %q", step, out.String())
		}
	}
	var s contentSplitter
	text := "a <｜tool not quite" + endOfText
	got := s.add(text[:5]) + s.add(text[5:]) + s.flush()
	if got != "a <｜tool not quite" {
		t.Errorf("a lookalike prefix: %q", got)
	}
}

func min(a, b int) int {
	if a < b {
		return a
	}
	return b
}

func weatherPlan(t *testing.T, choice string) toolPlan {
	t.Helper()
	var req chatRequest
	body := `{"tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
		"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
		{"type": "function", "function": {"name": "get_time"}}]` + choice + `}`
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	plan, e := planTools(&req)
	if e != nil {
		t.Fatal(e)
	}
	return plan
}

func TestToolPlans(t *testing.T) {
	if p := weatherPlan(t, ""); p.mode != toolsAuto || !strings.Contains(p.definitions(), `"name":"get_weather"`) ||
		!strings.Contains(p.definitions(), `"parameters":{`) {
		t.Errorf("auto: %+v\n%s", p, p.definitions())
	}
	if p := weatherPlan(t, `, "tool_choice": "none"`); p.mode != toolsNone {
		t.Errorf("none: %+v", p)
	}
	required := weatherPlan(t, `, "tool_choice": "required"`)
	named := weatherPlan(t, `, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}`)
	if required.mode != toolsRequired || named.mode != toolsNamed || named.name != "get_weather" {
		t.Fatalf("required %+v, named %+v", required, named)
	}
	for _, p := range []toolPlan{required, named} {
		if err := deepinfer.ValidateGrammar(deepinfer.GrammarJSONSchema, p.schema(), nil); err != nil {
			t.Errorf("mode %d: the schema does not compile: %v\n%s", p.mode, err, p.schema())
		}
	}
	calls, ok := required.parseConstrained(`[{"name": "get_time", "arguments": { "zone" : "UTC" }}]`)
	if !ok || !reflect.DeepEqual(calls, []parsedCall{{"get_time", `{"zone":"UTC"}`}}) {
		t.Errorf("required: %+v %v", calls, ok)
	}
	calls, ok = named.parseConstrained(`{"city": "Oslo"}`)
	if !ok || !reflect.DeepEqual(calls, []parsedCall{{"get_weather", `{"city": "Oslo"}`}}) {
		t.Errorf("named: %+v %v", calls, ok)
	}
	if _, ok := named.parseConstrained(`{"city": "Os`); ok {
		t.Error("an incomplete output parsed")
	}
	for _, bad := range []string{
		`{"tools": [{"type": "retrieval"}]}`,
		`{"tools": [{"type": "function", "function": {"name": ""}}]}`,
		`{"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]}`,
		`{"tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]}`,
		`{"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "sometimes"}`,
	} {
		var req chatRequest
		json.Unmarshal([]byte(bad), &req)
		if _, e := planTools(&req); e == nil || e.Status != 400 {
			t.Errorf("%s: %v", bad, e)
		}
	}
}

// The markup is made of special tokens: their text shows in events only with KeepSpecialTokens,
// which the server sets under tool_choice auto.
func TestSpecialTokensShowWhenKept(t *testing.T) {
	ids, err := testEngine.Tokenize(callsBegin, deepinfer.TextSpecial)
	if err != nil || len(ids) != 1 {
		t.Fatalf("%s is not one token: %v %v", callsBegin, ids, err)
	}
	for _, keep := range []bool{true, false} {
		st, err := testEngine.Generate(context.Background(), deepinfer.Text("x"), &deepinfer.Sampling{
			MaxTokens: 2, IgnoreEOS: true, LogitBias: map[int32]float32{ids[0]: 100}, KeepSpecialTokens: keep})
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.Collect()
		if err != nil {
			t.Fatal(err)
		}
		want := ""
		if keep {
			want = callsBegin + callsBegin
		}
		if c[0].Text != want {
			t.Errorf("keep %v: %q", keep, c[0].Text)
		}
	}
}

// streamChunks runs events through a chat call's streaming and returns the chunks' choices.
func streamChunks(t *testing.T, plan toolPlan, texts []string) []chatChunkChoice {
	c := chatCall{s: &server{model: "demo"}, req: &chatRequest{}, plan: plan, id: "x"}
	cs := &choiceState{}
	var u usage
	var out []chatChunkChoice
	for i, text := range texts {
		ev := deepinfer.Event{Kind: deepinfer.EventTokens, Text: text}
		if i == len(texts)-1 {
			ev.Kind, ev.FinishReason = deepinfer.EventFinished, deepinfer.FinishStop
		}
		for _, ch := range c.streamEvent(cs, ev, &u) {
			out = append(out, ch.(chatChunk).Choices...)
		}
	}
	return out
}

func TestStreamedToolCalls(t *testing.T) {
	var pieces []string
	for i := 0; i < len(markupReply); i += 5 {
		pieces = append(pieces, markupReply[i:min(i+5, len(markupReply))])
	}
	pieces = append(pieces, "") // the FINISHED event
	var content strings.Builder
	var calls []toolCall
	var finish string
	for _, ch := range streamChunks(t, weatherPlan(t, ""), pieces) {
		if ch.Delta.Content != nil {
			content.WriteString(*ch.Delta.Content)
		}
		calls = append(calls, ch.Delta.ToolCalls...)
		if ch.FinishReason != nil {
			finish = *ch.FinishReason
		}
	}
	if content.String() != "Let me check." || finish != "tool_calls" || len(calls) != 2 ||
		calls[0].Function.Name != "get_weather" || calls[0].Function.Arguments != `{"city": "Paris"}` ||
		*calls[1].Index != 1 || calls[1].ID == "" || calls[1].Type != "function" {
		t.Errorf("content %q, finish %q, calls %+v", content.String(), finish, calls)
	}
	// Without tools the same text is plain content.
	content.Reset()
	for _, ch := range streamChunks(t, toolPlan{}, pieces) {
		if ch.Delta.Content != nil {
			content.WriteString(*ch.Delta.Content)
		}
	}
	if content.String() != markupReply {
		t.Errorf("no tools: %q", content.String())
	}
}
