package deepinfer

// #include "helpers.h"
import "C"

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
)

// Generate runs one generation in a session of its own, released when the generation ends or the
// stream is closed: the one-shot form of Session.Generate.
func (e *Engine) Generate(ctx context.Context, prompt Input, sampling *Sampling) (*Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := e.NewSession()
	if err != nil {
		return nil, err
	}
	if err := s.lock(); err != nil {
		s.Close()
		return nil, err
	}
	g := newGeneration(s, true, newPipe(1), 0)
	err = s.start(ctx, g, prompt, sampling, nil)
	s.mu.Unlock()
	if err != nil {
		s.Close()
		return nil, err
	}
	return newStream(g), nil
}

// BatchEvent is an event of one prompt of a batch.
type BatchEvent struct {
	Prompt int // index into the prompts given to GenerateBatch
	Event
}

// Batch is the output of GenerateBatch: the events of every prompt, each prompt's in order.
type Batch struct {
	out       *pipe
	gens      []*generation
	closeOnce sync.Once
}

// GenerateBatch starts one generation per prompt, all with the same parameters (nil: the model's
// defaults), each in a session of its own. The engine batches them; their events come through
// the engine's one completion queue, so no thread waits per prompt. When ctx ends first, every
// generation is cancelled.
func (e *Engine) GenerateBatch(ctx context.Context, prompts []Input, sampling *Sampling) (*Batch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := e.alive(); err != nil {
		return nil, err
	}
	if len(prompts) == 0 {
		return nil, newError(CodeInvalidArgument, "a batch needs at least one prompt")
	}
	sp, err := cSampling(e, sampling)
	if err != nil {
		return nil, err
	}
	defer C.di_sampling_free(sp)
	b := &Batch{out: newPipe(len(prompts))}
	for i, prompt := range prompts {
		g, err := e.startOne(ctx, b.out, i, prompt, sp)
		if err != nil {
			b.Close()
			return nil, err
		}
		b.gens = append(b.gens, g)
	}
	runtime.SetFinalizer(b, (*Batch).Close)
	return b, nil
}

func (e *Engine) startOne(ctx context.Context, out *pipe, index int, prompt Input, sp *C.di_sampling) (*generation, error) {
	s, err := e.NewSession()
	if err != nil {
		return nil, err
	}
	if err := s.lock(); err != nil {
		s.Close()
		return nil, err
	}
	g := newGeneration(s, true, out, index)
	err = s.start(ctx, g, prompt, nil, sp)
	s.mu.Unlock()
	if err != nil {
		s.Close()
		return nil, err
	}
	return g, nil
}

// Next returns the next event of any prompt; io.EOF once every generation ended and every event
// was read (the context's error instead when a context ended them; ErrClosed after Close).
func (b *Batch) Next() (BatchEvent, error) {
	it, err := b.out.next()
	return BatchEvent{Prompt: it.index, Event: it.ev}, err
}

// Collect reads the batch to its end and gathers each prompt's completions.
func (b *Batch) Collect() ([][]Completion, error) {
	out := make([][]Completion, len(b.gens))
	for {
		ev, err := b.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil
			}
			return out, err
		}
		out[ev.Prompt] = gather(out[ev.Prompt], ev.Event)
	}
}

// Cancel ends every generation early (their completions finish with FinishCancelled).
func (b *Batch) Cancel() error {
	for _, g := range b.gens {
		g.cancel(nil)
	}
	return nil
}

// Close cancels what still runs, releases the sessions and drops unread events: Next returns
// ErrClosed. Idempotent and safe from any goroutine.
func (b *Batch) Close() error {
	b.closeOnce.Do(func() {
		b.out.close(closedError("batch"))
		for _, g := range b.gens {
			g.cancel(closedError("batch"))
		}
		runtime.SetFinalizer(b, nil)
	})
	return nil
}
