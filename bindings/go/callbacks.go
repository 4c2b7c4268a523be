package deepinfer

// #include "helpers.h"
import "C"

import (
	"runtime/cgo"
	"sync"
	"sync/atomic"
)

// The Go ends of the library's callbacks (trampolines in helpers.c). A file with //export may
// only declare C, so this one defines nothing in its preamble.

//export digoProgress
func digoProgress(handle C.uintptr_t, done, total C.uint64_t) C.int32_t {
	o := cgo.Handle(handle).Value().(*openConfig)
	if o.report(uint64(done), uint64(total)) {
		return 0
	}
	return 1
}

// LogLevel is the severity of a library log message.
type LogLevel int32

// Log levels.
const (
	LogDebug LogLevel = 0
	LogInfo  LogLevel = 1
	LogWarn  LogLevel = 2
	LogError LogLevel = 3
	LogOff   LogLevel = 4
)

// SetLogLevel drops library messages below level (default LogWarn). The setting is process-wide.
func SetLogLevel(level LogLevel) error {
	if versionErr != nil {
		return versionErr
	}
	return check(C.di_set_log_level(C.di_log_level(level)))
}

var (
	logMu sync.Mutex // serialises SetLogFunc
	// logFn is read by the callback without a lock: SetLogFunc holds logMu while the library waits
	// for a callback in progress, which must not wait for logMu in turn.
	logFn atomic.Pointer[func(LogLevel, string)]
)

// SetLogFunc sends library log messages to fn instead of stderr (nil restores stderr). fn is
// called from the library's threads, one message at a time; it must not call SetLogFunc. Once
// SetLogFunc returns, the previous fn is not called again. The setting is process-wide.
func SetLogFunc(fn func(level LogLevel, message string)) {
	if versionErr != nil {
		return
	}
	logMu.Lock()
	defer logMu.Unlock()
	// Once the callback is off, none is running: fn changes while no message can see it.
	C.digo_set_log_callback(0)
	if fn == nil {
		logFn.Store(nil)
		return
	}
	logFn.Store(&fn)
	C.digo_set_log_callback(1)
}

//export digoLog
func digoLog(level C.int32_t, message *C.char, n C.size_t) {
	if fn := logFn.Load(); fn != nil {
		(*fn)(LogLevel(level), C.GoStringN(message, C.int(n)))
	}
}
