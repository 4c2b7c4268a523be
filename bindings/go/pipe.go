package deepinfer

import (
	"io"
	"sync"
)

// item is an event on its way to a reader, with the index of the prompt it belongs to.
type item struct {
	index int
	ev    Event
}

// pipe carries events from the dispatcher to a reader. It never blocks the dispatcher (a slow
// reader must not stall the other streams of the engine), so it buffers without bound; a
// generation's max_tokens bounds it. One or more producers (the generations of a batch) end it.
type pipe struct {
	mu     sync.Mutex
	items  []item
	open   int   // producers not ended yet
	err    error // what next returns once the items are read: io.EOF or the first cause
	ended  bool  // every producer ended
	closed bool  // the reader closed it: next returns err at once
	wake   chan struct{}
	done   chan struct{} // closed when ended or closed
}

func newPipe(producers int) *pipe {
	return &pipe{open: producers, err: io.EOF, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (p *pipe) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *pipe) push(it item) {
	p.mu.Lock()
	if p.closed || p.ended {
		p.mu.Unlock()
		return
	}
	p.items = append(p.items, it)
	p.mu.Unlock()
	p.signal()
}

// end ends one producer; cause nil means a normal end. The first cause is what the reader sees
// after the last item.
func (p *pipe) end(cause error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ended {
		return
	}
	if cause != nil && p.err == io.EOF {
		p.err = cause
	}
	if p.open--; p.open <= 0 {
		p.ended = true
		if !p.closed {
			close(p.done)
		}
	}
}

// close is the reader's side: pending and later next calls return err, items are dropped.
func (p *pipe) close(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	p.items = nil
	if !p.ended {
		p.err = err
		close(p.done)
	} else if p.err == io.EOF {
		p.err = err
	}
}

func (p *pipe) next() (item, error) {
	for {
		p.mu.Lock()
		if !p.closed && len(p.items) > 0 {
			it := p.items[0]
			p.items[0] = item{}
			p.items = p.items[1:]
			more := len(p.items) > 0
			if !more {
				p.items = nil
			}
			p.mu.Unlock()
			if more { // another reader may be waiting
				p.signal()
			}
			return it, nil
		}
		if p.closed || p.ended {
			err := p.err
			p.mu.Unlock()
			return item{}, err
		}
		p.mu.Unlock()
		select {
		case <-p.wake:
		case <-p.done:
		}
	}
}
