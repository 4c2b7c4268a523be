package deepinfer

// #include "helpers.h"
import "C"

import (
	"context"
	"strconv"
)

// Device is where an engine runs.
type Device int32

// Devices.
const (
	DeviceAuto Device = 0 // CUDA where its module, a driver and a GPU are present, else CPU
	DeviceCPU  Device = 1
	DeviceCUDA Device = 2
)

func (d Device) String() string {
	switch d {
	case DeviceAuto:
		return "auto"
	case DeviceCPU:
		return "cpu"
	case DeviceCUDA:
		return "cuda"
	}
	return "device(" + strconv.Itoa(int(d)) + ")"
}

// An Option configures Open. Options apply in order; each is checked by the library, so a bad
// value makes Open fail with ErrInvalidArgument naming it.
type Option func(*openConfig) error

type openConfig struct {
	cfg      *C.di_engine_config
	ctx      context.Context
	progress func(done, total uint64) bool
}

// WithDevice picks the device (default DeviceAuto).
func WithDevice(d Device) Option {
	return func(o *openConfig) error { return check(C.di_engine_config_set_device(o.cfg, C.di_device(d))) }
}

// WithThreads sets the CPU worker threads (0: one per core).
func WithThreads(n int) Option {
	return func(o *openConfig) error { return check(C.di_engine_config_set_threads(o.cfg, C.int32_t(n))) }
}

// WithMaxSequences sets how many sequences the engine keeps state for at once (default 64).
func WithMaxSequences(n int) Option {
	return func(o *openConfig) error { return check(C.di_engine_config_set_max_sequences(o.cfg, C.int32_t(n))) }
}

// WithMaxContext sets the longest context of one sequence in tokens (0: the model's maximum).
func WithMaxContext(tokens int64) Option {
	return func(o *openConfig) error { return check(C.di_engine_config_set_max_context(o.cfg, C.int64_t(tokens))) }
}

// WithStateMemory sets the bytes of the shared state pool (0: automatic).
func WithStateMemory(bytes uint64) Option {
	return func(o *openConfig) error { return check(C.di_engine_config_set_state_memory(o.cfg, C.uint64_t(bytes))) }
}

// WithStateMemoryFraction sets the share of free GPU memory that automatic state memory takes.
func WithStateMemoryFraction(f float64) Option {
	return func(o *openConfig) error {
		return check(C.di_engine_config_set_state_memory_fraction(o.cfg, C.double(f)))
	}
}

// WithMaxBatchedTokens sets the tokens processed per engine step.
func WithMaxBatchedTokens(n int) Option {
	return func(o *openConfig) error {
		return check(C.di_engine_config_set_max_batched_tokens(o.cfg, C.int32_t(n)))
	}
}

// WithSeed seeds the engine's own generator, from which generations without a seed draw theirs.
func WithSeed(seed uint64) Option {
	return func(o *openConfig) error { return check(C.di_engine_config_set_seed(o.cfg, C.uint64_t(seed))) }
}

// WithOption sets a named engine or backend setting (`deepinfer options` lists them).
func WithOption(key, value string) Option {
	return func(o *openConfig) error {
		k, kn := cstr(key)
		v, vn := cstr(value)
		return check(C.di_engine_config_set_option(o.cfg, k, kn, v, vn))
	}
}

// WithProgress calls fn as the weights load, with the bytes loaded so far and in all (total may be
// 0 while unknown); fn returning false aborts the load and Open fails with ErrCancelled. fn runs on
// the goroutine calling Open.
func WithProgress(fn func(done, total uint64) bool) Option {
	return func(o *openConfig) error {
		o.progress = fn
		return nil
	}
}

// WithContext lets ctx abort the load: Open then fails with ErrCancelled (and ctx.Err() in the
// chain). The context does not outlive Open.
func WithContext(ctx context.Context) Option {
	return func(o *openConfig) error {
		o.ctx = ctx
		return nil
	}
}
