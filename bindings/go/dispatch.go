package deepinfer

// #include <stdlib.h>
// #include "helpers.h"
import "C"

import (
	"os"
	"sync"
	"syscall"
	"unsafe"
)

// dispatcher routes the events of all of an engine's generations. Every session delivers to the
// engine's one completion queue, tagged with its current generation; one goroutine waits for the
// queue's descriptor through the runtime's network poller (so no OS thread is blocked, however
// many streams are open), drains the queue and hands each event to its generation's pipe.
//
// It holds no reference to the Engine, so an engine nobody uses can be finalized while it runs.
type dispatcher struct {
	q      *C.di_queue
	file   *os.File // a duplicate of the queue's eventfd, registered with the poller
	buf    *C.digo_event
	bufLen int
	exited chan struct{}

	mu       sync.Mutex
	gens     map[uint64]*generation
	lastTag  uint64
	stopping bool

	drainMu sync.Mutex // one drain at a time, so events of a generation stay in order
}

const drainBatch = 64

func newDispatcher() (*dispatcher, error) {
	var q *C.di_queue
	if err := check(C.di_queue_create(&q)); err != nil {
		return nil, err
	}
	file, err := queueFile(q)
	if err != nil {
		C.di_queue_free(q)
		return nil, err
	}
	d := &dispatcher{
		q:      q,
		file:   file,
		buf:    (*C.digo_event)(C.calloc(drainBatch, C.sizeof_digo_event)),
		bufLen: drainBatch,
		exited: make(chan struct{}),
		gens:   make(map[uint64]*generation),
	}
	if d.buf == nil {
		file.Close()
		C.di_queue_free(q)
		return nil, newError(CodeOutOfMemory, "no memory for the event buffer")
	}
	go d.run()
	return d, nil
}

// queueFile duplicates the queue's descriptor (the queue owns its own) into an *os.File that the
// poller watches. The eventfd is non-blocking, which os.NewFile needs to use the poller.
func queueFile(q *C.di_queue) (*os.File, error) {
	var fd C.int32_t
	if err := check(C.di_queue_fd(q, &fd)); err != nil {
		return nil, err
	}
	dup, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if errno != 0 {
		return nil, newError(CodeIO, "cannot duplicate the completion queue's descriptor: %v", errno)
	}
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, dup, syscall.F_GETFL, 0)
	if errno != 0 || flags&syscall.O_NONBLOCK == 0 {
		syscall.Close(int(dup))
		return nil, newError(CodeUnsupported, "the completion queue's descriptor is not non-blocking")
	}
	return os.NewFile(dup, "deepinfer-queue"), nil
}

func (d *dispatcher) run() {
	defer close(d.exited)
	rc, err := d.file.SyscallConn()
	if err != nil {
		return
	}
	// Read calls the function, then waits for readability whenever it returns false; it returns
	// when the file is closed (stop).
	_ = rc.Read(func(uintptr) bool { return !d.drain() })
}

// drain hands every queued event to its generation; false when the queue is gone.
func (d *dispatcher) drain() bool {
	d.drainMu.Lock()
	defer d.drainMu.Unlock()
	type routed struct {
		tag  uint64
		kind EventKind
		ev   Event
		err  error
	}
	events := unsafe.Slice(d.buf, d.bufLen)
	for {
		var cerr *C.di_error
		n := int(C.digo_queue_drain(d.q, d.buf, C.size_t(d.bufLen), &cerr))
		batch := make([]routed, n)
		for i := 0; i < n; i++ {
			ev, err := eventFromC(&events[i])
			batch[i] = routed{tag: uint64(events[i].tag), kind: EventKind(events[i].kind), ev: ev, err: err}
		}
		C.digo_events_free(d.buf, C.size_t(n))
		for _, r := range batch {
			d.dispatch(r.tag, r.kind, r.ev, r.err)
		}
		if cerr != nil {
			C.di_error_free(cerr) // the queue was freed (or this is a fork's child)
			return false
		}
		if n < d.bufLen {
			return true
		}
	}
}

func (d *dispatcher) dispatch(tag uint64, kind EventKind, ev Event, err error) {
	done := kind == eventDone
	d.mu.Lock()
	g := d.gens[tag]
	if done {
		delete(d.gens, tag)
	}
	d.mu.Unlock()
	switch {
	case g == nil: // a generation closed by its reader
	case err != nil:
		g.fail(err)
	case done:
		g.finish(true)
	case kind == EventTokens || kind == EventFinished || kind == EventPromptLogprobs:
		if ev.FinishReason == FinishCancelled {
			g.sawCancel = true
		}
		g.out.push(item{index: g.index, ev: ev})
	}
}

// register gives g a tag and routes the tag's events to it.
func (d *dispatcher) register(g *generation) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopping {
		return closedError("engine")
	}
	d.lastTag++
	g.tag = d.lastTag
	d.gens[g.tag] = g
	return nil
}

func (d *dispatcher) unregister(g *generation) {
	d.mu.Lock()
	delete(d.gens, g.tag)
	d.mu.Unlock()
}

// cancelAll records why every running generation is about to end (the engine closes).
func (d *dispatcher) cancelAll(cause error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, g := range d.gens {
		g.setCause(cause)
	}
}

// stop runs after di_engine_free, which queued the last events of every generation: it stops the
// waiter, delivers those events, ends whatever is left and frees the queue.
func (d *dispatcher) stop() {
	d.mu.Lock()
	d.stopping = true
	d.mu.Unlock()
	d.file.Close()
	<-d.exited
	d.drain()
	d.mu.Lock()
	rest := d.gens
	d.gens = nil
	d.mu.Unlock()
	for _, g := range rest {
		g.setCause(closedError("engine"))
		g.finish(false)
	}
	C.di_queue_free(d.q)
	C.free(unsafe.Pointer(d.buf))
	d.buf = nil
}
