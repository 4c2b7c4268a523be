// Command openai-server serves a DeepInfer model over OpenAI's HTTP API: /v1/models,
// /v1/completions and /v1/chat/completions, with streaming (server-sent events), sampling
// parameters, JSON Schema response formats enforced by a grammar, and tool calls. Every request
// shares one engine, which batches them; a client that disconnects cancels its generation.
//
//	openai-server -model /path/to/model -addr 127.0.0.1:8000
//
// Any OpenAI client then works against http://127.0.0.1:8000/v1 (the API key is not checked).
// GET /metrics shows the engine's counters in Prometheus' text format.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	deepinfer "github.com/deepinfer/deepinfer/bindings/go"
)

func main() {
	model := flag.String("model", "", "model directory (config.json, *.safetensors, tokenizer.json)")
	addr := flag.String("addr", "127.0.0.1:8000", "address to listen on")
	name := flag.String("served-model-name", "", "the model's name in the API (default: the directory's name)")
	device := flag.String("device", "auto", "auto, cpu or cuda")
	threads := flag.Int("threads", 0, "CPU worker threads (0: one per core)")
	maxSeqs := flag.Int("max-sequences", 64, "sequences the engine runs at once")
	flag.Parse()
	if *model == "" {
		log.Fatal("give -model: the model directory")
	}
	if *name == "" {
		*name = filepath.Base(filepath.Clean(*model))
	}
	deepinfer.SetLogFunc(func(level deepinfer.LogLevel, msg string) { log.Printf("deepinfer: %s", msg) })

	dev, ok := map[string]deepinfer.Device{"auto": deepinfer.DeviceAuto, "cpu": deepinfer.DeviceCPU, "cuda": deepinfer.DeviceCUDA}[*device]
	if !ok {
		log.Fatalf("-device %q is not auto, cpu or cuda", *device)
	}
	eng, err := deepinfer.Open(*model, deepinfer.WithDevice(dev), deepinfer.WithThreads(*threads),
		deepinfer.WithMaxSequences(*maxSeqs))
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	srv, err := newServer(eng, *name)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	httpServer := &http.Server{Handler: srv.routes(), ReadHeaderTimeout: 30 * time.Second}
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		httpServer.Shutdown(ctx)
	}()
	log.Printf("serving %s as %q on http://%s/v1", *model, *name, ln.Addr())
	if err := httpServer.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
