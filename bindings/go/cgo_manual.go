//go:build deepinfer_nopkgconfig

package deepinfer

// Without pkg-config: CGO_CFLAGS gives -I for deepinfer.h and CGO_LDFLAGS the -L of the library.

// #cgo LDFLAGS: -ldeepinfer
import "C"
