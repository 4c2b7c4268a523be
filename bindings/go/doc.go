// Package deepinfer runs DeepSeek-V4-family models in process through libdeepinfer, DeepInfer's
// C library.
//
// Open loads a model directory into an Engine, which batches every running generation
// continuously. A Session holds a context (text, token ids or chat messages) whose model state
// persists between its generations; Engine.Generate is the one-shot form and
// Engine.GenerateBatch starts many at once. Each generation's output is a Stream of Events: new
// tokens with their text, one EventFinished per completion, then io.EOF. A context passed to a
// generation cancels it when it ends. Sampling holds the parameters as plain fields; a Grammar
// (regular expression, JSON Schema or EBNF) constrains the output.
//
// All streams of an engine share one completion queue of the library, waited for by one
// goroutine through the runtime's network poller: thousands of open streams block no OS thread.
//
// Every type has an idempotent Close that is safe from any goroutine; closing a Stream, its
// Session or the Engine unblocks a pending Next, which then returns ErrClosed. Finalizers are a
// safety net only. Errors from the library are *Error values carrying its code and message; each
// unwraps to a sentinel such as ErrInvalidArgument or ErrNotFound for errors.Is.
//
// # Getting the package
//
// The module lives in the DeepInfer repository under bindings/go:
//
//	go get github.com/deepinfer/deepinfer/bindings/go@latest
//
// (releases are tagged bindings/go/vX.Y.Z; the package's version is the library's). With a
// checkout or a vendored copy instead, point go.mod at it:
//
//	require github.com/deepinfer/deepinfer/bindings/go v0.2.0
//	replace github.com/deepinfer/deepinfer/bindings/go => ../deepinfer/bindings/go
//
// The package needs cgo and the library with its header (Debian: libdeepinfer-dev). It finds them
// through pkg-config (`#cgo pkg-config: deepinfer`): for an install outside the default paths set
// PKG_CONFIG_PATH=PREFIX/lib/pkgconfig, and at run time LD_LIBRARY_PATH=PREFIX/lib (or link with
// CGO_LDFLAGS="-Wl,-rpath,PREFIX/lib"). CGO_CFLAGS and CGO_LDFLAGS add to pkg-config's flags;
// building with -tags deepinfer_nopkgconfig leaves pkg-config out, and then CGO_CFLAGS=-IPREFIX/include
// and CGO_LDFLAGS=-LPREFIX/lib give everything. When the loaded library does not fit the header
// the package was built with, Open (and every other constructor) returns an error saying so
// (CheckVersion tells at any time).
package deepinfer
