package deepinfer

// #include "helpers.h"
import "C"

import (
	"errors"
	"fmt"
)

// Code is the library's error code (di_code). Newer libraries may return codes this package does
// not name; they still make an *Error, whose Unwrap is then nil.
type Code int32

// The codes of deepinfer.h.
const (
	CodeInvalidArgument Code = 1
	CodeNotFound        Code = 2
	CodeModelFormat     Code = 3
	CodeUnsupported     Code = 4
	CodeOutOfMemory     Code = 5
	CodeCapacity        Code = 6
	CodeBufferTooSmall  Code = 7
	CodeCancelled       Code = 8
	CodeGrammar         Code = 9
	CodeIO              Code = 10
	CodeBackend         Code = 11
	CodeState           Code = 12
	CodeTimeout         Code = 13
	CodeClosed          Code = 14
	CodeInvalidHandle   Code = 15
	CodeInternal        Code = 100
)

// String is the library's short name of the code ("invalid argument"; "unknown" for a code the
// library does not know either).
func (c Code) String() string { return C.GoString(C.di_code_name(C.di_code(c))) }

// Sentinel errors, one per code: every *Error unwraps to the one of its code, so
// errors.Is(err, ErrNotFound) tells what happened while err.Error() keeps the library's message.
var (
	ErrInvalidArgument = errors.New("deepinfer: invalid argument")
	ErrNotFound        = errors.New("deepinfer: not found")
	ErrModelFormat     = errors.New("deepinfer: model format")
	ErrUnsupported     = errors.New("deepinfer: unsupported")
	ErrOutOfMemory     = errors.New("deepinfer: out of memory")
	ErrCapacity        = errors.New("deepinfer: capacity")
	ErrBufferTooSmall  = errors.New("deepinfer: buffer too small")
	ErrCancelled       = errors.New("deepinfer: cancelled")
	ErrGrammar         = errors.New("deepinfer: grammar")
	ErrIO              = errors.New("deepinfer: i/o")
	ErrBackend         = errors.New("deepinfer: backend")
	ErrState           = errors.New("deepinfer: state")
	ErrTimeout         = errors.New("deepinfer: timeout")
	// ErrClosed: the object, or the engine behind it, was closed.
	ErrClosed        = errors.New("deepinfer: closed")
	ErrInvalidHandle = errors.New("deepinfer: invalid handle")
	ErrInternal      = errors.New("deepinfer: internal error")
)

var sentinels = map[Code]error{
	CodeInvalidArgument: ErrInvalidArgument,
	CodeNotFound:        ErrNotFound,
	CodeModelFormat:     ErrModelFormat,
	CodeUnsupported:     ErrUnsupported,
	CodeOutOfMemory:     ErrOutOfMemory,
	CodeCapacity:        ErrCapacity,
	CodeBufferTooSmall:  ErrBufferTooSmall,
	CodeCancelled:       ErrCancelled,
	CodeGrammar:         ErrGrammar,
	CodeIO:              ErrIO,
	CodeBackend:         ErrBackend,
	CodeState:           ErrState,
	CodeTimeout:         ErrTimeout,
	CodeClosed:          ErrClosed,
	CodeInvalidHandle:   ErrInvalidHandle,
	CodeInternal:        ErrInternal,
}

// Error is a failure reported by the library (or by this package, with the code that fits).
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("deepinfer: %s: %s", e.Code, e.Message) }

// Unwrap returns the sentinel of the error's code (nil for a code this package does not know).
func (e *Error) Unwrap() error { return sentinels[e.Code] }

// check turns a di_error into an *Error and frees it.
func check(err *C.di_error) error {
	if err == nil {
		return nil
	}
	e := &Error{Code: Code(C.di_error_code(err)), Message: C.GoString(C.di_error_message(err))}
	C.di_error_free(err)
	return e
}

// newError makes an *Error on the Go side.
func newError(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func closedError(what string) error { return newError(CodeClosed, "the %s is closed", what) }
