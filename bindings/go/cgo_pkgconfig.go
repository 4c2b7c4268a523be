//go:build !deepinfer_nopkgconfig

package deepinfer

// The library is found through pkg-config (set PKG_CONFIG_PATH for an install outside the
// default search path). CGO_CFLAGS and CGO_LDFLAGS add to what pkg-config reports; build with
// -tags deepinfer_nopkgconfig to leave pkg-config out and give every flag that way.

// #cgo pkg-config: deepinfer
import "C"
