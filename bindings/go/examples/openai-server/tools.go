package main

import (
	"bytes"
	"encoding/json"
	"strings"
)

// DeepSeek's tool-call markup, as its chat template writes a call: the calls open with
// callsBegin; each is callBegin + type + sep + name + "\n```json\n" + arguments + "\n```" +
// callEnd; callsEnd closes them.
const (
	callsBegin = "<｜tool▁calls▁begin｜>"
	callsEnd   = "<｜tool▁calls▁end｜>"
	callBegin  = "<｜tool▁call▁begin｜>"
	callEnd    = "<｜tool▁call▁end｜>"
	callSep    = "<｜tool▁sep｜>"
	endOfText  = "<｜end▁of▁sentence｜>"
)

type toolMode int

const (
	toolsNone     toolMode = iota
	toolsAuto              // the model may call tools in its own format, parsed back
	toolsRequired          // a grammar makes the output a JSON array of calls
	toolsNamed             // a grammar makes the output the named function's arguments
)

type toolPlan struct {
	mode  toolMode
	name  string // toolsNamed
	tools []tool
}

// planTools reads "tools" and "tool_choice".
func planTools(req *chatRequest) (toolPlan, *apiError) {
	choice := bytes.TrimSpace(req.ToolChoice)
	if len(req.Tools) == 0 {
		if len(choice) > 0 && !bytes.Equal(choice, []byte("null")) && !bytes.Equal(choice, []byte(`"none"`)) &&
			!bytes.Equal(choice, []byte(`"auto"`)) {
			return toolPlan{}, badRequest("tool_choice", "tool_choice needs tools")
		}
		return toolPlan{}, nil
	}
	seen := map[string]bool{}
	for i, t := range req.Tools {
		if t.Type != "function" {
			return toolPlan{}, badRequest("tools", "tools[%d].type must be \"function\"", i)
		}
		if t.Function.Name == "" || seen[t.Function.Name] {
			return toolPlan{}, badRequest("tools", "tools[%d].function.name must be a new, non-empty name", i)
		}
		seen[t.Function.Name] = true
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && p[0] != '{' {
			return toolPlan{}, badRequest("tools", "tools[%d].function.parameters must be a JSON Schema object", i)
		}
	}
	plan := toolPlan{mode: toolsAuto, tools: req.Tools}
	var word string
	if len(choice) == 0 || bytes.Equal(choice, []byte("null")) {
		return plan, nil
	}
	if json.Unmarshal(choice, &word) == nil {
		switch word {
		case "auto":
		case "none":
			plan.mode = toolsNone
		case "required":
			plan.mode = toolsRequired
		default:
			return toolPlan{}, badRequest("tool_choice", "tool_choice %q is not none, auto or required", word)
		}
		return plan, nil
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(choice, &named) != nil || named.Type != "function" || !seen[named.Function.Name] {
		return toolPlan{}, badRequest("tool_choice", "tool_choice must name one of the tools as {\"type\": \"function\", \"function\": {\"name\": ...}}")
	}
	plan.mode, plan.name = toolsNamed, named.Function.Name
	return plan, nil
}

// definitions is the tools as the JSON array the library takes (di_session_set_tools), each with a
// parameters schema.
func (p toolPlan) definitions() string {
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	type definition struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}
	defs := make([]definition, 0, len(p.tools))
	for _, t := range p.tools {
		defs = append(defs, definition{"function", function{t.Function.Name, t.Function.Description, json.RawMessage(p.parameters(t.Function.Name))}})
	}
	b, _ := json.Marshal(defs)
	return string(b)
}

func (p toolPlan) parameters(name string) string {
	for _, t := range p.tools {
		if t.Function.Name == name && len(bytes.TrimSpace(t.Function.Parameters)) > 0 {
			return string(t.Function.Parameters)
		}
	}
	return `{"type": "object"}`
}

