package deepinfer

import (
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestJSONSchemaGrammar(t *testing.T) {
	schema := `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
		"age": {"type": "integer", "minimum": 0, "maximum": 150}}, "required": ["name", "age"],
		"additionalProperties": false}`
	g, err := shared.CompileGrammar(GrammarJSONSchema, schema, &GrammarOptions{CompactWhitespace: true})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	out := collect(t, Text("A person as JSON: "), &Sampling{Temperature: 1, Seed: Ptr(uint64(3)), MaxTokens: 96, N: 3, Grammar: g})
	for i, c := range out {
		var v struct {
			Name *string `json:"name"`
			Age  *int    `json:"age"`
		}
		dec := json.NewDecoder(strings.NewReader(c.Text))
		dec.DisallowUnknownFields()
		if c.FinishReason != FinishStop || dec.Decode(&v) != nil || v.Name == nil || v.Age == nil ||
			utf8.RuneCountInString(*v.Name) > 12 || *v.Age < 0 || *v.Age > 150 {
			t.Errorf("completion %d (%v) does not match the schema: %q", i, c.FinishReason, c.Text)
		}
	}
}

func TestRegexAndEBNFGrammars(t *testing.T) {
	re, err := shared.CompileGrammar(GrammarRegex, `(yes|no), [0-9]{2,4}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	ebnf, err := shared.CompileGrammar(GrammarEBNF, `root ::= "(" item ("," item)? ("," item)? ")"
item ::= [a-c] [a-c]?`, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		g    *Grammar
		want *regexp.Regexp
	}{{re, regexp.MustCompile(`^(yes|no), [0-9]{2,4}$`)}, {ebnf, regexp.MustCompile(`^\([a-c]{1,2}(,[a-c]{1,2}){0,2}\)$`)}} {
		out := collect(t, Text("Answer: "), &Sampling{Temperature: 1, Seed: Ptr(uint64(9)), MaxTokens: 64, N: 2, Grammar: c.g})
		for _, o := range out {
			if o.FinishReason != FinishStop || !c.want.MatchString(o.Text) {
				t.Errorf("%q (%v) does not match %v", o.Text, o.FinishReason, c.want)
			}
		}
	}
	re.Close()
	ebnf.Close()
}

func TestMatcherOnTokenizer(t *testing.T) {
	tok, err := NewTokenizer(modelDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	vocab, err := tok.VocabSize()
	if err != nil || vocab != 4096 {
		t.Fatalf("vocab %d, %v", vocab, err)
	}
	g, err := tok.CompileGrammar(0, []int32{1}, GrammarRegex, `ab+`, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	m, err := g.NewMatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if end, _ := m.CanEnd(); end {
		t.Error("an empty output matches ab+")
	}
	if err := m.AcceptString("ab"); err != nil {
		t.Fatal(err)
	}
	mask, err := m.Mask()
	if err != nil || len(mask) != (vocab+31)/32 || mask[0]&(1<<1) == 0 {
		t.Errorf("mask %d words (%v), EOS allowed: %v", len(mask), err, len(mask) > 0 && mask[0]&2 != 0)
	}
	if end, _ := m.CanEnd(); !end {
		t.Error("ab cannot end")
	}
	if err := m.AcceptToken(1); err != nil {
		t.Fatal(err)
	}
	if done, _ := m.Terminated(); !done {
		t.Error("not terminated after EOS")
	}
	if err := m.Rollback(1); err != nil {
		t.Fatal(err)
	}
	if done, _ := m.Terminated(); done {
		t.Error("terminated after rolling EOS back")
	}
	if err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	if end, _ := m.CanEnd(); end {
		t.Error("can end after Reset")
	}
}

func TestTokenizerMatchesEngine(t *testing.T) {
	tok, err := NewTokenizer(modelDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tok.Close()
	et, err := shared.Tokenizer()
	if err != nil {
		t.Fatal(err)
	}
	defer et.Close()
	text := "Hello <｜User｜> wörld 123"
	for _, flags := range []TextFlags{TextPlain, TextSpecial} {
		a, err1 := tok.Encode(text, flags)
		b, err2 := shared.Tokenize(text, flags)
		c, err3 := et.Encode(text, flags)
		if err1 != nil || err2 != nil || err3 != nil || !reflect.DeepEqual(a, b) || !reflect.DeepEqual(a, c) {
			t.Fatalf("flags %d: %v %v %v (%v %v %v)", flags, a, b, c, err1, err2, err3)
		}
		back, err := tok.Decode(a, 0)
		if err != nil || back != text {
			t.Errorf("flags %d: decodes to %q (%v)", flags, back, err)
		}
	}
	plain, _ := tok.Encode(text, TextPlain)
	special, _ := tok.Encode(text, TextSpecial)
	if len(special) >= len(plain) {
		t.Errorf("the control token was not recognised: %v vs %v", special, plain)
	}
	skipped, _ := tok.Decode(special, DetokSkipSpecial)
	if skipped == text {
		t.Errorf("DetokSkipSpecial kept the control token: %q", skipped)
	}
	if ids, err := tok.Encode("", TextPlain); err != nil || len(ids) != 0 {
		t.Errorf("empty text: %v %v", ids, err)
	}
}

func TestInfoAndStats(t *testing.T) {
	info, err := shared.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Device != DeviceCPU || !info.HasTokenizer || info.VocabSize != 4096 || info.Layers != 6 ||
		info.HiddenSize != 256 || info.MaxPosition != 2048 || !reflect.DeepEqual(info.EOSTokens, []int32{1}) ||
		info.Parameters == 0 || info.WeightDType == "" || info.CapacityTokens == 0 {
		t.Errorf("%+v", info)
	}
	if n, err := shared.ModelInfo(ModelVocabSize); err != nil || n != 4096 {
		t.Errorf("ModelVocabSize %d %v", n, err)
	}
	before, err := shared.Stats()
	if err != nil {
		t.Fatal(err)
	}
	collect(t, Text("count me"), &Sampling{MaxTokens: 5, IgnoreEOS: true})
	after, err := shared.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after.GeneratedTokens < before.GeneratedTokens+5 || after.Steps <= before.Steps ||
		after.PromptTokens <= before.PromptTokens || after.StateBytesTotal == 0 {
		t.Errorf("before %+v\nafter %+v", before, after)
	}
}

func TestSamplingRoundTrip(t *testing.T) {
	defaults, err := shared.SamplingDefaults()
	if err != nil {
		t.Fatal(err)
	}
	// The demo's generation_config.json.
	if defaults.Temperature != 0.8 || defaults.TopP != 0.95 || defaults.MaxTokens != 128 || defaults.N != 1 ||
		defaults.Seed != nil || defaults.Logprobs || defaults.KeepSpecialTokens {
		t.Errorf("defaults %+v", defaults)
	}
	g, err := shared.CompileGrammar(GrammarRegex, `[a-z]+`, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	all := Sampling{
		Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.1, PresencePenalty: 0.5,
		FrequencyPenalty: -0.5, MaxTokens: 77, MinTokens: 3, N: 4, Seed: Ptr(uint64(99)), FirstCompletion: 8,
		IgnoreEOS: true, Logprobs: true, TopLogprobs: 5, PromptLogprobs: true, PromptTopLogprobs: 2,
		LogitBias: map[int32]float32{5: 1.5, 9: -2}, AllowedTokens: []int32{5, 9, 11}, StopTokens: []int32{7},
		StopStrings: []string{"END", "\n\n"}, IncludeStopString: true, KeepSpecialTokens: true, Grammar: g,
	}
	back, err := shared.ResolveSampling(&all)
	if err != nil {
		t.Fatal(err)
	}
	if back.Grammar == nil {
		t.Fatal("the grammar did not come back")
	}
	back.Grammar.Close()
	back.Grammar = g
	if !reflect.DeepEqual(back, all) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back, all)
	}
	// Zero fields where zero is out of range stand for the library's defaults.
	zero, err := shared.ResolveSampling(&Sampling{})
	if err != nil || zero.Temperature != 0 || zero.TopP != 1 || zero.MaxTokens != 256 || zero.N != 1 ||
		zero.RepetitionPenalty != 1 || zero.Logprobs {
		t.Errorf("the zero Sampling: %+v %v", zero, err)
	}
}

func TestNilSamplingUsesModelDefaults(t *testing.T) {
	// The model's defaults sample at temperature 0.8: two seeded runs agree, and a nil Sampling
	// gives what SamplingDefaults gives.
	d, _ := shared.SamplingDefaults()
	d.MaxTokens = 128
	st, err := shared.Generate(context.Background(), Text("defaults"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.Collect()
	if err != nil || len(c) != 1 || c[0].Usage.CompletionTokens == 0 || c[0].Usage.CompletionTokens > 128 {
		t.Fatalf("%+v %v", c, err)
	}
	d.Seed = Ptr(c[0].Seed)
	again := collect(t, Text("defaults"), &d)
	if !reflect.DeepEqual(again[0].Tokens, c[0].Tokens) {
		t.Errorf("SamplingDefaults with the seed used: %v, nil Sampling: %v", again[0].Tokens, c[0].Tokens)
	}
}

func TestResolveSamplingRejects(t *testing.T) {
	_, err := shared.ResolveSampling(&Sampling{TopK: -7})
	expectErr(t, "top_k", err, ErrInvalidArgument, "top_k")
}
