package deepinfer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"time"

	deepinfer "github.com/deepinfer/deepinfer/bindings/go"
)

// The examples run on the demo model of the DeepInfer repository (DEEPINFER_MODEL names its
// directory), a tiny model whose output reads like noise, on the CPU: the reference backend, whose
// outputs the examples show (a GPU's may differ in the last bits of the logits).

func Example() {
	eng, err := deepinfer.Open(os.Getenv("DEEPINFER_MODEL"), deepinfer.WithDevice(deepinfer.DeviceCPU))
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	// Greedy decoding (the zero Sampling), at most 12 tokens.
	st, err := eng.Generate(context.Background(), deepinfer.Text("Hello, world"), &deepinfer.Sampling{MaxTokens: 12})
	if err != nil {
		log.Fatal(err)
	}
	out, err := st.Collect()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q (%v after %d tokens)\n", out[0].Text, out[0].FinishReason, out[0].Usage.CompletionTokens)
	// Output: "_size, world_size, world_size," (length after 12 tokens)
}

func ExampleSession_Generate() {
	eng, err := deepinfer.Open(os.Getenv("DEEPINFER_MODEL"), deepinfer.WithDevice(deepinfer.DeviceCPU))
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	sess, err := eng.NewSession()
	if err != nil {
		log.Fatal(err)
	}
	defer sess.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	chat := deepinfer.Messages{
		{Role: deepinfer.RoleSystem, Content: "You are terse."},
		{Role: deepinfer.RoleUser, Content: "Name a colour."},
	}
	st, err := sess.Generate(ctx, chat, &deepinfer.Sampling{MaxTokens: 8})
	if err != nil {
		log.Fatal(err)
	}
	// Events arrive as the engine produces them.
	for {
		ev, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		switch ev.Kind {
		case deepinfer.EventTokens:
			fmt.Printf("%q ", ev.Text)
		case deepinfer.EventFinished:
			fmt.Printf("[%v]\n", ev.FinishReason)
		}
	}
	// The reply joined the session's context: the next turn continues the conversation.
	st, err = sess.Generate(ctx, deepinfer.Messages{{Role: deepinfer.RoleUser, Content: "Another."}},
		&deepinfer.Sampling{MaxTokens: 8})
	if err != nil {
		log.Fatal(err)
	}
	out, err := st.Collect()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("second turn: %q, %d of %d prompt tokens reused\n", out[0].Text, out[0].Usage.CachedTokens,
		out[0].Usage.PromptTokens)
	// Output:
	// "\n" "#" " L" "IC" "ENSE" " file" " in" " the" [length]
	// second turn: " Authors.\n#\n# Licensed under", 23 of 30 prompt tokens reused
}

func ExampleEngine_GenerateBatch() {
	eng, err := deepinfer.Open(os.Getenv("DEEPINFER_MODEL"), deepinfer.WithDevice(deepinfer.DeviceCPU))
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	prompts := []deepinfer.Input{deepinfer.Text("One"), deepinfer.Text("Two"), deepinfer.Text("Three")}
	// Seeded sampling repeats exactly, however the engine batches the prompts.
	b, err := eng.GenerateBatch(context.Background(), prompts,
		&deepinfer.Sampling{Temperature: 0.8, MaxTokens: 6, N: 2, Seed: deepinfer.Ptr(uint64(42))})
	if err != nil {
		log.Fatal(err)
	}
	results, err := b.Collect()
	if err != nil {
		log.Fatal(err)
	}
	for i, completions := range results {
		for j, c := range completions {
			fmt.Printf("prompt %d, completion %d: %q\n", i, j, c.Text)
		}
	}
	// Output:
	// prompt 0, completion 0: "missionError:\n        if"
	// prompt 0, completion 1: "Form1TZ1"
	// prompt 1, completion 0: ",\n                                       no cost"
	// prompt 1, completion 1: "SiTienta"
	// prompt 2, completion 0: "\nimport warnings\nfrom ."
	// prompt 2, completion 1: "Lauzing."
}

func ExampleEngine_CompileGrammar() {
	eng, err := deepinfer.Open(os.Getenv("DEEPINFER_MODEL"), deepinfer.WithDevice(deepinfer.DeviceCPU))
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	schema := `{"type": "object", "properties": {"city": {"type": "string", "maxLength": 10},
		"sunny": {"type": "boolean"}}, "required": ["city", "sunny"], "additionalProperties": false}`
	g, err := eng.CompileGrammar(deepinfer.GrammarJSONSchema, schema, &deepinfer.GrammarOptions{CompactWhitespace: true})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close()
	st, err := eng.Generate(context.Background(), deepinfer.Text("Weather report as JSON: "),
		&deepinfer.Sampling{Temperature: 1, Seed: deepinfer.Ptr(uint64(7)), MaxTokens: 200, Grammar: g})
	if err != nil {
		log.Fatal(err)
	}
	out, err := st.Collect()
	if err != nil {
		log.Fatal(err)
	}
	var report struct {
		City  string `json:"city"`
		Sunny bool   `json:"sunny"`
	}
	if err := json.Unmarshal([]byte(out[0].Text), &report); err != nil {
		log.Fatal(err)
	}
	// Any JSON spelling of a string is allowed, \u escapes included (the small demo model likes
	// them); decoding gives the values.
	fmt.Println(out[0].Text)
	fmt.Printf("%+v\n", report)
	// Output:
	// {"\u0063\u0069\u0074\u0079":"\u1b290\u00ea86\u0BAAA","\u0073\u0075\u006e\u006e\u0079":true}
	// {City:ᬩ0ê86பA Sunny:true}
}

func ExampleStream_Next_cancel() {
	eng, err := deepinfer.Open(os.Getenv("DEEPINFER_MODEL"), deepinfer.WithDevice(deepinfer.DeviceCPU))
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()

	// A context that ends cancels the generation: its completion finishes cancelled and Next
	// returns the context's error.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	st, err := eng.Generate(ctx, deepinfer.Text("Tell me everything"),
		&deepinfer.Sampling{MaxTokens: 2000, IgnoreEOS: true})
	if err != nil {
		log.Fatal(err)
	}
	for {
		ev, err := st.Next()
		if err != nil {
			fmt.Println("end:", err)
			break
		}
		if ev.Kind == deepinfer.EventFinished {
			fmt.Println("finish:", ev.FinishReason)
		}
	}
	// Output:
	// finish: cancelled
	// end: context deadline exceeded
}

func ExampleOpen() {
	eng, err := deepinfer.Open(os.Getenv("DEEPINFER_MODEL"),
		deepinfer.WithDevice(deepinfer.DeviceCPU),
		deepinfer.WithMaxSequences(16),
		deepinfer.WithProgress(func(done, total uint64) bool { return true }))
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	info, err := eng.Info()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d layers, vocabulary %d, context %d, on %v\n", info.Layers, info.VocabSize, info.MaxContext, info.Device)

	_, err = deepinfer.Open("/no/such/model")
	fmt.Println(errors.Is(err, deepinfer.ErrNotFound))
	// Output:
	// 6 layers, vocabulary 4096, context 2048, on cpu
	// true
}