// schema is the JSON Schema that a grammar enforces on the output under tool_choice "required"
// (an array of {"name", "arguments"} calls) or a named function (its arguments).
func (p toolPlan) schema() string {
	if p.mode == toolsNamed {
		return p.parameters(p.name)
	}
	var alts []string
	for _, t := range p.tools {
		name, _ := json.Marshal(t.Function.Name)
		alts = append(alts, `{"type": "object", "properties": {"name": {"const": `+string(name)+`}, "arguments": `+
			p.parameters(t.Function.Name)+`}, "required": ["name", "arguments"], "additionalProperties": false}`)
	}
	return `{"type": "array", "minItems": 1, "items": {"anyOf": [` + strings.Join(alts, ", ") + `]}}`
}

type parsedCall struct {
	name, arguments string
}

// parseConstrained reads an output made under schema(); ok is false when it is incomplete.
func (p toolPlan) parseConstrained(text string) ([]parsedCall, bool) {
	if !json.Valid([]byte(text)) {
		return nil, false
	}
	if p.mode == toolsNamed {
		return []parsedCall{{name: p.name, arguments: text}}, true
	}
	var calls []struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if json.Unmarshal([]byte(text), &calls) != nil {
		return nil, false
	}
	out := make([]parsedCall, len(calls))
	for i, c := range calls {
		var compact bytes.Buffer
		json.Compact(&compact, c.Arguments)
		out[i] = parsedCall{name: c.Name, arguments: compact.String()}
	}
	return out, true
}

// parseToolCalls splits an output written with special tokens kept into its content and the calls
// in the model's markup. A call that does not parse is left out.
func parseToolCalls(text string) (string, []parsedCall) {
	i := strings.Index(text, callsBegin)
	if i < 0 {
		return cleanContent(text), nil
	}
	content := cleanContent(text[:i])
	rest := text[i+len(callsBegin):]
	var calls []parsedCall
	for {
		j := strings.Index(rest, callBegin)
		if j < 0 {
			break
		}
		rest = rest[j+len(callBegin):]
		body := rest
		if k := strings.Index(rest, callEnd); k >= 0 {
			body, rest = rest[:k], rest[k+len(callEnd):]
		} else {
			rest = ""
		}
		if c, ok := parseCall(body); ok {
			calls = append(calls, c)
		}
	}
	return content, calls
}

// parseCall reads "function<sep>NAME\n```json\nARGS\n```".
func parseCall(body string) (parsedCall, bool) {
	s := strings.Index(body, callSep)
	if s < 0 {
		return parsedCall{}, false
	}
	body = body[s+len(callSep):]
	nl := strings.IndexByte(body, '\n')
	if nl < 0 {
		return parsedCall{}, false
	}
	name := strings.TrimSpace(body[:nl])
	args := strings.TrimSpace(body[nl+1:])
	args = strings.TrimPrefix(args, "```json")
	args = strings.TrimPrefix(args, "```")
	args = strings.TrimSpace(strings.TrimSuffix(args, "```"))
	if name == "" {
		return parsedCall{}, false
	}
	return parsedCall{name: name, arguments: args}, true
}

// cleanContent drops the end-of-sentence marker that shows when special tokens are kept.
func cleanContent(s string) string { return strings.ReplaceAll(s, endOfText, "") }

// contentSplitter passes content through as it streams, holding back what may be the start of the
// tool-call markup; once the markup begins, nothing more is content.
type contentSplitter struct {
	pending string
	inCalls bool
}

func (c *contentSplitter) add(text string) string {
	if c.inCalls {
		return ""
	}
	c.pending += text
	if i := strings.Index(c.pending, callsBegin); i >= 0 {
		out := c.pending[:i]
		c.pending, c.inCalls = "", true
		return cleanContent(out)
	}
	keep := 0
	for n := len(callsBegin) - 1; n > 0; n-- {
		if strings.HasSuffix(c.pending, callsBegin[:n]) {
			keep = n
			break
		}
	}
	out := c.pending[:len(c.pending)-keep]
	c.pending = c.pending[len(c.pending)-keep:]
	return cleanContent(out)
}

// flush returns what was held back once the output ended without markup.
func (c *contentSplitter) flush() string {
	out := c.pending
	c.pending = ""
	if c.inCalls {
		return ""
	}
	return cleanContent(out)
}
